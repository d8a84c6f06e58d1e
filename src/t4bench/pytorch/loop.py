"""The PyTorch training loop: the MLPerf cadence of `t4bench.cadence` (when to evaluate, stop,
what counts as diverged, the MLPerf events) on this framework's `Trainer`, plus checkpoints and
resume (`t4bench.pytorch.resume`). Every PyTorch benchmark plugs in through
`t4bench.benchmark.Benchmark`; nothing here knows which model it trains. The optimisation state is
`t4bench.pytorch.trainer.Trainer`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from t4bench import cadence
from t4bench.benchmark import Benchmark
from t4bench.cadence import EpochCallback
from t4bench.framework import EpochLogger, RunResult  # re-exported: callers name t4bench.pytorch.loop.RunResult
from t4bench.mlperf import MLPerfLog
from t4bench.progress import ProgressReporter
from t4bench.pytorch import distributed, shape_warmup
from t4bench.pytorch.context import RunContext
from t4bench.pytorch.resume import EpochCheckpoints
from t4bench.pytorch.trainer import LOSS_READ_INTERVAL, Trainer
from t4bench.spec import RunSpec
from t4bench.stopping import StopRun  # framework-free, so callbacks need not import torch

__all__ = ["LOSS_READ_INTERVAL", "RunResult", "StopRun", "Trainer", "measure_throughput", "train_to_target"]


class TorchSteps(cadence.TrainerSteps[Trainer]):
    """`cadence.Steps` on the PyTorch Trainer: an epoch's batches from the benchmark, the stop
    decision broadcast from rank 0."""

    def train(self, start: int, stop: int, progress: ProgressReporter, unit: str) -> dict[str, float]:
        return self.trainer.train_steps(self.iterator, stop - start, progress, unit)

    def barrier(self) -> None:
        distributed.barrier()

    def agree(self, stop: str | None) -> str | None:
        return distributed.broadcast_object(stop)


def train_to_target(
    bench: Benchmark,
    cfg: RunSpec,
    ctx: RunContext,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
    callbacks: Sequence[EpochCallback] = (),
    init_started: float,
) -> RunResult:
    """Train until every `cfg.model.target` metric is reached, `cfg.max_epochs` epochs ran, or the
    loss diverged; a `resume=` run continues where its checkpoint left off."""
    per_epoch = cadence.evaluations_per_epoch(float(cfg.get("eval_every", 1.0)))
    trainer = Trainer(bench, cfg, ctx)
    saves = EpochCheckpoints(cfg, ctx.is_main, logger)
    continued = saves.resume_into(trainer)
    shape_warmup.warm_up(trainer, bench, progress)  # perf.warmup_shapes: init time, before run_start
    services = {"mlperf": mlperf, "progress": progress, "logger": logger, "callbacks": callbacks}
    run = cadence.Cadence.of(bench, cfg, per_epoch, is_main=ctx.is_main, **services)

    def after_epoch(epoch: int, elapsed_s: float, throughputs: list[float], evaluations: int) -> None:
        saves.after_epoch(trainer, epoch, elapsed_s=elapsed_s, throughputs=throughputs, evaluations=evaluations)

    return cadence.train_to_target(
        TorchSteps(bench, trainer), run, init_started=init_started, continued=continued, after_epoch=after_epoch
    )


class TorchSynthetic:
    """`cadence.SyntheticSteps` on the PyTorch Trainer: the generated batch, on the device once
    before timing (Trainer.step then finds it there; NCF builds it on the host)."""

    def __init__(self, trainer: Trainer, batch: Any) -> None:
        self.trainer, self.batch = trainer, batch

    @property
    def global_batch(self) -> int:
        return self.trainer.global_batch

    def repeat(self, count: int, progress: ProgressReporter, unit: str) -> dict[str, float]:
        return self.trainer.train_steps(iter([self.batch] * count), count, progress, unit)

    def barrier(self) -> None:
        distributed.barrier()


def measure_throughput(
    bench: Benchmark,
    cfg: RunSpec,
    ctx: RunContext,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
    init_started: float,
) -> RunResult:
    """`input=synthetic`: the same training step on one generated batch, for a fixed step count
    (`cadence.measure_throughput`)."""
    steps = TorchSynthetic(Trainer(bench, cfg, ctx), ctx.to_device(bench.synthetic_batch()))
    return cadence.measure_throughput(steps, bench, cfg, mlperf=mlperf, progress=progress, logger=logger)
