"""What a run logs at each evaluation (t4bench.tracking.epoch_metrics): the names reports, sweeps
and the pruner read, in the order the progress line prints them, for the cadence's evaluations and
the synthetic throughput run alike."""

from __future__ import annotations

import pytest

from t4bench.tracking import names
from t4bench.tracking.epoch_metrics import Evaluated, epoch_metrics, train_stats


def test_train_stats_are_the_slowest_ranks_units_a_second() -> None:
    stats = train_stats(loss=0.5, units=1200.0, slowest_s=4.0, lr=0.01)
    assert stats == {names.TRAIN_LOSS: 0.5, names.THROUGHPUT: 300.0, names.TRAIN_TIME_S: 4.0, names.LR: 0.01}
    # no time measured (no steps): no throughput rather than a division by zero
    assert train_stats(loss=0.5, units=0.0, slowest_s=0.0, lr=0.01)[names.THROUGHPUT] == 0.0


def test_an_evaluation_logs_every_quality_metric_and_the_targets_as_eval_quality() -> None:
    stats = train_stats(loss=0.5, units=1200.0, slowest_s=4.0, lr=0.01)
    metrics = epoch_metrics(stats, 5.0, Evaluated({"hr_at_10": 0.6, "ndcg": 0.4}, "hr_at_10", 1.5))
    assert list(metrics) == [
        names.TRAIN_LOSS,
        names.THROUGHPUT,
        names.TRAIN_TIME_S,
        names.LR,
        names.EVAL_QUALITY,
        "eval_hr_at_10",
        "eval_ndcg",
        names.EPOCH_TIME_S,
        names.EPOCH,
    ]
    assert metrics[names.EVAL_QUALITY] == metrics["eval_hr_at_10"] == pytest.approx(0.6)
    assert metrics["eval_ndcg"] == pytest.approx(0.4)
    assert (metrics[names.EPOCH_TIME_S], metrics[names.EPOCH]) == (5.0, 1.5)


def test_the_synthetic_run_logs_its_steps_and_time_only() -> None:
    stats = train_stats(loss=0.5, units=1200.0, slowest_s=4.0, lr=0.01)
    assert epoch_metrics(stats, 5.0) == {**stats, names.EPOCH_TIME_S: 5.0}
