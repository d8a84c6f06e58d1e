"""The learning-rate schedule of the TensorFlow path: the PyTorch path's schedules
(`t4bench.schedule`: constant, step, inverse_sqrt, on the same samples/steps time axis) plus
`kind: polynomial`, the MLPerf v0.5 TensorFlow reference's: a linear warm-up to the base LR over
`warmup_epochs`, then (1 - progress)^power down to `end_factor` at `decay_end_epochs` (the
reference decays with power 2 over the whole training length)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from t4bench import schedule as schedules


class LRFactor(Protocol):
    def factor(self, samples_seen: int, steps_done: int) -> float: ...


@dataclass(frozen=True)
class PolynomialSchedule:
    unit: str
    warmup_epochs: float
    decay_end_epochs: float
    power: float
    end_factor: float
    ref_batch_size: int
    train_size: int

    def __post_init__(self) -> None:
        schedules.check_unit(self.unit)
        if self.decay_end_epochs <= self.warmup_epochs:
            raise ValueError(
                f"schedule.decay_end_epochs ({self.decay_end_epochs}) must come after the warm-up "
                f"({self.warmup_epochs} epochs)"
            )

    def progress(self, samples_seen: int, steps_done: int) -> float:
        return schedules.unit_progress(self.unit, samples_seen, steps_done, self.train_size, self.ref_batch_size)

    def factor(self, samples_seen: int, steps_done: int) -> float:
        t = self.progress(samples_seen, steps_done)
        if self.warmup_epochs > 0 and t < self.warmup_epochs:
            # the repo's linear warm-up: from a small non-zero LR so the first step already moves
            return max(t / self.warmup_epochs, 1e-3)
        done = min((t - self.warmup_epochs) / (self.decay_end_epochs - self.warmup_epochs), 1.0)
        return (1.0 - self.end_factor) * (1.0 - done) ** self.power + self.end_factor


def from_config(schedule: Mapping[str, Any], train_size: int, max_epochs: int) -> LRFactor:
    """The `model.schedule` map -> a schedule; `decay_end_epochs` defaults to the run's max_epochs."""
    if str(schedule["kind"]) != "polynomial":
        return schedules.from_config(schedule, train_size)
    end = schedule.get("decay_end_epochs")
    return PolynomialSchedule(
        unit=str(schedule["unit"]),
        warmup_epochs=float(schedule["warmup_epochs"]),
        decay_end_epochs=float(end if end is not None else max_epochs),
        power=float(schedule.get("power", 2.0)),
        end_factor=float(schedule.get("end_factor", 0.0)),
        ref_batch_size=int(schedule["ref_batch_size"]),
        train_size=int(train_size),
    )
