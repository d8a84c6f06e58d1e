"""The TensorFlow training loop: the MLPerf cadence of `t4bench.cadence` (the same as the PyTorch
loop's: when to evaluate, stop, what counts as diverged, the MLPerf events) on the Keras trainer.
Tracing happens in the first timed step, as the PyTorch loop's first step pays cudnn autotuning.
The per-epoch metrics and the result carry the same names as the PyTorch loop's, so the MLflow
contract does not depend on the framework.

Every worker evaluates the same sharded, all-reduced quality, so all take the same stop decision;
a callback's stop (the Optuna pruner, rank 0 only) reaches the others through an all-reduce.
"""

from __future__ import annotations

from typing import Any

from t4bench import cadence
from t4bench.benchmark import Benchmark
from t4bench.framework import RunResult, RunServices
from t4bench.progress import ProgressReporter
from t4bench.spec import RunSpec
from t4bench.tf.context import StepBatches, TFContext
from t4bench.tf.trainer import KerasTrainer
from t4bench.tracking import names

#: MLPerf log key (after run_stop): SHA-256 of each worker's weights, in worker order
WEIGHTS_DIGESTS = "t4bench_weights_sha256_per_worker"


class KerasSteps(cadence.TrainerSteps[KerasTrainer]):
    """`cadence.Steps` on the Keras trainer: per-step sample counts from the benchmark's
    `StepBatches`, barriers and the stop decision through all-reduces."""

    def begin_epoch(self, epoch: int) -> int:
        count = super().begin_epoch(epoch)
        assert isinstance(self.batches, StepBatches)
        return count

    def train(self, start: int, stop: int, progress: ProgressReporter, unit: str) -> dict[str, float]:
        return self.trainer.train_steps(self.iterator, self.batches.samples[start:stop], progress, unit)

    def barrier(self) -> None:
        self.trainer.all_reduce_max([0.0])

    def agree(self, stop: str | None) -> str | None:
        # rank 0's decision reaches every worker (1.0 = stop)
        if self.trainer.all_reduce_max([1.0 if stop is not None else 0.0])[0] > 0:
            return stop or names.OUTCOME_PRUNED
        return None


def _check_replicas(trainer: KerasTrainer, services: RunServices) -> None:
    """After the timed run: record each worker's weights digest in the MLPerf log (one digest
    with one worker), and say so when data parallelism left the copies different."""
    digests = trainer.weights_digests()
    services.mlperf.event(WEIGHTS_DIGESTS, digests)
    if len(set(digests)) > 1:
        services.progress.line(f"warning: the {len(digests)} workers ended with different weights: {digests}")


def train_to_target(bench: Benchmark, cfg: RunSpec, ctx: TFContext, services: RunServices) -> RunResult:
    """Train until every `cfg.model.target` metric is reached, `cfg.max_epochs` epochs ran, or the
    loss diverged; evaluate `1 / eval_every` times per epoch (epochs count as trained fractions)."""
    per_epoch = cadence.evaluations_per_epoch(float(cfg.get("eval_every", 1.0)))
    trainer = KerasTrainer(bench, cfg, ctx)
    reporting = {"mlperf": services.mlperf, "progress": services.progress, "logger": services.logger}
    run = cadence.Cadence.of(bench, cfg, per_epoch, callbacks=services.callbacks, is_main=ctx.is_main, **reporting)
    result = cadence.train_to_target(KerasSteps(bench, trainer), run, init_started=services.init_started)
    _check_replicas(trainer, services)
    return result


class KerasSynthetic:
    """`cadence.SyntheticSteps` on the Keras trainer: the generated batch repeated through the
    strategy's distributed dataset, barriers through an all-reduce."""

    def __init__(self, trainer: KerasTrainer, ctx: TFContext, batch: Any, samples: int) -> None:
        self.trainer, self.ctx, self.batch, self.samples = trainer, ctx, batch, samples

    @property
    def global_batch(self) -> int:
        return self.trainer.global_batch

    def repeat(self, count: int, progress: ProgressReporter, unit: str) -> dict[str, float]:
        import tensorflow as tf

        batches = iter(self.ctx.distribute(lambda: tf.data.Dataset.from_tensors(self.batch).repeat(count)))
        return self.trainer.train_steps(batches, [self.samples] * count, progress, unit)

    def barrier(self) -> None:
        self.trainer.all_reduce_max([0.0])


def measure_throughput(bench: Benchmark, cfg: RunSpec, ctx: TFContext, services: RunServices) -> RunResult:
    """`input=synthetic`: the same training step on one generated batch, for a fixed step count
    (`cadence.measure_throughput`)."""
    trainer = KerasTrainer(bench, cfg, ctx)
    steps = KerasSynthetic(trainer, ctx, bench.synthetic_batch(), int(cfg.model.batch_size) * ctx.world_size)
    return cadence.measure_throughput(
        steps, bench, cfg, mlperf=services.mlperf, progress=services.progress, logger=services.logger
    )
