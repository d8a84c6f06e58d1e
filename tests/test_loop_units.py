"""The loop's evaluation cadence and divergence rule on their own (no training)."""

from __future__ import annotations

import math

import pytest
import torch

from t4bench.cadence import evaluation_points, evaluations_per_epoch
from t4bench.errors import T4BenchError
from t4bench.pytorch.divergence import Diverged, DivergenceGuard, DivergenceRule


def test_eval_every_is_one_over_a_whole_number() -> None:
    assert evaluations_per_epoch(1.0) == 1
    assert evaluations_per_epoch(0.25) == 4
    assert evaluations_per_epoch(1 / 3) == 3
    for bad in (0.0, -0.5, 1.5, 0.3):
        with pytest.raises(T4BenchError, match="eval_every"):
            evaluations_per_epoch(bad)


def test_evaluation_points_split_an_epoch_evenly_and_end_at_its_end() -> None:
    assert evaluation_points(100, 1) == [100]
    assert evaluation_points(100, 4) == [25, 50, 75, 100]
    assert evaluation_points(10, 4) == [2, 5, 8, 10]  # rounded to whole batches
    assert evaluation_points(2, 4) == [1, 2]  # never an evaluation after zero new batches
    assert evaluation_points(0, 4) == [0]


def guard(**rule: float | int | None) -> DivergenceGuard:
    return DivergenceGuard(DivergenceRule.from_config(rule))


def test_non_finite_loss_diverges_at_once() -> None:
    watch = guard()
    for value in (math.nan, math.inf):
        with pytest.raises(Diverged, match="train loss is"):
            watch.check(value)


def test_loss_far_above_the_initial_loss_diverges() -> None:
    watch = guard(max_loss_ratio=100, reference_steps=1)
    watch.observe(torch.tensor(0.69))
    for later in (5e21, 3e22):  # Adam at LR 1e6 keeps the loss finite but absurd
        watch.observe(torch.tensor(later))
    watch.check(50.0)  # below 100 x 0.69
    with pytest.raises(Diverged, match="over 100x"):
        watch.check(3e22)


def test_reference_is_the_mean_of_the_first_steps_and_null_ratio_checks_only_finiteness() -> None:
    watch = guard(max_loss_ratio=10, reference_steps=2)
    watch.observe(torch.tensor(1.0))
    watch.check(1e9)  # reference window not complete: no ratio yet
    watch.observe(torch.tensor(3.0))
    assert watch.reference == pytest.approx(2.0)
    watch.check(19.0)
    with pytest.raises(Diverged):
        watch.check(21.0)
    lenient = guard(max_loss_ratio=None)
    lenient.observe(torch.tensor(1.0))
    lenient.check(1e30)
    with pytest.raises(T4BenchError, match="reference_steps"):
        DivergenceRule.from_config({"reference_steps": 0})
