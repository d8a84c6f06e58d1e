"""The divergence rule of `t4bench.pytorch.divergence` (`divergence:` in conf/config.yaml) on the losses
the TensorFlow loop reads back: diverged when a read loss is not finite, or exceeds
`max_loss_ratio` x the mean loss of the run's first `reference_steps` steps. The losses are
all-reduced, so every worker takes the same decision without a collective of its own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class Diverged(Exception):
    """The loss broke the rule; the loop ends the run with outcome `diverged`."""


class DivergenceGuard:
    def __init__(self, section: Mapping[str, Any] | None) -> None:
        section = section or {}
        ratio = section.get("max_loss_ratio", 100.0)
        self.max_loss_ratio = float(ratio) if ratio else None
        self.reference_steps = int(section.get("reference_steps", 1))
        if (self.max_loss_ratio is not None and self.max_loss_ratio < 0) or self.reference_steps < 1:
            raise ValueError(f"divergence.max_loss_ratio must be >= 0 or null and reference_steps >= 1, got {section}")
        self.reference: float | None = None

    def set_reference(self, first_losses: list[float]) -> None:
        """The mean of the run's first `reference_steps` step losses (once, when they have run)."""
        if self.reference is None and len(first_losses) >= self.reference_steps:
            self.reference = sum(first_losses[: self.reference_steps]) / self.reference_steps

    def check(self, loss: float, what: str = "train loss") -> None:
        if not math.isfinite(loss):
            raise Diverged(f"{what} is {loss}")
        ratio, reference = self.max_loss_ratio, self.reference
        if ratio is None or reference is None or not math.isfinite(reference) or reference <= 0:
            return
        if loss > ratio * reference:
            raise Diverged(f"{what} {loss:.4g} > {ratio:g} x the initial loss {reference:.4g}")
