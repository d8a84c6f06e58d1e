"""Synthetic throughput through t4bench vs a bare PyTorch loop of the same model, batch and precision.

    python perf/harness_overhead.py model=resnet50 hw=h200 [more overrides]

Both measurements run from this one script on the same device: first `python -m t4bench` in
`input=synthetic` mode as a subprocess (its full training step: LR schedule, autocast, GradScaler,
progress, telemetry), its `avg_throughput` read back from the MLflow run; then, in this process, a
bare loop over the same model class, generated batch, loss and optimizer: zero_grad / forward /
backward / step, nothing else. Prints both figures and their ratio. Needs no dataset.

`perf/vision_throughput.py` runs this comparison for each vision model and prints a table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir

from t4bench import schedule as schedules
from t4bench import seeding
from t4bench.benchmark import benchmark_class
from t4bench.pytorch import optim
from t4bench.pytorch.context import RunContext
from t4bench.schedule import base_lr
from t4bench.spec import RunSpec, build_spec

CONF = Path(__file__).resolve().parents[1] / "conf"


@dataclass(frozen=True)
class Comparison:
    model: str
    batch: int
    precision: str
    device: str
    unit: str
    t4bench: float
    bare: float

    @property
    def ratio(self) -> float:
        return self.t4bench / self.bare if self.bare > 0 else float("nan")


def synthetic_config(overrides: list[str], out: Path) -> RunSpec:
    """The run spec of the config `python -m t4bench input=synthetic <overrides>` composes."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return build_spec(
            compose(
                config_name="config",
                overrides=[
                    "input=synthetic",
                    "progress=off",
                    f"tracking.uri=sqlite:///{out}/harness.db",
                    f"paths.data_root={out}",
                    *overrides,
                ],
            )
        )


def t4bench_throughput(overrides: list[str], out: Path) -> float:
    """`avg_throughput` of one `python -m t4bench input=synthetic` run, read from its MLflow run."""
    return t4bench_metrics(overrides, out)["avg_throughput"]


