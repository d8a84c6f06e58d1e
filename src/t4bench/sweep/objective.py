"""The seed-robust objective: one hyperparameter setting, several seeds, one number.

Per seed, the value is the run's objective metric (default `epochs_to_converge`) when it
converged. A run that did not converge is censored: it needed more than `max_epochs`, so it gets a
penalty that is worse than any converged run:

    not_converged: penalty.not_converged x budget      (default 1.5)
    diverged:      penalty.diverged x budget           (default 2.0: non-finite loss is worse)

with budget = max_epochs for `epochs_to_converge`, and the run's time projected to max_epochs
(run_train_s / epochs_run x max_epochs: the seconds it trained, as it has no time to train) for
`time_to_train_s`. For any other metric the run's
value is used as is when finite, else `penalty.value` (which must then be set).

The trial value aggregates the per-seed values:

    mean      plain mean
    median    median
    quantile  the `quantile` quantile (linear interpolation), e.g. 0.75 = "3 seeds in 4 at least this fast"
    mean_std  mean + std_weight x std (sample std over seeds) -- fast AND steady; for
              direction=maximize it is mean - std_weight x std
    max       the worst seed (min for maximize)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from t4bench.sweep.stats import quantile, sample_std
from t4bench.tracking import names

AGGREGATES = ("mean", "median", "quantile", "mean_std", "max")
EPOCHS = names.EPOCHS_TO_CONVERGE
TIME = names.TIME_TO_TRAIN_S


def _trained_s(result: Mapping[str, Any]) -> float:
    """How long a run that did not converge trained: run_train_s; a run logged before that metric
    existed carried its seconds in time_to_train_s."""
    for key in (names.RUN_TRAIN_S, TIME):
        value = result.get(key)
        if value is not None and math.isfinite(float(value)):
            return float(value)
    raise ValueError(f"a run that did not converge (outcome {result.get('outcome')}) has no {names.RUN_TRAIN_S}")


@dataclass(frozen=True)
class RobustObjective:
    metric: str = EPOCHS
    aggregate: str = "mean"
    direction: str = "minimize"
    quantile: float = 0.75
    std_weight: float = 1.0
    penalty_not_converged: float = 1.5
    penalty_diverged: float = 2.0
    penalty_value: float | None = None

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate={self.aggregate!r}: expected one of {', '.join(AGGREGATES)}")
        if self.direction not in ("minimize", "maximize"):
            raise ValueError(f"direction={self.direction!r}: expected minimize or maximize")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"quantile={self.quantile} must be in [0, 1]")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> RobustObjective:
        penalty = cfg.get("penalty") or {}
        return cls(
            metric=str(cfg.get("objective", EPOCHS)),
            aggregate=str(cfg.get("aggregate", "mean")),
            direction=str(cfg.get("direction", "minimize")),
            quantile=float(cfg.get("quantile", 0.75)),
            std_weight=float(cfg.get("std_weight", 1.0)),
            penalty_not_converged=float(penalty.get("not_converged", 1.5)),
            penalty_diverged=float(penalty.get("diverged", 2.0)),
            penalty_value=None if penalty.get("value") is None else float(penalty["value"]),
        )

    def seed_value(self, result: Mapping[str, Any], max_epochs: int) -> float:
        """The objective value of one seed's run (penalised when it did not converge)."""
        outcome = str(result.get("outcome", ""))
        raw = result.get(self.metric)
        value = float(raw) if raw is not None else math.nan
        if self.metric in (EPOCHS, TIME):
            if outcome == "converged" and math.isfinite(value):
                return value
            factor = self.penalty_diverged if outcome == "diverged" else self.penalty_not_converged
            if self.metric == EPOCHS:
                return factor * max_epochs
            epochs_run = max(float(result.get(names.EPOCHS_RUN, 0) or 0), 1.0)
            return factor * _trained_s(result) / epochs_run * max_epochs
        if math.isfinite(value) and outcome != "diverged":
            return value
        if self.penalty_value is None:
            raise ValueError(f"objective {self.metric!r} is {value} (outcome {outcome}) and penalty.value is not set")
        return self.penalty_value

    def aggregate_values(self, values: Sequence[float]) -> float:
        if not values:
            raise ValueError("no seed values to aggregate")
        vals = [float(v) for v in values]
        sign = 1.0 if self.direction == "minimize" else -1.0
        if self.aggregate == "mean":
            return sum(vals) / len(vals)
        if self.aggregate == "median":
            return quantile(vals, 0.5)
        if self.aggregate == "quantile":
            return quantile(vals, self.quantile)
        if self.aggregate == "mean_std":
            return sum(vals) / len(vals) + sign * self.std_weight * sample_std(vals)
        return max(vals) if sign > 0 else min(vals)

    def __call__(self, results: Sequence[Mapping[str, Any]], max_epochs: int) -> tuple[float, list[float]]:
        """(trial value, per-seed values)."""
        per_seed = [self.seed_value(r, max_epochs) for r in results]
        return self.aggregate_values(per_seed), per_seed
