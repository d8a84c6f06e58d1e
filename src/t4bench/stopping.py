"""How an evaluation callback ends a run early, for every framework's loop: it raises `StopRun`
with the outcome to record (the Optuna pruner: `pruned`). Framework-free, so that a callback
importing it loads neither torch nor TensorFlow."""

from __future__ import annotations


class StopRun(Exception):
    """Raised by an evaluation callback to end the run early (e.g. an Optuna pruner)."""

    def __init__(self, outcome: str, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
