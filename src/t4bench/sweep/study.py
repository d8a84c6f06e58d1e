"""The Optuna study behind the Hydra sweeper `hydra/sweeper=optuna` (hydra_plugins.t4bench_sweeper).
One call of `OptunaStudyRunner.run` is one worker process:

    workers.Workers        extra worker processes on this machine (n_jobs)
    trial_queue.TrialQueue the next trial, exactly n_trials over all workers; stale trials redone
    trial_runner           one trial: a Hydra job per seed, the robust objective, study.tell
    tracking.optuna_runs   the sweep's MLflow parent and trial runs
    holdout                `validate_seeds`: the held-out validation instead of trials

This module builds the study (sampler, pruner, the settings recorded as study user attributes)
and runs the loop. Public Optuna API only.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from t4bench import signals
from t4bench.errors import T4BenchError
from t4bench.signals import sigterm_raises
from t4bench.spec import RunSpec
from t4bench.sweep import space as spaces
from t4bench.sweep.objective import RobustObjective
from t4bench.sweep.recorded_config import config_tags, fixed_params
from t4bench.sweep.settings import hydra_overrides, instantiate, task_overrides
from t4bench.sweep.storage import critical_section, is_journal, journal_path, normalize, open_storage
from t4bench.sweep.talk import Pace, next_steps
from t4bench.sweep.trial_queue import TrialQueue, counts
from t4bench.sweep.trial_runner import TrialRunner
from t4bench.sweep.workers import Workers
from t4bench.tracking import names
from t4bench.tracking.optuna_runs import PARENT_ATTR, OptunaSweepRuns

log = logging.getLogger(__name__)

UID_ATTR = "t4bench_study_uid"


class OptunaStudyRunner:
    def __init__(self, sweeper_cfg: Mapping[str, Any], spec: RunSpec, launcher: Any, arguments: Sequence[str]) -> None:
        self.cfg, self.spec, self.launcher = sweeper_cfg, spec, launcher
        self.space = spaces.parse(arguments, sweeper_cfg.get("params") or {})
        self.objective = RobustObjective.from_config(sweeper_cfg)
        self.study_name = str(sweeper_cfg["study_name"])
        self.sweep_dir = Path(str(spec.sweep.sweep.dir)).resolve()
        storage = sweeper_cfg.get("storage") or f"journal:{self.sweep_dir / 'optuna.journal'}"
        self.storage_url = normalize(str(storage))
        self.n_trials = int(sweeper_cfg["n_trials"])
        self.started = time.monotonic()
        self.validating = bool(sweeper_cfg.get("validate_seeds"))
        self.seeds = self._seeds()
        self.sweep_id = str(sweeper_cfg.get("sweep_id") or self.study_name)
        self.runs: OptunaSweepRuns | None = None
        self.status_only = self.n_trials == 0 and not self.validating
        no_journal = is_journal(self.storage_url) and not journal_path(self.storage_url).is_file()
        existing = None if self.status_only and no_journal else self._load_existing()  # opening makes one
        # n_trials=0 asks for the study's status: read, nothing written (journal, MLflow)
        if self.status_only and existing is None:
            raise T4BenchError(
                f"hydra.sweeper.n_trials=0 shows a study's status, and {self.storage_url} holds no study "
                f"{self.study_name!r}; give n_trials >= 1 to start it"
            )
        if self.status_only:
            self.study: Any = existing
            return
        uid = str((existing.user_attrs.get(UID_ATTR) if existing else None) or uuid.uuid4().hex)
        if bool(sweeper_cfg.get("mlflow", True)):
            # before the study is created: a sweep id taken by another sweep stops with nothing made
            tags = config_tags(spec)
            self.runs = OptunaSweepRuns(spec, self.sweep_id, self.study_name, self.storage_url, uid, tags)
            self.runs.check_sweep_id(existing.user_attrs.get(PARENT_ATTR) if existing else None)
        self.study = self._create_study(uid)
        if self.runs is not None:
            self.runs.study_uid = str(self.study.user_attrs[UID_ATTR])  # another worker's, if it was first
            self.runs.owns_parent = int(sweeper_cfg.get("worker_index", 0) or 0) == 0
            self.runs.repair_experiment()  # runs a killed sweep left RUNNING, closed before it resumes
            self._open_parent(self.runs)
        self.queue = TrialQueue(
            self.study,
            self.storage_url,
            self.n_trials,
            int(sweeper_cfg.get("max_failures") or self.n_trials),
            float(sweeper_cfg.get("stale_after", 120.0)),
            self.space.distributions,
            on_stale=self.runs.end_stale_trial if self.runs else lambda trial: None,
        )

    def _seeds(self) -> list[int]:
        seeds = self.space.seeds if self.space.seeds is not None else self.cfg.get("seeds")
        if not seeds:
            offset = int(self.cfg.get("seed_offset", 0) or 0)
            seeds = list(range(offset, offset + int(self.cfg.get("seeds_per_trial", 1) or 1)))
        return [int(s) for s in seeds]

    # ---- setup ---------------------------------------------------------------------------
    def _load_existing(self) -> Any | None:
        import optuna

        try:
            return optuna.load_study(study_name=self.study_name, storage=open_storage(self.storage_url))
        except KeyError:
            return None

    def _create_study(self, uid: str) -> Any:
        import optuna

        storage = open_storage(self.storage_url)
        with critical_section(self.storage_url):
            try:
                existing = optuna.load_study(study_name=self.study_name, storage=storage)
                n_existing = len(existing.trials)
                if existing.direction.name.lower() != self.objective.direction:
                    raise ValueError(
                        f"study {self.study_name!r} in {self.storage_url} has direction "
                        f"{existing.direction.name.lower()}, the sweep asks for {self.objective.direction}"
                    )
            except KeyError:
                n_existing = 0
            sampler_node = self.cfg.get("sampler")
            extra: dict[str, Any] = {}
            grid = str((sampler_node or {}).get("_target_", "")).endswith("GridSampler")
            if grid:
                extra["search_space"] = self.space.grid()
            # a fresh seed per worker and per resume: the same seed again would replay the same
            # startup parameters (duplicates) after a resume or in a second worker
            if sampler_node is not None and sampler_node.get("seed") is not None:
                worker = int(self.cfg.get("worker_index", 0) or 0)
                extra["seed"] = int(sampler_node["seed"]) + n_existing + 7919 * worker
            self.pruner = instantiate(self.cfg.get("pruner"))
            study = optuna.create_study(
                study_name=self.study_name,
                storage=storage,
                direction=self.objective.direction,  # type: ignore[arg-type]
                sampler=instantiate(sampler_node, **extra),
                pruner=self.pruner or optuna.pruners.NopPruner(),
                load_if_exists=True,
            )
            if grid:
                self.n_trials = min(self.n_trials, math.prod(len(v) for v in extra["search_space"].values()))
            settings = {
                UID_ATTR: study.user_attrs.get(UID_ATTR) or uid,
                "t4bench_objective": self.objective.metric,
                "t4bench_aggregate": self.objective.aggregate,
                "t4bench_seeds": self.seeds,
                "t4bench_n_trials": self.n_trials,
                "t4bench_fixed_overrides": self.space.fixed,
                "t4bench_task_overrides": task_overrides(self.spec),
                "t4bench_hydra_overrides": hydra_overrides(self.spec),
                "t4bench_search_space": {k: repr(v) for k, v in self.space.distributions.items()},
            }
            if self.validating:  # a validation records nothing in the study but its uid
                settings = {UID_ATTR: settings[UID_ATTR]}
            for key, value in settings.items():
                if study.user_attrs.get(key) != value:
                    study.set_user_attr(key, value)
        return study

    def _open_parent(self, runs: OptunaSweepRuns) -> None:
        params = {
            **fixed_params(self.spec, list(self.space.distributions), self.space.fixed),
            "sweep.objective": self.objective.metric,
            "sweep.aggregate": self.objective.aggregate,
            "sweep.direction": self.objective.direction,
            "sweep.seeds": ",".join(map(str, self.seeds)),
            "sweep.n_trials": self.n_trials,
            "sweep.sampler": str((self.cfg.get("sampler") or {}).get("_target_", "")),
            "sweep.pruner": str((self.cfg.get("pruner") or {}).get("_target_", "")),
            **{f"space.{k}": repr(v) for k, v in self.space.distributions.items()},
        }
        with critical_section(self.storage_url):  # one parent, however many workers start at once
            runs.open_parent(self.study, reopen=not self.validating, params=params)

    def trial_runner(self) -> TrialRunner:
        import optuna

        prunes = self.pruner is not None and not isinstance(self.pruner, optuna.pruners.NopPruner)
        return TrialRunner(
            study=self.study,
            study_name=self.study_name,
            storage_url=self.storage_url,
            sweep_id=self.sweep_id,
            space=self.space,
            seeds=self.seeds,
            objective=self.objective,
            launcher=self.launcher,
            pruner_cfg=self.cfg.get("pruner"),
            prunes=prunes,
            heartbeat_interval=float(self.cfg.get("heartbeat_interval", 20.0)),
            batch_seeds=bool(self.cfg.get("batch_seeds", False)),
            runs=self.runs,
        )

    # ---- the sweep -----------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        from optuna.trial import TrialState

        trials = self.study.get_trials(deepcopy=False)
        out: dict[str, Any] = {
            "study": self.study_name,
            "storage": self.storage_url,
            "counts": counts(self.study),
            "epochs_spent": sum(float(t.user_attrs.get("epochs_run", 0)) for t in trials),
            "trials": [
                {
                    "number": t.number,
                    "state": t.state.name,
                    "value": t.value,
                    "params": t.params,
                    "seed_values": t.user_attrs.get("seed_values"),
                    "epochs_run": t.user_attrs.get("epochs_run"),
                }
                for t in trials
            ],
        }
        if any(t.state == TrialState.COMPLETE for t in trials):
            best = self.study.best_trial
            out.update(best_value=best.value, best_params=best.params, best_trial=best.number)
        return out

    def run(self) -> dict[str, Any]:
        if self.status_only:
            summary = self.summary()
            self._print(summary)
            return summary
        # the same handler as a training run's: SIGTERM becomes RunTerminated, which the
        # in-flight trial turns into FAIL + requeue
        workers = Workers(
            int(self.cfg.get("n_jobs", 1) or 1),
            int(self.cfg.get("worker_index", 0) or 0),
            self.sweep_dir,
            gpus=int(self.cfg.get("gpus", 1) or 1),  # set by the sweeper when hw.runs_per_gpu packs
        )
        runner = self.trial_runner()
        pace = Pace(self.n_trials, already_done=self._finished())
        owned = self.runs is not None and self.runs.owns_parent and not self.validating
        beat = self.runs.heartbeat(self.runs.parent_id) if owned and self.runs else contextlib.nullcontext()
        with sigterm_raises():
            try:
                with beat:  # the parent's heartbeat, stopped before the parent ends
                    workers.spawn()
                    self._run_trials(runner, pace)
                    lost = workers.wait()
                    for line in lost:
                        log.warning("%s", line)
                    if lost:  # their trials in flight (RUNNING, pid dead) are failed, queued again and run here
                        self._run_trials(runner, pace)
            except BaseException as err:
                workers.stop()
                if self.runs is not None and not isinstance(err, Exception):
                    self.runs.end_parent(names.KILLED)
                raise
        summary = self.summary()
        if self.runs is not None:
            self.runs.update_parent(summary, done=self._complete(), out_dir=self.sweep_dir)
        self._print(summary)
        return summary

    def _run_trials(self, runner: TrialRunner, pace: Pace) -> None:
        """Claim and run trials until the study has its n_trials (over all workers) or time is up."""
        while self._may_start():
            # a stop signal from the claim on waits for the trial's own handling (FAIL + requeue):
            # the trial is RUNNING in the study as soon as it is asked
            held = signals.hold_stop()
            try:
                trial = self.queue.next_trial()
            except BaseException:
                signals.release(held)
                raise
            if trial is None:
                signals.release(held)
                break
            runner.run(trial, held)
            print(pace.job_done("trial", done=self._finished()), flush=True)
            if self.runs is not None:
                self.runs.update_parent(self.summary(), done=False, out_dir=None)

    def _complete(self) -> bool:
        n = counts(self.study)
        return n["COMPLETE"] + n["PRUNED"] >= self.n_trials and n["RUNNING"] == 0

    def _may_start(self) -> bool:
        """Whether this worker may claim another trial: always, unless `timeout` seconds have passed
        since it started (Optuna's `optimize(timeout=)` meaning: trials in flight finish). Lets a
        time-boxed session end with finished trials instead of killed ones; the study resumes."""
        timeout = self.cfg.get("timeout")
        return timeout is None or time.monotonic() - self.started < float(timeout)

    def _finished(self) -> int:
        """Trials of the study that are over (by any worker)."""
        n = counts(self.study)
        return n["COMPLETE"] + n["PRUNED"] + n["FAIL"]

    def validate(self, seeds: Sequence[int]) -> dict[str, Any]:
        from t4bench.sweep.holdout.runs import HoldOut

        if self.runs is None:
            raise ValueError("validation reads its runs back from MLflow: hydra.sweeper.mlflow must be true")
        return HoldOut(self, self.runs).run(seeds)

    def _print(self, summary: Mapping[str, Any]) -> None:
        n = summary["counts"]
        lines = [
            f"study {self.study_name} ({self.storage_url}): {n['COMPLETE']} complete, {n['PRUNED']} pruned, "
            f"{n['FAIL']} failed, {n['RUNNING']} running; {summary['epochs_spent']:.0f} epochs spent",
        ]
        if "best_value" in summary:
            lines.append(
                f"best trial {summary['best_trial']}: {self.objective.aggregate} "
                f"{self.objective.metric} = {summary['best_value']:.4f} with {summary['best_params']}"
            )
        if self.runs is not None and "best_value" in summary:
            uri = str(self.spec.tracking.uri)
            lines.append(
                next_steps(
                    uri,
                    str(self.runs.exp_id),
                    self.sweep_id,
                    str(self.sweep_dir),
                    self.storage_url,
                    self.study_name,
                )
            )
        print("\n".join(lines), flush=True)