def t4bench_metrics(overrides: list[str], out: Path) -> dict[str, float]:
    """The metrics (avg_throughput, train_loss, ...) of one `python -m t4bench input=synthetic` run."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{out}/harness.db"
    mark = uuid.uuid4().hex
    command = [
        sys.executable,
        "-m",
        "t4bench",
        "input=synthetic",
        "progress=off",
        f"+tracking.tags.harness_check={mark}",
        f"hydra.run.dir={out}/runs/{mark}",
        *overrides,
    ]
    proc = subprocess.run(command, env={**os.environ, "MLFLOW_TRACKING_URI": uri}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(
            f"harness_overhead: {' '.join(command[1:])} exited {proc.returncode}: "
            f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}"
        )
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.harness_check = '{mark}'")
    if len(runs) != 1 or runs[0].info.status != "FINISHED":
        raise SystemExit(f"harness_overhead: expected one FINISHED run tagged {mark}, found {len(runs)}")
    return {name: float(value) for name, value in runs[0].data.metrics.items()}


def run_context(cfg: RunSpec, data_root: Path) -> RunContext:
    """The context a single-rank run builds (t4bench.pytorch.rank.run_context): cuda:0 for a GPU
    profile, the profile's precision, the model's memory format."""
    on_gpu = str(cfg.hw.name) != "cpu" and torch.cuda.is_available()
    device = torch.device("cuda", 0) if on_gpu else torch.device("cpu")
    return RunContext(
        device=device,
        precision=str(cfg.hw.precision),
        rank=0,
        world_size=1,
        local_rank=0,
        seed=int(cfg.seed),
        data_root=data_root,
        channels_last=bool(cfg.model.get("channels_last", False)) and on_gpu,
        data_seed=None if cfg.get("data_seed") is None else int(cfg.data_seed),
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """Start the peak-memory count on `device` (a no-op on the CPU). CUDA is set up first: in a
    process that has not touched it yet (a fresh --bare-worker, profile_step's first path),
    reset_peak_memory_stats does not, and on an H100 (2026-12-05) every bare loop of the suite failed
    there with "RuntimeError: Invalid device argument" (no caching allocator for the device yet)."""
    if device.type == "cuda":
        torch.cuda.init()
        torch.cuda.reset_peak_memory_stats(device)


def plain_backends(device: torch.device) -> None:
    """The process-wide switches `perf=default` sets (t4bench.pytorch.perf.PerfOptions.context):
    TF32 off for matmul and cuDNN, cuDNN autotune off, the attention backends as torch chose. Set
    here by hand, so that the bare loop does not run on torch's defaults (cuDNN TF32 on) while
    t4bench runs without them; tests/test_gpu_suite.py checks that both end up equal."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False


class BareLoop:
    """The bare eager training step of a benchmark: the work t4bench's `perf=default` step does
    (Trainer + perf_step.eager_step) and nothing else. The same seed before the model is built
    (same initial weights: a detector's proposals, and so its work, depend on them), model,
    synthetic batch, loss, optimizer, LR schedule (the warm-up keeps Mask R-CNN's loss finite),
    gradient clipping, precision (autocast, GradScaler), memory format and backend switches."""

    def __init__(self, cfg: RunSpec, ctx: RunContext) -> None:
        plain_backends(ctx.device)
        seeding.seed_torch(int(cfg.seed))  # as the rank does before it builds the benchmark
        self.bench = benchmark_class(cfg)(cfg, ctx)
        model = self.bench.build_model().to(ctx.device)
        if ctx.channels_last:
            model = model.to(memory_format=torch.channels_last)
        model.train()
        self.model = model
        lr = base_lr(cfg.model.optimizer, int(cfg.model.batch_size), int(cfg.model.schedule.ref_batch_size))
        self.opt = optim.build(self.bench.param_groups(model), cfg.model.optimizer, lr)
        self.base_lrs = [float(group["lr"]) for group in self.opt.param_groups]
        self.schedule = schedules.from_config(cfg.model.schedule, self.bench.train_size)
        self.samples_seen = self.steps = 0
        self.clip = float(cfg.model.optimizer.get("clip_grad_norm") or 0.0)
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=ctx.precision == "fp16")
        # once, as loop.measure_throughput does (a no-op for batches generated on the device)
        self.batch = ctx.to_device(self.bench.synthetic_batch())
        self.autocast: dict[str, Any] = dict(
            device_type=ctx.device.type, dtype=ctx.amp_dtype or torch.float32, enabled=ctx.amp_dtype is not None
        )

    def step(self) -> tuple[torch.Tensor, int]:
        """LR, zero_grad / forward / backward / (clip) / step: (the loss, units trained)."""
        factor = self.schedule.factor(self.samples_seen, self.steps)
        for group, base in zip(self.opt.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor
        with torch.autocast(**self.autocast):
            loss, units = self.bench.loss(self.model, self.batch)
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if self.clip > 0:
            self.scaler.unscale_(self.opt)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.scaler.step(self.opt)
        self.scaler.update()
        self.steps += 1
        self.samples_seen += self.bench.samples_in(self.batch)
        return loss, units


def timed(
    step: Callable[[], int],
    warmup: int,
    steps: int,
    device: torch.device,
    after_warmup: Callable[[], object] = lambda: None,
) -> tuple[int, float]:
    """(units, seconds) of `steps` calls of `step` (each returns its units) after `warmup` untimed
    ones, the device synchronised around the timed calls."""
    for _ in range(warmup):
        step()
    after_warmup()
    synchronize(device)
    started, units = time.perf_counter(), 0
    for _ in range(steps):
        units += step()
    synchronize(device)
    return units, time.perf_counter() - started


def bare_loop_throughput(cfg: RunSpec, ctx: RunContext) -> float:
    """Samples/s (the benchmark's units/s) of the `BareLoop` on the benchmark's synthetic batch."""
    loop = BareLoop(cfg, ctx)
    units, seconds = timed(lambda: loop.step()[1], int(cfg.input.warmup_steps), int(cfg.input.steps), ctx.device)
    return units / seconds


def add_run_args(parser: argparse.ArgumentParser, models: Sequence[str], hw_help: str, warmup: int) -> None:
    """The options every comparison script takes: models, device, hw, precision, batch, steps."""
    parser.add_argument("--models", nargs="+", choices=models, default=list(models))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--hw", default=None, help=hw_help)
    parser.add_argument(
        "--precision", choices=("fp32", "fp16", "bf16"), default=None, help="default: bf16 on cuda, fp32 on cpu"
    )
    parser.add_argument("--batch", type=int, default=None, help="per-GPU batch (default: each reference config's)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--warmup", type=int, default=warmup, help="untimed warm-up steps")


def check_run_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`add_run_args`' values: a CUDA device that exists, steps and batch >= 1, warm-up >= 0; then hw
    and precision default to h200 and bf16 on cuda, cpu and fp32 on the CPU."""
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no CUDA device (use --device cpu)")
    if args.steps < 1 or args.warmup < 0 or (args.batch is not None and args.batch < 1):
        parser.error("--steps and --batch must be >= 1, --warmup >= 0")
    # the device's defaults for what is left unset
    args.hw = args.hw or ("h200" if args.device == "cuda" else "cpu")
    args.precision = args.precision or ("bf16" if args.device == "cuda" else "fp32")


def compare(overrides: list[str], out: Path) -> Comparison:
    """t4bench first (a subprocess: it has the GPU to itself), then the bare loop in this process."""
    cfg = synthetic_config(overrides, out)
    harness = t4bench_throughput(overrides, out)
    ctx = run_context(cfg, out)
    bare = bare_loop_throughput(cfg, ctx)
    return Comparison(
        model=str(cfg.model.name),
        batch=int(cfg.model.batch_size),
        precision=str(cfg.hw.precision),
        device=str(ctx.device),
        unit=benchmark_class(cfg).throughput_unit,
        t4bench=harness,
        bare=bare,
    )


def main(overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = compare(overrides, Path(tmp))
    print(
        f"{result.model} batch {result.batch} {result.precision} on {result.device}: "
        f"t4bench {result.t4bench:,.1f} {result.unit}, bare loop {result.bare:,.1f} {result.unit}, "
        f"ratio {result.ratio:.3f}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
