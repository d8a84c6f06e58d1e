"""When a run has diverged: a non-finite loss, or a loss far above the model's loss at the start.

MLPerf has no divergence rule; without one a run whose loss exploded to 3e22 (NCF at LR 1e6, Adam
keeps it finite) trains to `max_epochs` and reports `not_converged`, and a throughput measured on
NaNs looks like a throughput. Config (`divergence` in conf/config.yaml):

- `max_loss_ratio`: diverged when a read loss exceeds this multiple of the reference loss
  (null or 0: only non-finite losses count);
- `reference_steps`: the reference is the mean loss of the run's first this-many steps. The default
  1 is the loss at initialisation, before any update: an LR that blows the model up on its first
  update would otherwise raise the reference along with the loss.
"""

from __future__ import annotations

import torch

from t4bench.cadence import Diverged, DivergenceRule

__all__ = ["Diverged", "DivergenceGuard", "DivergenceRule"]


class DivergenceGuard:
    """Watches one run's losses. `observe` every step (device tensors: no host sync after the
    reference window), `check` whenever the loop reads a loss back anyway."""

    def __init__(self, rule: DivergenceRule) -> None:
        self.rule = rule
        self._reference_sum: torch.Tensor | None = None
        self._reference_count = 0
        self._reference: float | None = None

    def observe(self, loss: torch.Tensor) -> None:
        if self._reference_count < self.rule.reference_steps:
            value = loss.detach().double()
            self._reference_sum = value if self._reference_sum is None else self._reference_sum + value
            self._reference_count += 1

    @property
    def reference(self) -> float | None:
        """Mean loss of the first `reference_steps` steps, once they have all run."""
        window_full = self._reference_count >= self.rule.reference_steps
        if self._reference is None and self._reference_sum is not None and window_full:
            self._reference = float(self._reference_sum) / self._reference_count
        return self._reference

    def check(self, loss: float, what: str = "train loss", reference: float | None = None) -> None:
        """Raise `Diverged` if `loss` breaks the rule; `reference` replaces this rank's own (ranks
        that decide together pass the mean of theirs)."""
        self.rule.check(loss, self.reference if reference is None else reference, what)
