"""What a run logs at each evaluation (MLflow step = the evaluation's number), built here for both
frameworks and both paths, the MLPerf cadence and the synthetic throughput run: the trainer's
numbers for the steps since the previous evaluation (`train_stats`), then the evaluation's quality
and the time (`epoch_metrics`). The order is the one the progress line prints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from t4bench.tracking import names


def train_stats(loss: float, units: float, slowest_s: float, lr: float) -> dict[str, float]:
    """The steps since the previous evaluation, as global numbers (every rank gets the same): the
    mean loss, the units a second of the slowest rank, its seconds, the learning rate after the
    last step."""
    return {
        names.TRAIN_LOSS: loss,
        names.THROUGHPUT: units / slowest_s if slowest_s > 0 else 0.0,
        names.TRAIN_TIME_S: slowest_s,
        names.LR: lr,
    }


@dataclass(frozen=True)
class Evaluated:
    """An evaluation of the cadence: every quality metric of the benchmark, the one its target is
    on (eval_quality), and the (fractional) epochs trained when it was taken."""

    quality: Mapping[str, float]
    target_metric: str
    epochs_done: float


def epoch_metrics(stats: Mapping[str, float], seconds: float, evaluated: Evaluated | None = None) -> dict[str, float]:
    """`stats` (`train_stats`), the evaluation's quality when there was one (the synthetic
    throughput run has none), and `seconds` since the previous evaluation."""
    metrics = dict(stats)
    if evaluated is not None:
        metrics[names.EVAL_QUALITY] = evaluated.quality[evaluated.target_metric]
        metrics.update({f"{names.EVAL_PREFIX}{name}": value for name, value in evaluated.quality.items()})
    metrics[names.EPOCH_TIME_S] = seconds
    if evaluated is not None:
        metrics[names.EPOCH] = evaluated.epochs_done
    return metrics
