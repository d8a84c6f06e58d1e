"""Epoch callback that reports a run's progress to its Optuna trial and stops hopeless runs.

The Optuna sweeper adds it to each job as `callbacks.optuna_pruning`; the loop calls
`on_epoch_end(epoch, metrics)` after every evaluation that did not reach the target.

Reporting scheme (docs/sweeps.md):
- The study minimises epochs-to-converge (or time), while per-epoch progress is quality. Steps
  are evaluations (step = epoch at eval_every=1; at eval_every=0.25 epoch 5 is step 20, so a
  pruner's n_warmup_steps counts evaluations). The intermediate value at a step is the *quality
  gap* `target - eval_quality` (lower is better, the same direction as the study; 0 once
  converged). For a maximising study it is eval_quality.
- Only the trial's lead seed (the first of the trial's seeds, the same seed in every trial) reports,
  so the pruner compares learning curves seed-for-seed across trials. The sweeper runs the lead
  seed first; when it is pruned the trial's other seeds never start. When the lead seed converges
  at epoch k the sweeper reports gap 0 for steps k..max_epochs: at later epochs a trial that is
  still short of the target is compared with trials that were already there.
- A non-lead seed reports nothing; it stops at its next epoch only if the trial was pruned by then
  (seeds launched together in one batch by a parallel launcher).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from t4bench.stopping import StopRun  # not t4bench.pytorch.loop: that would load torch into a TensorFlow sweep
from t4bench.tracking import names

PRUNED_ATTR = "t4bench_pruned_at_epoch"


def intermediate_value(quality: float, target: float, direction: str) -> float:
    if direction == "maximize":
        return float(quality)
    return max(float(target) - float(quality), 0.0)


class OptunaPruningReporter:
    def __init__(
        self,
        storage: str,
        study_name: str,
        trial_number: int,
        target: Mapping[str, float] | float | None = None,
        direction: str = "minimize",
        report: bool = True,
        pruner: Any = None,
    ) -> None:
        self.storage_url = storage
        self.study_name = study_name
        self.trial_number = int(trial_number)
        if isinstance(target, Mapping):
            target = next(iter(target.values()))
        self.target = float(target) if target is not None else math.nan
        self.direction = direction
        self.report = bool(report)
        # the study's pruner (instantiated by Hydra from the sweeper's pruner config): Optuna keeps
        # pruners out of the storage, a study loaded here would otherwise get the default pruner
        self.pruner = pruner
        self._trial: Any = None
        self._trial_id = -1
        self._storage: Any = None

    def _optuna_trial(self) -> Any:
        """The running trial as an `optuna.trial.Trial`, made in this (job) process.

        Public API only: the storage classes' own methods map (study name, trial number) to the
        trial id that the Trial constructor takes."""
        if self._trial is None:
            import optuna

            from t4bench.sweep.storage import open_storage

            storage = open_storage(self.storage_url)
            study = optuna.load_study(study_name=self.study_name, storage=storage, pruner=self.pruner)
            study_id = storage.get_study_id_from_name(self.study_name)
            self._trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, self.trial_number)
            self._storage = storage
            self._trial = optuna.trial.Trial(study, self._trial_id)
        return self._trial

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> None:
        trial = self._optuna_trial()
        if not self.report:
            frozen = self._storage.get_trial(self._trial_id)
            if PRUNED_ATTR in frozen.user_attrs or frozen.state.is_finished():
                raise StopRun("pruned", f"trial {self.trial_number} was pruned (lead seed)")
            return
        value = intermediate_value(metrics[names.EVAL_QUALITY], self.target, self.direction)
        if not math.isfinite(value):
            return
        trial.report(value, int(epoch))
        if trial.should_prune():
            trial.set_user_attr(PRUNED_ATTR, int(epoch))
            raise StopRun(
                "pruned",
                f"optuna pruner: trial {self.trial_number} intermediate value {value:.4f} at epoch {epoch}",
            )
