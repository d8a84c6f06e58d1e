"""The MLflow runs of one Optuna sweep (layout in mlflow_layout and docs/sweeps.md):

    <study>-<uid4>              parent: the sweep's fixed params (the composed config minus the
                                searched keys), model/hw/scale tags, best-trial tags and metrics
      trial-007                 one run per trial: its parameters, per-seed distribution metrics
        seed=101                the training runs (named through tracking.run_name)

Names fit the runs table's Run Name column at each run's depth (t4bench.run_names): a longer one
keeps its head and a hash of the whole (`gnmt_ding_tu~3f9a`); the tags keep the long identity.

The parent belongs to one study: the study keeps the parent's run id as a user attribute, and the
parent carries the study's identity tag (study name, storage and a uid made with the study), so a
resumed sweep reopens its own parent and another study reusing the sweep id fails with one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t4bench import mlflow_names as names
from t4bench import run_names
from t4bench.sweep import mlflow_layout, stats

log = logging.getLogger(__name__)

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


def config_tags(config: DictConfig) -> dict[str, str]:
    """t4bench.model / hw / hw_count / scale of the composed config (as training runs carry)."""
    keys = {names.MODEL: "model.name", names.HW: "hw.name", names.HW_COUNT: "hw.count", names.SCALE: "scale.name"}
    out = {}
    for tag, key in keys.items():
        value = OmegaConf.select(config, key, default=None)
        if value is not None:
            out[tag] = str(value)
    if out.get(names.HW) == "auto":  # the profile the jobs resolve it to, so parent and runs agree
        out[names.HW] = detected_profile()
    return out


def detected_profile() -> str:
    """The hw profile `hw=auto` picks on this machine (where the sweep's jobs run); "auto" if none."""
    from t4bench import hardware

    try:
        return hardware.profile_for(hardware.detect())
    except Exception:  # no profile matches: each job fails with the one-line reason itself
        return "auto"


def fixed_params(config: DictConfig, searched: Sequence[str], fixed_overrides: Sequence[str]) -> dict[str, str]:
    """The composed config (resolved, flattened as a training run logs it) minus the searched keys
    and the seed, plus the sweep's plain `hydra.sweeper.params` values (given to every job)."""
    from t4bench.tracking import flatten

    task = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
    try:
        container = OmegaConf.to_container(task, resolve=True)
    except Exception as err:  # an interpolation only a job can resolve: the params are a nicety
        log.warning("sweep parent params: the config does not resolve here (%s)", err)
        return {}
    assert isinstance(container, dict)
    params = flatten(container)  # type: ignore[arg-type]
    for line in fixed_overrides:
        key, _, value = line.partition("=")
        params[key.lstrip("+~")] = value
    skip = {*searched, "seed"}
    return {k: v for k, v in params.items() if k not in skip}


class OptunaSweepRuns:
    def __init__(self, config: DictConfig, sweep_id: str, study_name: str, storage_url: str, study_uid: str) -> None:
        self.mlflow, self.exp_id = mlflow_layout.for_config(config)
        self.config, self.sweep_id = config, sweep_id
        self.study_name, self.storage_url, self.study_uid = study_name, storage_url, study_uid
        self.parent_id: str | None = None

    @property
    def identity(self) -> str:
        return f"optuna:{self.study_name}@{self.storage_url}#{self.study_uid}"

    def check_sweep_id(self, known_parent: str | None) -> None:
        """Raise SweepIdConflict when the sweep id names the parent of another sweep (a study
        that recorded its own parent, `known_parent`, is resumed as it is)."""
        if known_parent:
            return
        for run in mlflow_layout.find_runs(self.mlflow, self.exp_id, self.sweep_id, "parent"):
            mlflow_layout.check_identity(self.mlflow, run, self.sweep_id, self.identity)

    def study_tags(self) -> dict[str, str]:
        return {
            **config_tags(self.config),
            names.OPTUNA_STUDY: self.study_name,
            names.OPTUNA_STORAGE: self.storage_url,
            names.OPTUNA_STUDY_UID: self.study_uid,
        }

    # ---- parent --------------------------------------------------------------------------
    def open_parent(self, study: Any, *, reopen: bool, params: Mapping[str, Any]) -> str:
        """The study's parent run: the one the study recorded (RUNNING again when `reopen`), else
        one found by sweep id that carries this study's identity, else a new one."""
        known = study.user_attrs.get(PARENT_ATTR)
        run = None
        if known:
            try:
                run = self.mlflow.get_run(str(known))
            except Exception:  # gone from this tracking store: make a new one
                run = None
        if run is not None and run.info.lifecycle_stage != "deleted":
            self.parent_id = str(known)
            # a study made before identity tags: it is this study's own parent all the same
            mlflow_layout.set_tags(self.mlflow, self.parent_id, {names.SWEEP_IDENTITY: self.identity})
            if reopen and run.info.status != names.RUNNING:
                self.mlflow.update_run(self.parent_id, status=names.RUNNING)
            return self.parent_id
        self.parent_id = mlflow_layout.get_or_create_parent(
            self.mlflow,
            self.exp_id,
            self.sweep_id,
            kind="optuna",
            run_name=parent_run_name(self.study_name, self.study_uid),
            tags=self.study_tags(),
            identity=self.identity,
            reopen=reopen,
        )
        study.set_user_attr(PARENT_ATTR, self.parent_id)
        try:
            mlflow_layout.log_params(self.mlflow, self.parent_id, params)
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
            mlflow_layout.log_metrics(self.mlflow, self.parent_id, metrics, step=step)
            mlflow_layout.set_tags(self.mlflow, self.parent_id, tags)
            if out_dir is not None:
                out_dir.mkdir(parents=True, exist_ok=True)
                path = out_dir / "optuna_summary.json"
                path.write_text(json.dumps(summary, indent=2, default=str))
                self.mlflow.log_artifact(self.parent_id, str(path))
            if done:
                self.mlflow.set_terminated(self.parent_id, status=names.FINISHED)
        except Exception as err:  # tracking must not lose the study's accounting
            log.warning("MLflow parent run %s: %s", self.parent_id, err)

    def end_parent(self, status: str) -> None:
        if self.parent_id is None:
            return
        try:
            self.mlflow.set_terminated(self.parent_id, status=status)
        except Exception as err:
            log.warning("MLflow parent run %s: %s", self.parent_id, err)

    # ---- trials --------------------------------------------------------------------------
    def start_trial(self, trial: Any, seeds: Sequence[int], retry_of: Any = None) -> str:
        tags: dict[str, Any] = {TRIAL_TAG: trial.number, STATE_TAG: "RUNNING", **self.study_tags()}
        if retry_of is not None:
            tags[names.RETRY_OF] = retry_of
        run_id = mlflow_layout.create_child(
            self.mlflow,
            self.exp_id,
            str(self.parent_id),
            self.sweep_id,
            "trial",
            run_name=trial_run_name(trial.number),
            tags=tags,
        )
        mlflow_layout.log_params(self.mlflow, run_id, {**trial.params, "seeds": ",".join(map(str, seeds))})
        trial.set_user_attr(TRIAL_RUN_ATTR, run_id)
        return run_id

    def tag_seed_run(self, run_id: str, trial_number: int, seed_index: int) -> None:
        mlflow_layout.set_tags(
            self.mlflow,
            run_id,
            {TRIAL_TAG: trial_number, names.OPTUNA_STUDY: self.study_name, names.SEED_INDEX: seed_index},
        )

    def log_trial(
        self, run_id: str, results: Sequence[Mapping[str, Any]], value: float | None, per_seed: Sequence[float]
    ) -> None:
        metrics = stats.flat_metrics(stats.describe_runs(results))
        metrics["epochs_spent"] = sum(float(r.get("epochs_run", 0) or 0) for r in results)
        if value is not None:
            metrics["objective"] = value
        mlflow_layout.log_metrics(self.mlflow, run_id, metrics)
        for i, v in enumerate(per_seed):
            mlflow_layout.log_metrics(self.mlflow, run_id, {"seed_objective": v}, step=i)

    def end_trial(self, run_id: str | None, status: str, state: str) -> None:
        """End a trial run; a trial that did not finish also closes its seed runs still RUNNING
        (a killed worker's training runs never closed themselves)."""
        if not run_id:
            return
        try:
            mlflow_layout.set_tags(self.mlflow, run_id, {STATE_TAG: state})
            self.mlflow.set_terminated(run_id, status=status)
            if status != names.FINISHED:
                closed = mlflow_layout.close_running_children(self.mlflow, self.exp_id, run_id, status)
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
        from t4bench.tracking import run_tags

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
                    mlflow_layout.set_tags(self.mlflow, run.info.run_id, {names.REDONE_FROM_SCRATCH: "true"})
            return found
        except Exception as err:  # tracking must not stop the retry: it trains from scratch
            log.warning("trial %s: its interrupted seed runs could not be looked up (%s)", retry_of, err)
            return {}

    def end_stale_trial(self, trial: Any) -> None:
        """A trial failed because its worker is gone: its runs are KILLED."""
        self.end_trial(trial.user_attrs.get(TRIAL_RUN_ATTR), names.KILLED, "FAIL")
