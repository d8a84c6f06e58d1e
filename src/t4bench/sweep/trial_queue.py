"""Which trial a worker runs next, so that several workers end with exactly n_trials finished.

finished = COMPLETE + PRUNED trials. A worker asks for a new trial only while finished + running
< n_trials. For a journal storage the count and the ask happen under a file lock beside the
journal (storage.critical_section), so they are atomic across the workers of one machine. SQL
storages have no shared lock file: there the worker re-counts after asking, and a trial that
would exceed n_trials is told FAIL with t4bench_failed="surplus: ...".

Before counting, the stale trials of dead workers are failed and re-enqueued (liveness).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from t4bench.errors import T4BenchError
from t4bench.sweep import liveness
from t4bench.sweep.storage import critical_section, is_journal

SURPLUS = "surplus: n_trials reached by other workers"


def counts(study: Any) -> dict[str, int]:
    from optuna.trial import TrialState

    out = {s.name: 0 for s in TrialState}
    for trial in study.get_trials(deepcopy=False):
        out[trial.state.name] += 1
    return out


class TrialQueue:
    def __init__(
        self,
        study: Any,
        storage_url: str,
        n_trials: int,
        max_failures: int,
        stale_after: float,
        distributions: Mapping[str, Any],
        on_stale: Callable[[Any], None] = lambda trial: None,
    ) -> None:
        self.study, self.storage_url = study, storage_url
        self.n_trials, self.max_failures, self.stale_after = n_trials, max_failures, stale_after
        self.distributions = dict(distributions)
        #: called with each stale trial this worker failed (the sweep closes its MLflow runs)
        self.on_stale = on_stale

    def fail_stale(self) -> list[int]:
        failed = liveness.fail_stale_trials(self.study, self.stale_after)
        for trial in failed:
            self.on_stale(trial)
        return [t.number for t in failed]

    def next_trial(self) -> Any | None:
        """A claimed Optuna Trial to run, or None when the study has its n_trials."""
        with critical_section(self.storage_url):
            self.fail_stale()
            n = counts(self.study)
            if n["COMPLETE"] + n["PRUNED"] + n["RUNNING"] >= self.n_trials:
                return None
            excused = liveness.excused_failures(self.study.get_trials(deepcopy=False))
            if n["FAIL"] >= self.max_failures + excused:
                # one line and exit 2 (the sweeper's T4BenchError), not a traceback: nothing is broken
                raise T4BenchError(
                    f"{n['FAIL']} failed trial(s) (hydra.sweeper.max_failures={self.max_failures}): the sweep "
                    "stops; each failed trial says why in its t4bench_error attribute"
                )
            trial = self.study.ask(fixed_distributions=self.distributions)
            liveness.claim(trial)
        if not is_journal(self.storage_url) and self._is_surplus(trial):
            from optuna.trial import TrialState

            trial.set_user_attr(liveness.FAILED_ATTR, SURPLUS)
            self.study.tell(trial, state=TrialState.FAIL)
            return None
        return trial

    def _is_surplus(self, trial: Any) -> bool:
        from optuna.trial import TrialState

        live = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        earlier = [t for t in self.study.get_trials(deepcopy=False, states=live) if t.number < trial.number]
        return len(earlier) >= self.n_trials
