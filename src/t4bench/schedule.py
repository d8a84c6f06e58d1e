"""Learning-rate schedules whose time axis is a config choice (`schedule.unit`).

Warm-up and decay points are written in epochs *at the reference batch* (`ref_batch_size`, the
1-GPU global batch). `unit=samples` keeps them at those epochs whatever the global batch is;
`unit=steps` converts them once into optimizer steps at the reference batch, so with a larger
global batch (more GPUs) the same step count covers more epochs — how NVIDIA's MLPerf v0.5 GNMT
decays, and the candidate explanation for the study's GPU-count-dependent epochs-to-converge.

The warm-up ramps the LR up to its base value over `warmup_epochs`: `warmup_shape=linear` (the
default) from ~0, `exponential` from 1% of it, growing by a constant factor per unit of progress
(NVIDIA's v0.5 GNMT: lr x 0.01^(1 - t/warmup)).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def base_lr(optimizer: Mapping[str, Any], global_batch: int, ref_batch: int) -> float:
    """The configured LR (of the `model.optimizer` map), linearly scaled with the global batch when
    `lr_scaling=linear` (ResNet's 0.128 x batch/256 rule: ref_batch=256); both frameworks' trainers
    start from it."""
    lr = float(optimizer["lr"])
    scaling = str(optimizer.get("lr_scaling", "none"))
    if scaling == "linear":
        return lr * global_batch / ref_batch
    if scaling != "none":
        raise ValueError(f"optimizer.lr_scaling must be none or linear, got {scaling!r}")
    return lr


def _linear_warmup(fraction: float) -> float:
    # from a small non-zero LR so the first step already moves
    return max(fraction, 1e-3)


#: NVIDIA's v0.5 GNMT starts its warm-up at 1% of the base LR
EXPONENTIAL_WARMUP_START = 0.01


def _exponential_warmup(fraction: float) -> float:
    return EXPONENTIAL_WARMUP_START ** (1.0 - fraction)


#: warm-up multiplier as a function of the fraction of the warm-up done (0 <= fraction < 1)
WARMUP_SHAPES = {"linear": _linear_warmup, "exponential": _exponential_warmup}


def check_unit(unit: str) -> None:
    if unit not in ("samples", "steps"):
        raise ValueError(f"schedule.unit must be 'samples' or 'steps', got {unit!r}")


def unit_progress(unit: str, samples_seen: int, steps_done: int, train_size: int, ref_batch_size: int) -> float:
    """Training progress as reference-batch epochs: samples seen (unit=samples), or steps done with
    each step counted as one reference batch however large the real global batch was (unit=steps)."""
    if unit == "samples":
        return samples_seen / train_size
    return steps_done * ref_batch_size / train_size


@dataclass(frozen=True)
class Schedule:
    unit: str
    kind: str
    warmup_epochs: float
    decay_epochs: Sequence[float]
    decay_factor: float
    ref_batch_size: int
    train_size: int
    warmup_shape: str = "linear"

    def __post_init__(self) -> None:
        check_unit(self.unit)
        if self.kind not in ("constant", "step", "inverse_sqrt"):
            raise ValueError(f"schedule.kind must be constant, step or inverse_sqrt, got {self.kind!r}")
        if self.warmup_shape not in WARMUP_SHAPES:
            raise ValueError(f"schedule.warmup_shape must be linear or exponential, got {self.warmup_shape!r}")

    def progress(self, samples_seen: int, steps_done: int) -> float:
        """Training progress in the schedule's unit, expressed as reference-batch epochs."""
        return unit_progress(self.unit, samples_seen, steps_done, self.train_size, self.ref_batch_size)

    def factor(self, samples_seen: int, steps_done: int) -> float:
        """Multiplier on the base learning rate after this much training."""
        t = self.progress(samples_seen, steps_done)
        warmup = self.warmup_epochs
        if warmup > 0 and t < warmup:
            return WARMUP_SHAPES[self.warmup_shape](t / warmup)
        if self.kind == "inverse_sqrt":
            return math.sqrt(warmup / t) if warmup > 0 and t > 0 else 1.0
        if self.kind == "step":
            passed = sum(1 for point in self.decay_epochs if t >= point)
            return self.decay_factor**passed
        return 1.0


def from_config(schedule: Mapping[str, Any], train_size: int) -> Schedule:
    """Build from the `model.schedule` map."""
    return Schedule(
        unit=str(schedule["unit"]),
        kind=str(schedule["kind"]),
        warmup_epochs=float(schedule["warmup_epochs"]),
        decay_epochs=[float(p) for p in schedule["decay_epochs"]],
        decay_factor=float(schedule["decay_factor"]),
        ref_batch_size=int(schedule["ref_batch_size"]),
        train_size=int(train_size),
        # optional so model configs written before it (linear warm-up) need not name it
        warmup_shape=str(schedule.get("warmup_shape", "linear")),
    )
