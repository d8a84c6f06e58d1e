"""The one PyTorch training loop, with MLPerf timing semantics.

init (untimed: data, model) -> run_start -> per epoch: train, evaluating `1 / eval_every` times
(evenly spaced by batch count, the last at the epoch's end), stop at the first evaluation that
reaches the target quality, at max_epochs, or when the loss diverges -> run_stop (success /
aborted). Every PyTorch benchmark plugs in through `t4bench.benchmark.Benchmark`; nothing here
knows which model it trains. The optimisation state is `t4bench.pytorch.trainer.Trainer`'s.

Epochs are counted as trained fractions: an evaluation after batch b of n in epoch e is at epoch
(e - 1) + b / n, which is what `epochs_to_converge` reports. Per-evaluation metrics use the
evaluation's index (1, 2, ...) as step; with the default `eval_every: 1.0` that is the epoch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from omegaconf import DictConfig

from t4bench import baselines
from t4bench import mlflow_names as names
from t4bench.benchmark import Benchmark
from t4bench.errors import T4BenchError
from t4bench.frameworks import RunResult  # re-exported: callers name t4bench.pytorch.loop.RunResult
from t4bench.mlperf import MLPerfLog, constants
from t4bench.progress import ProgressReporter
from t4bench.pytorch import distributed
from t4bench.pytorch.context import RunContext
from t4bench.pytorch.divergence import Diverged
from t4bench.pytorch.resume import EpochCheckpoints
from t4bench.pytorch.trainer import LOSS_READ_INTERVAL, Trainer
from t4bench.stopping import StopRun  # framework-free, so callbacks need not import torch

__all__ = ["LOSS_READ_INTERVAL", "RunResult", "StopRun", "Trainer", "measure_throughput", "train_to_target"]

#: per-evaluation metric: the (fractional) epochs trained when it was taken
EPOCH_METRIC = "epoch"


class EpochCallback(Protocol):
    def on_epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> None:
        """After every evaluation that did not reach the target: `epoch` is the evaluation's index
        (the epoch when `eval_every` is 1), `metrics["epoch"]` the fractional epoch."""


class EpochLogger(Protocol):
    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None: ...


def reached_target(metrics: Mapping[str, float], target: Mapping[str, float]) -> bool:
    return all(metrics[name] >= float(threshold) for name, threshold in target.items())


def evaluations_per_epoch(eval_every: float) -> int:
    """`eval_every` (a fraction of an epoch, 1/k for a whole k) -> k."""
    per_epoch = round(1.0 / eval_every) if eval_every > 0 else 0
    if not 0 < eval_every <= 1 or abs(per_epoch * eval_every - 1.0) > 1e-3:
        raise T4BenchError(f"eval_every={eval_every}: must be 1/k of an epoch for a whole k >= 1 (1, 0.5, 0.25, ...)")
    return per_epoch


def evaluation_points(n_batches: int, per_epoch: int) -> list[int]:
    """Batch counts within an epoch of `n_batches` after which to evaluate (the last is the end)."""
    if n_batches <= 0:
        return [0]
    return sorted({max(1, round(j * n_batches / per_epoch)) for j in range(1, per_epoch + 1)})


def _mllog_epoch(epoch: float) -> float | int:
    """Whole epochs stay integers in the MLPerf log (as before evaluations within an epoch)."""
    return int(epoch) if float(epoch).is_integer() else round(epoch, 4)


def train_to_target(
    bench: Benchmark,
    cfg: DictConfig,
    ctx: RunContext,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
    callbacks: Sequence[EpochCallback] = (),
    init_started: float,
) -> RunResult:
    """Train until every `cfg.model.target` metric is reached, `cfg.max_epochs` epochs ran, or the
    loss diverged."""
    per_epoch = evaluations_per_epoch(float(cfg.get("eval_every", 1.0)))
    trainer = Trainer(bench, cfg, ctx)
    saves = EpochCheckpoints(cfg, ctx.is_main, logger)
    continued = saves.resume_into(trainer)
    target: Mapping[str, float] = cfg.model.target
    quality_key = next(iter(target))
    unit = bench.throughput_unit
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    mlperf.event(constants.TRAIN_SAMPLES, bench.train_size)
    eval_size = bench.dataset_eval_size()
    if eval_size is not None:
        mlperf.event(constants.EVAL_SAMPLES, eval_size)
    mlperf.event("target_quality", dict(target))
    baselines.announce(bench, trainer.global_batch, target, logger, progress, ctx.is_main)  # in init: untimed
    distributed.barrier()
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    run_started = time.perf_counter()
    progress.line(f"init took {run_started - init_started:.1f}s; training to {dict(target)}")

    outcome, epochs_to_converge, epochs_done, note = "not_converged", None, 0.0, ""
    throughputs: list[float] = continued.throughputs
    metrics: dict[str, float] = {}
    evaluation = continued.evaluations
    epochs_done = float(continued.first_epoch - 1)
    try:
        for epoch in range(continued.first_epoch, int(cfg.max_epochs) + 1):
            mlperf.start(constants.EPOCH_START, epoch_num=epoch)
            batches = bench.train_batches(epoch)
            n_batches = len(batches)
            iterator = iter(batches)
            done = 0
            for point in evaluation_points(n_batches, per_epoch):
                started = time.perf_counter()
                progress.epoch_start(epoch, point - done)
                stats = trainer.train_steps(iterator, point - done, progress, unit)
                done = point
                epochs_done = epoch - 1 + (done / n_batches if n_batches else 1.0)
                if done == n_batches:
                    mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
                throughputs.append(stats["throughput"])
                evaluation += 1
                quality = _evaluate(trainer, mlperf, quality_key, epochs_done)
                metrics = {
                    **stats,
                    names.EVAL_QUALITY: quality[quality_key],
                    **{f"{names.EVAL_PREFIX}{name}": value for name, value in quality.items()},
                    # time since the previous evaluation (the epoch's, with one evaluation per epoch)
                    "epoch_time_s": time.perf_counter() - started,
                    EPOCH_METRIC: epochs_done,
                }
                logger.log_epoch(evaluation, metrics)
                progress.epoch_end(_progress_epoch(epochs_done), metrics, unit)
                if reached_target(quality, target):
                    outcome, epochs_to_converge = "converged", epochs_done
                    break
                stop = _run_callbacks(callbacks, evaluation, metrics) if ctx.is_main else None
                stop = distributed.broadcast_object(stop)
                if stop is not None:
                    outcome = stop
                    break
            if outcome != "not_converged":
                if done < n_batches:  # stopped within the epoch: its block ends here
                    mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
                break
            saves.after_epoch(
                trainer,
                epoch,
                elapsed_s=continued.elapsed_s + time.perf_counter() - run_started,
                throughputs=throughputs,
                evaluations=evaluation,
            )
    except Diverged as err:
        outcome, note = "diverged", str(err)
        epochs_done = trainer.samples_seen / max(bench.train_size, 1)
        progress.line(f"diverged: {note}")

    time_to_train = continued.elapsed_s + time.perf_counter() - run_started
    status = constants.SUCCESS if outcome == "converged" else constants.ABORTED
    mlperf.end(constants.RUN_STOP, status=status)
    return RunResult(
        outcome=outcome,
        epochs_run=epochs_done,
        epochs_to_converge=epochs_to_converge,
        time_to_train_s=time_to_train,
        avg_throughput=sum(throughputs) / len(throughputs) if throughputs else 0.0,
        final_quality={k: v for k, v in metrics.items() if k.startswith("eval_")},
        note=note,
    )


def _evaluate(trainer: Trainer, mlperf: MLPerfLog, quality_key: str, epoch: float) -> dict[str, float]:
    epoch_num = _mllog_epoch(epoch)
    mlperf.start(constants.EVAL_START, epoch_num=epoch_num)
    quality = trainer.evaluate()
    mlperf.end(constants.EVAL_STOP, epoch_num=epoch_num)
    mlperf.eval_accuracy(quality, epoch_num)
    return quality


def _progress_epoch(epoch: float) -> Any:
    # ProgressReporter prints what it is given: 3 for whole epochs, 3.25 within one
    return _mllog_epoch(epoch)


def measure_throughput(
    bench: Benchmark,
    cfg: DictConfig,
    ctx: RunContext,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
    init_started: float,
) -> RunResult:
    """`input=synthetic`: the same training step on one generated batch, for a fixed step count. A
    run whose loss diverges (the same rule as training) reports no throughput."""
    trainer = Trainer(bench, cfg, ctx)
    # once, before timing: Trainer.step then finds it on the device (NCF builds it on the host)
    batch = ctx.to_device(bench.synthetic_batch())
    unit = bench.throughput_unit
    warmup, steps = int(cfg.input.warmup_steps), int(cfg.input.steps)
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    started = time.perf_counter()
    try:
        # untimed warm-up: kernel selection, allocator growth, lazy init
        trainer.train_steps(iter([batch] * warmup), warmup, ProgressReporter("off"), unit)
        distributed.barrier()
        mlperf.end(constants.INIT_STOP)
        mlperf.start(constants.RUN_START)
        started = time.perf_counter()
        progress.epoch_start(1, steps)
        stats = trainer.train_steps(iter([batch] * steps), steps, progress, unit)
    except Diverged as err:
        progress.line(f"diverged: {err}")
        mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
        return RunResult(
            outcome="diverged",
            epochs_run=0.0,
            epochs_to_converge=None,
            time_to_train_s=time.perf_counter() - started,
            # a throughput measured on a diverged loss is not a throughput
            avg_throughput=float("nan"),
            note=str(err),
        )
    elapsed = time.perf_counter() - started
    metrics = {**stats, "epoch_time_s": elapsed}
    logger.log_epoch(1, metrics)
    progress.epoch_end(1, metrics, unit)
    mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
    return RunResult(
        outcome="throughput_only",
        epochs_run=0.0,
        epochs_to_converge=None,
        time_to_train_s=elapsed,
        avg_throughput=stats["throughput"],
    )


def _run_callbacks(callbacks: Sequence[EpochCallback], evaluation: int, metrics: Mapping[str, float]) -> str | None:
    """The outcome a callback asked for, or None to keep training."""
    for callback in callbacks:
        try:
            callback.on_epoch_end(evaluation, metrics)
        except StopRun as stop:
            return stop.outcome
    return None
