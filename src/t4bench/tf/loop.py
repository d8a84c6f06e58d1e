"""The TensorFlow training loop, with the MLPerf timing semantics of `t4bench.loop`:

init (untimed: data, model, tracing happens in the first timed step, as the PyTorch loop's first
step pays cudnn autotuning) -> run_start -> per epoch: train, evaluate, stop at the target quality
or at max_epochs -> run_stop (success / aborted). The per-epoch metrics and the result carry the
same names as the PyTorch loop's, so the MLflow contract does not depend on the framework.

Every worker evaluates the same sharded, all-reduced quality, so all take the same stop decision;
a callback's stop (the Optuna pruner, rank 0 only) reaches the others through an all-reduce.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from t4bench import mlflow_names as names
from t4bench.benchmark import Benchmark
from t4bench.frameworks import RunServices
from t4bench.mlperf import constants
from t4bench.progress import ProgressReporter
from t4bench.tf.context import StepBatches, TFContext
from t4bench.tf.trainer import KerasTrainer


@dataclass
class TFRunResult:
    """A `frameworks.TrainResult`."""

    outcome: str
    epochs_run: int
    epochs_to_converge: int | None
    time_to_train_s: float
    avg_throughput: float
    final_quality: dict[str, float] = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        return self.outcome == names.OUTCOME_CONVERGED


def reached_target(metrics: Mapping[str, float], target: Mapping[str, float]) -> bool:
    return all(metrics[name] >= float(threshold) for name, threshold in target.items())


def _callback_stop(callbacks: Sequence[Any], epoch: int, metrics: Mapping[str, float]) -> str | None:
    """The outcome a callback asked for (it raised an exception carrying `outcome`, the loop's
    StopRun), or None to keep training."""
    for callback in callbacks:
        try:
            callback.on_epoch_end(epoch, metrics)
        except Exception as stop:
            outcome = getattr(stop, "outcome", None)
            if outcome is None:
                raise
            return str(outcome)
    return None


def train_to_target(bench: Benchmark, cfg: DictConfig, ctx: TFContext, services: RunServices) -> TFRunResult:
    """Train until every `cfg.model.target` metric is reached or `cfg.max_epochs` epochs ran."""
    trainer = KerasTrainer(bench, cfg, ctx)
    mlperf, progress, unit = services.mlperf, services.progress, bench.throughput_unit
    target: Mapping[str, float] = cfg.model.target
    quality_key = next(iter(target))
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    mlperf.event(constants.TRAIN_SAMPLES, bench.train_size)
    mlperf.event("target_quality", dict(target))
    trainer.all_reduce_max([0.0])  # barrier: every worker has finished init
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    run_started = time.perf_counter()
    progress.line(f"init took {run_started - services.init_started:.1f}s; training to {dict(target)}")

    outcome, epochs_to_converge, epoch = names.OUTCOME_NOT_CONVERGED, None, 0
    throughputs: list[float] = []
    metrics: dict[str, float] = {}
    for epoch in range(1, int(cfg.max_epochs) + 1):
        mlperf.start(constants.EPOCH_START, epoch_num=epoch)
        epoch_started = time.perf_counter()
        batches = bench.train_batches(epoch)
        assert isinstance(batches, StepBatches)
        progress.epoch_start(epoch, len(batches))
        stats = trainer.train_epoch(batches, batches.samples, progress, unit)
        mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
        throughputs.append(stats["throughput"])
        if not math.isfinite(stats["train_loss"]):
            outcome = names.OUTCOME_DIVERGED
            progress.epoch_end(epoch, {**stats, "epoch_time_s": time.perf_counter() - epoch_started}, unit)
            break
        mlperf.start(constants.EVAL_START, epoch_num=epoch)
        quality = trainer.evaluate()
        mlperf.end(constants.EVAL_STOP, epoch_num=epoch)
        mlperf.event(constants.EVAL_ACCURACY, quality[quality_key], epoch_num=epoch)
        metrics = {
            **stats,
            names.EVAL_QUALITY: quality[quality_key],
            **{f"{names.EVAL_PREFIX}{name}": value for name, value in quality.items()},
            names.EPOCH_TIME_S: time.perf_counter() - epoch_started,
        }
        services.logger.log_epoch(epoch, metrics)
        progress.epoch_end(epoch, metrics, unit)
        if reached_target(quality, target):
            outcome, epochs_to_converge = names.OUTCOME_CONVERGED, epoch
            break
        stop = _callback_stop(services.callbacks, epoch, metrics) if ctx.is_main else None
        # rank 0's decision reaches every worker (1.0 = stop)
        if trainer.all_reduce_max([1.0 if stop is not None else 0.0])[0] > 0:
            outcome = stop or names.OUTCOME_PRUNED
            break

    time_to_train = time.perf_counter() - run_started
    mlperf.end(
        constants.RUN_STOP, status=constants.SUCCESS if outcome == names.OUTCOME_CONVERGED else constants.ABORTED
    )
    return TFRunResult(
        outcome=outcome,
        epochs_run=epoch,
        epochs_to_converge=epochs_to_converge,
        time_to_train_s=time_to_train,
        avg_throughput=sum(throughputs) / len(throughputs) if throughputs else 0.0,
        final_quality={k: v for k, v in metrics.items() if k.startswith(names.EVAL_PREFIX)},
    )


def measure_throughput(bench: Benchmark, cfg: DictConfig, ctx: TFContext, services: RunServices) -> TFRunResult:
    """`data=synthetic`: the same training step on one generated batch, for a fixed step count."""
    import tensorflow as tf

    trainer = KerasTrainer(bench, cfg, ctx)
    batch = bench.synthetic_batch()
    samples = int(cfg.model.batch_size) * ctx.world_size

    def steps(count: int) -> StepBatches:
        dataset = ctx.distribute(lambda: tf.data.Dataset.from_tensors(batch).repeat(count))
        return StepBatches(dataset, [samples] * count)

    mlperf, unit = services.mlperf, bench.throughput_unit
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    # untimed warm-up: tracing, XLA compilation, allocator growth
    warmup = steps(int(cfg.data.warmup_steps))
    trainer.train_epoch(warmup, warmup.samples, ProgressReporter("off"), unit)
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    started = time.perf_counter()
    timed = steps(int(cfg.data.steps))
    services.progress.epoch_start(1, len(timed))
    stats = trainer.train_epoch(timed, timed.samples, services.progress, unit)
    elapsed = time.perf_counter() - started
    metrics = {**stats, names.EPOCH_TIME_S: elapsed}
    services.logger.log_epoch(1, metrics)
    services.progress.epoch_end(1, metrics, unit)
    mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
    outcome = names.OUTCOME_THROUGHPUT_ONLY if math.isfinite(stats["train_loss"]) else names.OUTCOME_DIVERGED
    return TFRunResult(
        outcome=outcome,
        epochs_run=0,
        epochs_to_converge=None,
        time_to_train_s=elapsed,
        avg_throughput=stats["throughput"] if outcome == names.OUTCOME_THROUGHPUT_ONLY else 0.0,
    )
