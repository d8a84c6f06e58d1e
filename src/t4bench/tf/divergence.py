"""The divergence rule of `t4bench.cadence.DivergenceRule` (`divergence:` in conf/config.yaml) on
the losses the TensorFlow loop reads back: diverged when a read loss is not finite, or exceeds
`max_loss_ratio` x the mean loss of the run's first `reference_steps` steps. The losses are
all-reduced, so every worker takes the same decision without a collective of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from t4bench.cadence import Diverged, DivergenceRule

__all__ = ["Diverged", "DivergenceGuard"]


class DivergenceGuard:
    def __init__(self, section: Mapping[str, Any] | None) -> None:
        self.rule = DivergenceRule.from_config(section)
        self.reference_steps = self.rule.reference_steps
        self.reference: float | None = None

    def set_reference(self, first_losses: list[float]) -> None:
        """The mean of the run's first `reference_steps` step losses (once, when they have run)."""
        if self.reference is None and len(first_losses) >= self.reference_steps:
            self.reference = sum(first_losses[: self.reference_steps]) / self.reference_steps

    def check(self, loss: float, what: str = "train loss") -> None:
        self.rule.check(loss, self.reference, what)
