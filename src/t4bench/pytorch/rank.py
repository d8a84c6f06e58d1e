"""The PyTorch side of a rank (joined through `t4bench.pytorch.framework`): join the process group
(DDP or Horovod), set the CPU threads, take the device, build the benchmark and train it through
`t4bench.pytorch.loop`. Everything framework-neutral around it is `t4bench.rank`'s."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeVar

import torch

from t4bench import packing, seeding
from t4bench.benchmark import Benchmark
from t4bench.errors import T4BenchError
from t4bench.framework import RunServices
from t4bench.pytorch import determinism, distributed, launch, loop, perf_profiles
from t4bench.pytorch.context import RunContext
from t4bench.pytorch.perf import PerfOptions
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec
from t4bench.tracking import names

T = TypeVar("T")


def device_for(env: RunEnvironment) -> torch.device:
    """This rank's device: cuda:<local_rank> when the environment trains on CUDA, else the CPU."""
    if env.device_kind != "cuda":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise T4BenchError(
            f"hw={env.hw.name} trains on CUDA, but torch {torch.__version__} here cannot use it "
            "(a CPU build, or no usable driver); install a CUDA build of torch or use hw=cpu"
        )
    index = env.local_rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def run_context(cfg: RunSpec, env: RunEnvironment, device: torch.device) -> RunContext:
    """What a benchmark may know about this rank."""
    return RunContext(
        device=device,
        precision=str(env.hw.precision),
        rank=env.rank,
        world_size=env.world_size,
        local_rank=env.local_rank,
        seed=int(cfg.seed),
        data_root=Path(str(cfg.paths.data_root)),
        channels_last=bool(cfg.model.get("channels_last", False)) and device.type == "cuda",
        num_workers=int(env.hw.get("loader_workers", 0) or 0),
        data_seed=cfg.data_seed,
    )


class TorchRank:
    """A `framework.RankSession` for PyTorch benchmarks."""

    def __init__(self, cfg: RunSpec, env: RunEnvironment) -> None:
        self.cfg = cfg
        self.env = env
        launch.init_process_group(cfg, env)
        if env.threads is not None:
            torch.set_num_threads(env.threads)
        self.ctx = run_context(cfg, env, device_for(env))
        fraction = packing.memory_fraction(cfg.hw, cfg.derived.gpu_share)
        if fraction is not None and self.ctx.device.type == "cuda":  # packed: its share of the GPU, no more
            torch.cuda.set_per_process_memory_fraction(fraction, self.ctx.device)
        # before the benchmark builds anything; set on or off for every run (process-wide switches)
        # the profile in effect (under hw=auto, the found GPU's), as the loop will build its options
        compiled = bool(perf_profiles.chosen(cfg).options.get("compile"))
        determinism.apply(cfg.deterministic, compiled=compiled)

    def broadcast(self, obj: T) -> T:
        return distributed.broadcast_object(obj)

    def tags(self) -> dict[str, str]:
        world = self.env.world_size
        return {
            names.DIST_BACKEND: f"{self.env.dist_backend}/{distributed.backend()}" if world > 1 else "none",
            names.DEVICE: f"{self.ctx.device.type} x{world}",
            names.THREADS: str(torch.get_num_threads()),
            # the perf options in effect (t4bench.perf.*), so runs compare by what made them fast
            **PerfOptions.from_config(self.cfg, self.ctx.device).tags(self.ctx),
            # what torch says is on after determinism.apply, not what the config asked
            **seeding.deterministic_tags(determinism.active()),
        }

    def seed(self, seed: int) -> None:
        seeding.seed_torch(seed)

    def train(self, bench_cls: type[Benchmark], services: RunServices) -> loop.RunResult:
        records: dict[str, Any] = {
            "mlperf": services.mlperf,
            "progress": services.progress,
            "logger": services.logger,
            "init_started": services.init_started,
        }
        if self.ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.ctx.device)
        with determinism.explained():  # an op without a deterministic kernel: one line naming it
            bench = bench_cls(self.cfg, self.ctx)
            if self.cfg.input.synthetic:
                result = loop.measure_throughput(bench, self.cfg, self.ctx, **records)
            else:
                result = loop.train_to_target(bench, self.cfg, self.ctx, callbacks=services.callbacks, **records)
        if self.ctx.device.type != "cuda":
            return result
        return dataclasses.replace(result, peak_memory_gib=torch.cuda.max_memory_allocated(self.ctx.device) / 2**30)

    def close(self) -> None:
        distributed.shutdown()


def join(cfg: RunSpec, env: RunEnvironment) -> TorchRank:
    return TorchRank(cfg, env)
