"""The TensorFlow training loop, with the MLPerf timing semantics of `t4bench.pytorch.loop`:

init (untimed: data, model, tracing happens in the first timed step, as the PyTorch loop's first
step pays cudnn autotuning) -> run_start -> per epoch: train, evaluate, stop at the target quality
or at max_epochs -> run_stop (success / aborted). The per-epoch metrics and the result carry the
same names as the PyTorch loop's, so the MLflow contract does not depend on the framework.

Every worker evaluates the same sharded, all-reduced quality, so all take the same stop decision;
a callback's stop (the Optuna pruner, rank 0 only) reaches the others through an all-reduce.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from t4bench import baselines
from t4bench import mlflow_names as names
from t4bench.benchmark import Benchmark
from t4bench.errors import T4BenchError
from t4bench.frameworks import RunResult, RunServices
from t4bench.mlperf import constants
from t4bench.progress import ProgressReporter
from t4bench.stopping import StopRun
from t4bench.tf.context import StepBatches, TFContext
from t4bench.tf.divergence import Diverged
from t4bench.tf.trainer import KerasTrainer

#: per-evaluation metric: the (fractional) epochs trained when it was taken (as the PyTorch loop's)
EPOCH_METRIC = "epoch"
#: MLPerf log key (after run_stop): SHA-256 of each worker's weights, in worker order
WEIGHTS_DIGESTS = "t4bench_weights_sha256_per_worker"


def reached_target(metrics: Mapping[str, float], target: Mapping[str, float]) -> bool:
    return all(metrics[name] >= float(threshold) for name, threshold in target.items())


def _callback_stop(callbacks: Sequence[Any], evaluation: int, metrics: Mapping[str, float]) -> str | None:
    """The outcome a callback asked for (it raised `StopRun`), or None to keep training."""
    for callback in callbacks:
        try:
            callback.on_epoch_end(evaluation, metrics)
        except StopRun as stop:
            return stop.outcome
        except Exception as stop:
            # t4bench.pytorch.loop's own StopRun, until it is t4bench.stopping's: same shape, other class
            if type(stop).__name__ != "StopRun" or not isinstance(getattr(stop, "outcome", None), str):
                raise
            return str(stop.outcome)  # type: ignore[attr-defined]
    return None


def _check_replicas(trainer: KerasTrainer, services: RunServices) -> None:
    """After the timed run: record each worker's weights digest in the MLPerf log (one digest
    with one worker), and say so when data parallelism left the copies different."""
    digests = trainer.weights_digests()
    services.mlperf.event(WEIGHTS_DIGESTS, digests)
    if len(set(digests)) > 1:
        services.progress.line(f"warning: the {len(digests)} workers ended with different weights: {digests}")


def evaluation_points(n_batches: int, per_epoch: int) -> list[int]:
    """Batch counts within an epoch after which to evaluate (the last is the end), as the PyTorch loop."""
    if n_batches <= 0:
        return [0]
    return sorted({max(1, round(j * n_batches / per_epoch)) for j in range(1, per_epoch + 1)})


def evaluations_per_epoch(eval_every: float) -> int:
    per_epoch = round(1.0 / eval_every) if eval_every > 0 else 0
    if not 0 < eval_every <= 1 or abs(per_epoch * eval_every - 1.0) > 1e-3:
        raise T4BenchError(f"eval_every={eval_every}: must be 1/k of an epoch for a whole k >= 1 (1, 0.5, 0.25, ...)")
    return per_epoch


def _mllog_epoch(epoch: float) -> float | int:
    return int(epoch) if float(epoch).is_integer() else round(epoch, 4)


def train_to_target(bench: Benchmark, cfg: DictConfig, ctx: TFContext, services: RunServices) -> RunResult:
    """Train until every `cfg.model.target` metric is reached, `cfg.max_epochs` epochs ran, or the
    loss diverged; evaluate `1 / eval_every` times per epoch (epochs count as trained fractions)."""
    per_epoch = evaluations_per_epoch(float(cfg.get("eval_every", 1.0)))
    trainer = KerasTrainer(bench, cfg, ctx)
    mlperf, progress, unit = services.mlperf, services.progress, bench.throughput_unit
    target: Mapping[str, float] = cfg.model.target
    quality_key = next(iter(target))
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    mlperf.event(constants.TRAIN_SAMPLES, bench.train_size)
    eval_size = bench.dataset_eval_size()
    if eval_size is not None:
        mlperf.event(constants.EVAL_SAMPLES, eval_size)
    mlperf.event("target_quality", dict(target))
    baselines.announce(bench, trainer.global_batch, target, services.logger, progress, ctx.is_main)  # untimed
    trainer.all_reduce_max([0.0])  # barrier: every worker has finished init
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    run_started = time.perf_counter()
    progress.line(f"init took {run_started - services.init_started:.1f}s; training to {dict(target)}")

    outcome, epochs_to_converge, epochs_done, note = names.OUTCOME_NOT_CONVERGED, None, 0.0, ""
    throughputs: list[float] = []
    metrics: dict[str, float] = {}
    evaluation = 0
    try:
        for epoch in range(1, int(cfg.max_epochs) + 1):
            mlperf.start(constants.EPOCH_START, epoch_num=epoch)
            batches = bench.train_batches(epoch)
            assert isinstance(batches, StepBatches)
            n_batches, iterator, done = len(batches), iter(batches), 0
            for point in evaluation_points(n_batches, per_epoch):
                started = time.perf_counter()
                progress.epoch_start(epoch, point - done)
                stats = trainer.train_steps(iterator, batches.samples[done:point], progress, unit)
                done = point
                epochs_done = epoch - 1 + (done / n_batches if n_batches else 1.0)
                if done == n_batches:
                    mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
                throughputs.append(stats["throughput"])
                evaluation += 1
                mlperf.start(constants.EVAL_START, epoch_num=_mllog_epoch(epochs_done))
                quality = trainer.evaluate()
                mlperf.end(constants.EVAL_STOP, epoch_num=_mllog_epoch(epochs_done))
                mlperf.eval_accuracy(quality, _mllog_epoch(epochs_done))
                metrics = {
                    **stats,
                    names.EVAL_QUALITY: quality[quality_key],
                    **{f"{names.EVAL_PREFIX}{name}": value for name, value in quality.items()},
                    names.EPOCH_TIME_S: time.perf_counter() - started,
                    EPOCH_METRIC: epochs_done,
                }
                services.logger.log_epoch(evaluation, metrics)
                progress.epoch_end(_mllog_epoch(epochs_done), metrics, unit)
                if reached_target(quality, target):
                    outcome, epochs_to_converge = names.OUTCOME_CONVERGED, epochs_done
                    break
                stop = _callback_stop(services.callbacks, evaluation, metrics) if ctx.is_main else None
                # rank 0's decision reaches every worker (1.0 = stop)
                if trainer.all_reduce_max([1.0 if stop is not None else 0.0])[0] > 0:
                    outcome = stop or names.OUTCOME_PRUNED
                    break
            if outcome != names.OUTCOME_NOT_CONVERGED:
                if done < n_batches:  # stopped within the epoch: its block ends here
                    mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
                break
    except Diverged as err:
        outcome, note = names.OUTCOME_DIVERGED, str(err)
        epochs_done = trainer.samples_seen / max(bench.train_size, 1)
        progress.line(f"diverged: {note}")

    time_to_train = time.perf_counter() - run_started
    status = constants.SUCCESS if outcome == names.OUTCOME_CONVERGED else constants.ABORTED
    mlperf.end(constants.RUN_STOP, status=status)
    _check_replicas(trainer, services)
    return RunResult(
        outcome=outcome,
        epochs_run=epochs_done,
        epochs_to_converge=epochs_to_converge,
        time_to_train_s=time_to_train,
        avg_throughput=sum(throughputs) / len(throughputs) if throughputs else 0.0,
        final_quality={k: v for k, v in metrics.items() if k.startswith(names.EVAL_PREFIX)},
        note=note,
    )


def measure_throughput(bench: Benchmark, cfg: DictConfig, ctx: TFContext, services: RunServices) -> RunResult:
    """`input=synthetic`: the same training step on one generated batch, for a fixed step count. A
    run whose loss diverges reports no throughput."""
    import tensorflow as tf

    trainer = KerasTrainer(bench, cfg, ctx)
    batch = bench.synthetic_batch()
    samples = int(cfg.model.batch_size) * ctx.world_size

    def steps(count: int) -> Iterator[Any]:
        return iter(ctx.distribute(lambda: tf.data.Dataset.from_tensors(batch).repeat(count)))

    mlperf, unit = services.mlperf, bench.throughput_unit
    warmup, timed = int(cfg.input.warmup_steps), int(cfg.input.steps)
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    started = time.perf_counter()
    try:
        # untimed warm-up: tracing, XLA compilation, allocator growth
        trainer.train_steps(steps(warmup), [samples] * warmup, ProgressReporter("off"), unit)
        trainer.all_reduce_max([0.0])  # barrier
        mlperf.end(constants.INIT_STOP)
        mlperf.start(constants.RUN_START)
        started = time.perf_counter()
        services.progress.epoch_start(1, timed)
        stats = trainer.train_steps(steps(timed), [samples] * timed, services.progress, unit)
    except Diverged as err:
        services.progress.line(f"diverged: {err}")
        mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
        # a throughput measured on a diverged loss is not a throughput
        return RunResult(names.OUTCOME_DIVERGED, 0.0, None, time.perf_counter() - started, float("nan"), note=str(err))
    elapsed = time.perf_counter() - started
    metrics = {**stats, names.EPOCH_TIME_S: elapsed}
    services.logger.log_epoch(1, metrics)
    services.progress.epoch_end(1, metrics, unit)
    mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
    return RunResult(names.OUTCOME_THROUGHPUT_ONLY, 0.0, None, elapsed, stats["throughput"])
