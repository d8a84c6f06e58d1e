"""One Optuna trial: one Hydra job per seed (the lead seed first: it reports to the pruner), the
seeds aggregated by the robust objective, the result told to Optuna.

- a failed job fails the trial (the sweep goes on);
- SIGTERM / Ctrl-C fails the trial, enqueues its parameters again and re-raises (the sweep stops);
- a pruned lead seed makes the trial PRUNED; the other seeds never start (unless batch_seeds).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf

from t4bench import faults, signals
from t4bench.sweep import liveness, stats
from t4bench.sweep import space as spaces
from t4bench.sweep.objective import RobustObjective
from t4bench.sweep.pruning import PRUNED_ATTR
from t4bench.tracking import names
from t4bench.tracking.optuna_runs import OptunaSweepRuns, seed_run_name

log = logging.getLogger(__name__)


def quote(value: str) -> str:
    """A string as a quoted Hydra override value."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class TrialRunner:
    study: Any
    study_name: str
    storage_url: str
    sweep_id: str
    space: spaces.SearchSpace
    seeds: list[int]
    objective: RobustObjective
    launcher: Any
    #: the study's pruner config node (None or a no-op pruner: no pruning callback in the jobs)
    pruner_cfg: Any
    prunes: bool
    heartbeat_interval: float
    batch_seeds: bool
    runs: OptunaSweepRuns | None
    #: seed -> MLflow run of an interrupted trial's seed that this (retry) trial resumes
    resumable: dict[int, str] = field(default_factory=dict)

    def job_overrides(self, trial: Any, seed: int, lead: bool, trial_run: str | None) -> list[str]:
        overrides = [
            *self.space.fixed,
            *self.space.overrides(trial.params),
            f"seed={seed}",
            f"tracking.sweep_id={quote(self.sweep_id)}",
        ]
        resumed = self.resumable.get(seed)
        if resumed:  # the interrupted trial's run of this seed continues from its last checkpoint
            overrides.append(f"resume={resumed}")
        if trial_run:
            overrides += [
                f"tracking.parent_run_id={trial_run}",
                f"tracking.run_name={quote(seed_run_name(trial.number, seed))}",  # `seed=N`: quoted
            ]
        if self.prunes:
            key = "+callbacks.optuna_pruning"
            pruner = OmegaConf.to_container(self.pruner_cfg, resolve=True)
            overrides += [
                f"{key}._target_=t4bench.sweep.pruning.OptunaPruningReporter",
                f"{key}.storage={quote(self.storage_url)}",
                f"{key}.study_name={quote(self.study_name)}",
                f"{key}.trial_number={trial.number}",
                f"{key}.target='${{model.target}}'",
                f"{key}.direction={self.objective.direction}",
                f"{key}.report={'true' if lead else 'false'}",
                f"{key}.pruner={spaces.format_value(pruner)}",
            ]
        return overrides

    def _launch(self, trial: Any, indexed: Sequence[tuple[int, int]], trial_run: str | None) -> list[tuple[int, Any]]:
        batch = [self.job_overrides(trial, seed, i == 0, trial_run) for i, seed in indexed]
        first = trial.number * len(self.seeds) + indexed[0][0]
        returns = self.launcher.launch(batch, initial_job_idx=first)
        return [(i, ret) for (i, _), ret in zip(indexed, returns, strict=True)]

    def _run_seeds(self, trial: Any, trial_run: str | None) -> tuple[list[dict[str, Any]], int, bool]:
        """(per-seed results, max_epochs, pruned?)"""
        results: list[dict[str, Any]] = []
        max_epochs = 0
        indexed = list(enumerate(self.seeds))
        for batch in [indexed] if self.batch_seeds else [[s] for s in indexed]:
            for i, ret in self._launch(trial, batch, trial_run):
                result = dict(ret.return_value)  # raises the job's exception if it failed
                max_epochs = max(max_epochs, int(ret.cfg.max_epochs))
                result["seed"] = self.seeds[i]
                results.append(result)
                if self.runs is not None and result.get("run_id"):
                    self.runs.tag_seed_run(str(result["run_id"]), trial.number, i)
                if i == 0 and result.get("outcome") == "converged":
                    self._report_converged(
                        trial, result, int(ret.cfg.max_epochs), float(ret.cfg.get("eval_every", 1.0))
                    )
            if any(r.get("outcome") == "pruned" for r in results):
                return results, max_epochs, True
        return results, max_epochs, False

    def run(self, trial: Any, held: signals.Held | None = None) -> str:
        """Run `trial` to its end; returns its final state name. `held`: the stop signals the caller
        held back while it claimed the trial (`signals.hold_stop`), released inside the guard."""
        from optuna.trial import TrialState

        faults.kill_point("trial.claimed")
        trial_run = None
        self.resumable = {}
        try:  # the MLflow bookkeeping takes seconds on a busy host: a SIGTERM in it left the trial RUNNING
            signals.release(held)  # a SIGTERM held since the claim raises here, inside the guard
            if self.runs is not None:
                retry_of = trial.user_attrs.get(liveness.RETRY_ATTR)
                self.resumable = self.runs.interrupted_seed_runs(self.study, retry_of)
                trial_run = self.runs.start_trial(trial, self.seeds, retry_of)
        except Exception:
            raise
        except BaseException:
            self._interrupted(trial, trial_run)
            raise
        log.info("trial %d: %s on seeds %s", trial.number, trial.params, self.seeds)
        try:
            beat = self.runs.heartbeat(trial_run) if self.runs is not None else contextlib.nullcontext()
            with liveness.Heartbeat(trial, self.heartbeat_interval), beat:
                results, max_epochs, pruned = self._run_seeds(trial, trial_run)
        except (Exception, SystemExit) as err:  # a failed job: this trial fails, the sweep goes on
            log.error("trial %d failed: %s: %s", trial.number, type(err).__name__, err)
            trial.set_user_attr("t4bench_error", f"{type(err).__name__}: {err}"[:1000])
            self.study.tell(trial, state=TrialState.FAIL)
            self._end(trial_run, names.FAILED, "FAIL")
            return "FAIL"
        except BaseException:
            self._interrupted(trial, trial_run)
            raise
        trial.set_user_attr("seed_outcomes", [str(r.get("outcome")) for r in results])
        trial.set_user_attr("seed_run_ids", [str(r.get("run_id", "")) for r in results])
        trial.set_user_attr("epochs_run", sum(float(r.get("epochs_run", 0) or 0) for r in results))
        if pruned:
            frozen = self.study.tell(trial, state=TrialState.PRUNED)
            log.info(
                "trial %d: pruned at epoch %s of seed %s",
                trial.number,
                frozen.user_attrs.get(PRUNED_ATTR),
                self.seeds[0],
            )
            self._log(trial_run, results, None, [])
            self._end(trial_run, names.FINISHED, "PRUNED")
            return "PRUNED"
        value, per_seed = self.objective(results, max_epochs)
        trial.set_user_attr("seed_values", per_seed)
        self.study.tell(trial, value)
        log.info("trial %d: %s=%.4f (per seed %s)", trial.number, self.objective.aggregate, value, per_seed)
        self._log(trial_run, results, value, per_seed)
        self._end(trial_run, names.FINISHED, "COMPLETE")
        return "COMPLETE"

    def _report_converged(self, trial: Any, result: Mapping[str, Any], max_epochs: int, eval_every: float) -> None:
        """The lead seed converged at epoch k: its quality gap is 0 from there to max_epochs
        (docs/sweeps.md). Steps are evaluations, as the pruning callback reports them: epoch k is
        step k x evaluations per epoch."""
        if not self.prunes or self.objective.direction != "minimize":
            return
        k = float(result.get(names.EPOCHS_TO_CONVERGE, math.nan))
        if not math.isfinite(k):
            return
        per_epoch = max(1, round(1.0 / eval_every))
        first, last = round(k * per_epoch), max_epochs * per_epoch
        for step in range(first, max(first, last) + 1):
            trial.report(0.0, step)

    def _log(
        self, run_id: str | None, results: Sequence[Mapping[str, Any]], value: float | None, per_seed: Sequence[float]
    ) -> None:
        if self.runs is not None and run_id is not None:
            distribution = stats.flat_metrics(stats.describe_runs(results))
            self.runs.log_trial(run_id, results, value, per_seed, distribution)

    def _interrupted(self, trial: Any, trial_run: str | None) -> None:
        """SIGTERM / Ctrl-C: fail the trial, queue its parameters again (the caller re-raises: the
        sweep stops)."""
        from optuna.trial import TrialState

        trial.set_user_attr(liveness.FAILED_ATTR, "interrupted")
        frozen = self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        liveness.requeue(self.study, frozen, "interrupted")
        self._end(trial_run, names.KILLED, "FAIL")

    def _end(self, run_id: str | None, status: str, state: str) -> None:
        if self.runs is not None:
            self.runs.end_trial(run_id, status, state)
