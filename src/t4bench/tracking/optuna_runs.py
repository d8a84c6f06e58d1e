"""The MLflow runs of one Optuna sweep (layout in sweep_layout and docs/sweeps.md):

    <study>-<uid4>              parent: the sweep's fixed params (the composed config minus the
                                searched keys), model/hw/scale tags, best-trial tags and metrics
      trial-007                 one run per trial: its parameters, per-seed distribution metrics
        seed=101                the training runs (named through tracking.run_name)

Names fit the runs table's Run Name column at each run's depth (t4bench.tracking.run_names): a longer one
keeps its head and a hash of the whole (`gnmt_ding_tu~3f9a`); the tags keep the long identity.

The parent belongs to one study: the study keeps the parent's run id as a user attribute, and the
parent carries the study's identity tag (study name, storage and a uid made with the study), so a
resumed sweep reopens its own parent and another study reusing the sweep id fails with one line.

A process may die between any two writes (t4bench.faults.TRIAL_START_STEPS), so parent and trial
runs are created with every tag in the one create call, their owner's (`liveness.owner_tags`)
included: a run that exists is findable (by sweep id and identity) and closable (`runs repair`, or
the next run of the sweep, which repairs its experiment first) whatever step the process died at.
Tags beyond the run's budget move to its tag file when it ends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from t4bench import faults
from t4bench.spec import RunSpec
from t4bench.tracking import liveness, names, run_names, sweep_layout

log = logging.getLogger(__name__)

#: heartbeat interval of parent and trial runs (seconds): their owner beats while it works on them
HEARTBEAT_S = 30.0
PARENT_ATTR = "mlflow_parent_run_id"
TRIAL_RUN_ATTR = "mlflow_run_id"
STATE_TAG = names.OPTUNA_STATE
TRIAL_TAG = names.TRIAL_NUMBER


def trial_run_name(number: int) -> str:
    return run_names.trial(number)


def seed_run_name(number: int, seed: int) -> str:
    """`seed=<seed>` under its trial's run (the trial number is the run's t4bench.trial_number)."""
    return run_names.seed(seed, depth=2)


def parent_run_name(study_name: str, study_uid: str) -> str:
    """`<study>-<uid4>` fitted to the Run Name column (the study's name and identity are in the
    parent's t4bench.optuna.study tag and its tag file)."""
    return run_names.optuna_parent(study_name, study_uid)


class OptunaSweepRuns:
    def __init__(
        self,
        spec: RunSpec,
        sweep_id: str,
        study_name: str,
        storage_url: str,
        study_uid: str,
        config_tags: Mapping[str, str],
    ) -> None:
        self.mlflow, self.exp_id = sweep_layout.for_config(spec.config)
        self.uri = str(spec.tracking.uri)  # resolvable now: for_config set Hydra's node
        self.spec, self.sweep_id = spec, sweep_id
        self.study_name, self.storage_url, self.study_uid = study_name, storage_url, study_uid
        self.parent_id: str | None = None
        #: model / hw / hw_count / scale of the composed config, on the parent and every trial
        self.config_tags = dict(config_tags)
        #: this process keeps the parent alive (owner tags, heartbeat): the first worker, which
        #: outlives the others it started
        self.owns_parent = True

    @property
    def identity(self) -> str:
        return f"optuna:{self.study_name}@{self.storage_url}#{self.study_uid}"

    def check_sweep_id(self, known_parent: str | None) -> None:
        """Raise SweepIdConflict when the sweep id names the parent of another sweep (a study
        that recorded its own parent, `known_parent`, is resumed as it is)."""
        if known_parent:
            return
        for run in sweep_layout.find_runs(self.mlflow, self.exp_id, self.sweep_id, "parent"):
            sweep_layout.check_identity(self.mlflow, run, self.sweep_id, self.identity)

    def study_tags(self) -> dict[str, str]:
        return {
            **self.config_tags,
            names.OPTUNA_STUDY: self.study_name,
            names.OPTUNA_STORAGE: self.storage_url,
            names.OPTUNA_STUDY_UID: self.study_uid,
        }

    def repair_experiment(self) -> None:
        """Close the runs of this experiment whose process is gone (a sweep killed at any step
        of a trial's start left them RUNNING), before this sweep adds its own."""
        try:
            for verdict in liveness.repair(self.mlflow, [self.exp_id]):
                log.warning("%s", verdict.describe())
        except Exception as err:  # a failed clean-up must not stop the sweep
            log.warning("stale-run check skipped: %s", err)

    def _create_owned(self, run_name: str, tags: Mapping[str, Any]) -> str:
        """A run with all its tags and this process's owner tags in one create call: never a run
        that recovery cannot find or judge."""
        every = {k: str(v)[:5000] for k, v in tags.items()}  # MLflow caps a tag's value
        every.update(liveness.owner_tags(HEARTBEAT_S))
        return str(self.mlflow.create_run(self.exp_id, run_name=run_name, tags=every).info.run_id)

    def heartbeat(self, run_id: str | None) -> Any:
        """`with runs.heartbeat(run_id):` the run's heartbeat while this process works on it (a
        `runs repair` on another host judges it by that); nothing for no run."""
        import contextlib

        if run_id is None:
            return contextlib.nullcontext()
        return liveness.Heartbeat(self.uri, run_id, HEARTBEAT_S, repair_on_start=False, owned=True)

    def _close(self, run_id: str, status: str) -> None:
        """Fold the liveness and create-time tags into the run's tag file, then end it."""
        from t4bench.tracking.tags import fold_tags

        try:
            fold_tags(self.mlflow, run_id)
        except Exception as err:  # ending the run matters more than its tag budget
            log.warning("MLflow run %s: tags not folded: %s", run_id, err)
        self.mlflow.set_terminated(run_id, status=status)

    # ---- parent --------------------------------------------------------------------------
    def _known_parent(self, known: Any) -> Any | None:
        if not known:
            return None
        try:
            run = self.mlflow.get_run(str(known))
        except Exception:  # gone from this tracking store: make a new one
            return None
        return None if run.info.lifecycle_stage == "deleted" else run

    def open_parent(self, study: Any, *, reopen: bool, params: Mapping[str, Any]) -> str:
        """The study's parent run: the one the study recorded (RUNNING again when `reopen`), else
        one found by sweep id that carries this study's identity, else a new one."""
        known = study.user_attrs.get(PARENT_ATTR)
        run = self._known_parent(known)
        if run is None:
            found = sweep_layout.find_runs(self.mlflow, self.exp_id, self.sweep_id, "parent")
            if found:
                sweep_layout.check_identity(self.mlflow, found[0], self.sweep_id, self.identity)
                run = found[0]
        if run is not None:
            self.parent_id = str(run.info.run_id)
            if run.info.run_id == known:  # a study made before identity tags: its own parent all the same
                sweep_layout.set_tags(self.mlflow, self.parent_id, {names.SWEEP_IDENTITY: self.identity})
            if reopen and self.owns_parent:  # owned before it is RUNNING again: never RUNNING and ownerless
                liveness.take_over(self.mlflow, self.parent_id, HEARTBEAT_S)
            if reopen and run.info.status != names.RUNNING:
                self.mlflow.update_run(self.parent_id, status=names.RUNNING)
        else:
            tags = sweep_layout.parent_tags(self.sweep_id, "optuna", self.identity, self.study_tags())
            self.parent_id = self._create_owned(parent_run_name(self.study_name, self.study_uid), tags)
            faults.kill_point("parent.created")
        if known != self.parent_id:
            study.set_user_attr(PARENT_ATTR, self.parent_id)
        try:
            sweep_layout.log_params(self.mlflow, self.parent_id, params)
        except Exception as err:  # logged before by this study (params are immutable): keep them
            log.info("sweep parent params already logged: %s", err)
        return self.parent_id

    def update_parent(self, summary: Mapping[str, Any], done: bool | None, out_dir: Path | None) -> None:
        """Progress metrics and best-trial tags; with out_dir the summary artifact too; `done`
        ends the parent FINISHED."""
        if self.parent_id is None:
            return
        counts = summary["counts"]
        metrics = {
            "n_complete": counts["COMPLETE"],
            "n_pruned": counts["PRUNED"],
            "n_failed": counts["FAIL"],
            "epochs_spent": summary["epochs_spent"],
        }
        tags: dict[str, Any] = {}
        if "best_value" in summary:
            metrics["best_value"] = summary["best_value"]
            tags[names.BEST_TRIAL] = summary["best_trial"]
            tags.update({f"{names.BEST_PREFIX}{k}": v for k, v in summary["best_params"].items()})
        try:
            step = counts["COMPLETE"] + counts["PRUNED"]
            sweep_layout.log_metrics(self.mlflow, self.parent_id, metrics, step=step)
            sweep_layout.set_tags(self.mlflow, self.parent_id, tags)
            if out_dir is not None:
                out_dir.mkdir(parents=True, exist_ok=True)
                path = out_dir / "optuna_summary.json"
                path.write_text(json.dumps(summary, indent=2, default=str))
                self.mlflow.log_artifact(self.parent_id, str(path))
            if done:
                self._close(self.parent_id, names.FINISHED)
        except Exception as err:  # tracking must not lose the study's accounting
            log.warning("MLflow parent run %s: %s", self.parent_id, err)

    def end_parent(self, status: str) -> None:
        if self.parent_id is None:
            return
        try:
            self._close(self.parent_id, status)
        except Exception as err:
            log.warning("MLflow parent run %s: %s", self.parent_id, err)

    # ---- trials --------------------------------------------------------------------------
    def start_trial(self, trial: Any, seeds: Sequence[int], retry_of: Any = None) -> str:
        """The trial's run, created whole (tags and owner in one call), then recorded on the trial
        at once, then given its params: a kill between any two leaves a run that `runs repair`
        or the next sweep closes."""
        own: dict[str, Any] = {TRIAL_TAG: trial.number, STATE_TAG: "RUNNING", **self.study_tags()}
        if retry_of is not None:
            own[names.RETRY_OF] = retry_of
        tags = sweep_layout.child_tags(str(self.parent_id), self.sweep_id, "trial", own)
        run_id = self._create_owned(trial_run_name(trial.number), tags)
        faults.kill_point("trial.run_created")
        trial.set_user_attr(TRIAL_RUN_ATTR, run_id)
        faults.kill_point("trial.run_recorded")
        sweep_layout.log_params(self.mlflow, run_id, {**trial.params, "seeds": ",".join(map(str, seeds))})
        return run_id

    def tag_seed_run(self, run_id: str, trial_number: int, seed_index: int) -> None:
        sweep_layout.set_tags(
            self.mlflow,
            run_id,
            {TRIAL_TAG: trial_number, names.OPTUNA_STUDY: self.study_name, names.SEED_INDEX: seed_index},
        )

    def log_trial(
        self,
        run_id: str,
        results: Sequence[Mapping[str, Any]],
        value: float | None,
        per_seed: Sequence[float],
        distribution: Mapping[str, float],
    ) -> None:
        """The trial's metrics: `distribution` (its seeds' results described, sweep.stats), the
        epochs spent, the objective, and each seed's objective as a step."""
        metrics = dict(distribution)
        metrics["epochs_spent"] = sum(float(r.get("epochs_run", 0) or 0) for r in results)
        if value is not None:
            metrics["objective"] = value
        sweep_layout.log_metrics(self.mlflow, run_id, metrics)
        for i, v in enumerate(per_seed):
            sweep_layout.log_metrics(self.mlflow, run_id, {"seed_objective": v}, step=i)

    def end_trial(self, run_id: str | None, status: str, state: str) -> None:
        """End a trial run; a trial that did not finish also closes its seed runs still RUNNING
        (a killed worker's training runs never closed themselves)."""
        if not run_id:
            return
        try:
            sweep_layout.set_tags(self.mlflow, run_id, {STATE_TAG: state})
            self._close(run_id, status)
            if status != names.FINISHED:
                closed = sweep_layout.close_running_children(self.mlflow, self.exp_id, run_id, status)
                if closed:
                    log.warning("trial run %s: closed %d seed run(s) left RUNNING as %s", run_id, len(closed), status)
        except Exception as err:  # tracking must not lose the study's accounting
            log.warning("MLflow trial run %s: %s", run_id, err)

    def interrupted_seed_runs(self, study: Any, retry_of: Any) -> dict[int, str]:
        """seed -> MLflow run of the trial `retry_of` redoes, for the seed runs that did not
        finish and left checkpoints (`t4bench.checkpoint_dir`): the retry resumes them. A seed
        without one is trained from scratch; its old run stays KILLED/FAILED, marked."""
        if retry_of is None:
            return {}
        from t4bench.tracking.tags import run_tags

        try:
            old = study.trials[int(retry_of)]
            trial_run = old.user_attrs.get(TRIAL_RUN_ATTR)
            if not trial_run:
                return {}
            query = f"tags.`{names.MLFLOW_PARENT_RUN_ID}` = '{trial_run}'"
            found = {}
            for run in self.mlflow.search_runs([self.exp_id], filter_string=query, max_results=1000):
                seed = run.data.params.get("seed")
                if run.info.status == names.FINISHED or seed is None:
                    continue
                if names.CHECKPOINT_DIR in run_tags(self.mlflow, run):
                    found[int(seed)] = str(run.info.run_id)
                else:
                    sweep_layout.set_tags(self.mlflow, run.info.run_id, {names.REDONE_FROM_SCRATCH: "true"})
            return found
        except Exception as err:  # tracking must not stop the retry: it trains from scratch
            log.warning("trial %s: its interrupted seed runs could not be looked up (%s)", retry_of, err)
            return {}

    def end_stale_trial(self, trial: Any) -> None:
        """A trial failed because its worker is gone: its runs are KILLED."""
        self.end_trial(trial.user_attrs.get(TRIAL_RUN_ATTR), names.KILLED, "FAIL")
