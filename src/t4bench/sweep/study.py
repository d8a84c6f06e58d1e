"""The Optuna study loop behind the Hydra sweeper `hydra/sweeper=optuna`
(hydra_plugins.t4bench_sweeper). One call of `OptunaStudyRunner.run` is one worker process.

Per trial: ask Optuna for parameters, create the MLflow trial run, launch one Hydra job per seed
(the lead seed first; it reports to the pruner), aggregate the seeds with the robust objective and
tell Optuna. Trial accounting (docs/sweeps.md):

- finished = COMPLETE + PRUNED trials; a worker asks for a new trial only while finished + running
  < n_trials, under a file lock beside a journal storage, so several workers end with exactly
  n_trials finished. (SQL storages: the worker re-checks after asking and fails a surplus trial.)
- a trial whose worker died is RUNNING in the storage forever: before asking, each worker fails
  RUNNING trials whose owner process is gone (same host: the pid is dead; any host: no heartbeat
  for `stale_after` s) and enqueues their parameters again, so the interrupted trial is redone.
- SIGTERM / Ctrl-C: the trial in flight is failed and re-enqueued, its MLflow runs are KILLED.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t4bench.errors import RunTerminated
from t4bench.sweep import mlflow_runs, space as spaces, stats
from t4bench.sweep.objective import RobustObjective
from t4bench.sweep.pruning import PRUNED_ATTR
from t4bench.sweep.storage import critical_section, is_journal, normalize, open_storage

log = logging.getLogger(__name__)

HOST_ATTR = "t4bench_host"
PID_ATTR = "t4bench_pid"
HEARTBEAT_ATTR = "t4bench_heartbeat"
RETRY_ATTR = "t4bench_retry_of"
MLFLOW_ATTR = "mlflow_run_id"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child not yet reaped is a zombie: dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class _Heartbeat:
    def __init__(self, storage: Any, trial_id: int, interval: float) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="t4bench-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.storage.set_trial_system_attr(self.trial_id, HEARTBEAT_ATTR, time.time())
            except Exception:  # finished meanwhile, storage hiccup: the next beat tries again
                pass

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class OptunaStudyRunner:
    def __init__(self, sweeper_cfg: Mapping[str, Any], config: DictConfig, launcher: Any, arguments: Sequence[str]) -> None:
        import optuna

        self.optuna = optuna
        self.cfg = sweeper_cfg
        self.config = config
        self.launcher = launcher
        self.space = spaces.parse(arguments, sweeper_cfg.get("params") or {})
        self.objective = RobustObjective.from_config(sweeper_cfg)
        self.study_name = str(sweeper_cfg["study_name"])
        self.sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        storage = sweeper_cfg.get("storage") or f"journal:{self.sweep_dir / 'optuna.journal'}"
        self.storage_url = normalize(str(storage))
        self.storage = open_storage(self.storage_url)
        self.n_trials = int(sweeper_cfg["n_trials"])
        self.n_jobs = int(sweeper_cfg.get("n_jobs", 1) or 1)
        self.worker_index = int(sweeper_cfg.get("worker_index", 0) or 0)
        self.heartbeat_interval = float(sweeper_cfg.get("heartbeat_interval", 20.0))
        self.stale_after = float(sweeper_cfg.get("stale_after", 120.0))
        self.max_failures = int(sweeper_cfg.get("max_failures") or self.n_trials)
        self.batch_seeds = bool(sweeper_cfg.get("batch_seeds", False))
        seeds = sweeper_cfg.get("seeds")
        if self.space.seeds is not None:
            seeds = self.space.seeds
        if not seeds:
            offset = int(sweeper_cfg.get("seed_offset", 0) or 0)
            seeds = list(range(offset, offset + int(sweeper_cfg.get("seeds_per_trial", 1) or 1)))
        self.seeds = [int(s) for s in seeds]
        self.sweep_id = str(sweeper_cfg.get("sweep_id") or self.study_name)
        self.use_mlflow = bool(sweeper_cfg.get("mlflow", True))
        self._children: list[subprocess.Popen[bytes]] = []
        self.study = self._create_study()
        self.mlflow: Any = None
        self.parent_id: str | None = None
        if self.use_mlflow:
            self._setup_mlflow()

    # ---- setup ---------------------------------------------------------------------------
    def _instantiate(self, node: Any, **extra: Any) -> Any:
        from hydra.utils import instantiate

        if node is None:
            return None
        node = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
        if not node or node.get("_target_") in (None, "null", "none"):
            return None
        return instantiate({**node, **extra})

    def _create_study(self) -> Any:
        optuna = self.optuna
        with critical_section(self.storage_url):
            try:
                existing = optuna.load_study(study_name=self.study_name, storage=self.storage)
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
            target = str((sampler_node or {}).get("_target_", ""))
            if target.endswith("GridSampler"):
                extra["search_space"] = self.space.grid()
            # a fresh seed per worker and per resume: the same seed again would replay the same
            # startup parameters (duplicates) after a resume or in a second worker
            if sampler_node is not None and (sampler_node.get("seed") is not None):
                extra["seed"] = int(sampler_node["seed"]) + n_existing + 7919 * self.worker_index
            sampler = self._instantiate(sampler_node, **extra)
            self.pruner = self._instantiate(self.cfg.get("pruner"))
            study = optuna.create_study(
                study_name=self.study_name,
                storage=self.storage,
                direction=self.objective.direction,
                sampler=sampler,
                pruner=self.pruner or optuna.pruners.NopPruner(),
                load_if_exists=True,
            )
            if target.endswith("GridSampler"):
                self.n_trials = min(self.n_trials, math.prod(len(v) for v in extra["search_space"].values()))
            attrs = study.user_attrs
            settings = {
                "t4bench_objective": self.objective.metric,
                "t4bench_aggregate": self.objective.aggregate,
                "t4bench_seeds": self.seeds,
                "t4bench_n_trials": self.n_trials,
                "t4bench_fixed_overrides": self.space.fixed,
                "t4bench_task_overrides": self._task_overrides(),
                "t4bench_hydra_overrides": self._hydra_overrides(),
                "t4bench_search_space": {k: repr(v) for k, v in self.space.distributions.items()},
            }
            for key, value in settings.items():
                if attrs.get(key) != value:
                    study.set_user_attr(key, value)
        return study

    def _task_overrides(self) -> list[str]:
        """The command line's non-sweep task overrides (what validation must apply again)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        raw = OmegaConf.to_container(self.config.hydra.overrides.task, resolve=False) or []
        out = []
        for line in raw:  # type: ignore[union-attr]
            override = OverridesParser.create().parse_override(str(line))
            if not override.is_sweep_override() and override.get_key_element() != "seed":
                out.append(str(line))
        return out

    def _hydra_overrides(self) -> list[str]:
        raw = OmegaConf.to_container(self.config.hydra.overrides.hydra, resolve=False) or []
        skip = ("hydra.sweeper.n_jobs=", "hydra.sweeper.worker_index=", "hydra.sweeper.validate_seeds=",
                "hydra.sweeper.n_trials=")
        return [str(o) for o in raw if not str(o).startswith(skip)]  # type: ignore[union-attr]

    def _setup_mlflow(self) -> None:
        self.mlflow, self.exp_id = mlflow_runs.for_config(self.config)
        with critical_section(self.storage_url):
            known = self.study.user_attrs.get("mlflow_parent_run_id")
            if known:
                self.parent_id = str(known)
                try:
                    run = self.mlflow.get_run(self.parent_id)
                except Exception:  # gone from this tracking store: make a new one
                    run = None
                if run is None or run.info.lifecycle_stage == "deleted":
                    known = None
                elif not self.cfg.get("validate_seeds") and run.info.status != "RUNNING":
                    # resumed: RUNNING again. A validation adds no trials, so it leaves the status be
                    self.mlflow.update_run(self.parent_id, status="RUNNING")
            if not known:
                self.parent_id = mlflow_runs.get_or_create_parent(
                    self.mlflow,
                    self.exp_id,
                    self.sweep_id,
                    kind="optuna",
                    run_name=f"sweep-{self.study_name}",
                    reopen=not self.cfg.get("validate_seeds"),
                    tags={
                        "t4bench.model": str(self.config.model.name),
                        "t4bench.optuna.study": self.study_name,
                        "t4bench.optuna.storage": self.storage_url,
                    },
                )
                self.study.set_user_attr("mlflow_parent_run_id", self.parent_id)
                mlflow_runs.log_params(
                    self.mlflow,
                    self.parent_id,
                    {
                        "objective": self.objective.metric,
                        "aggregate": self.objective.aggregate,
                        "direction": self.objective.direction,
                        "seeds": ",".join(map(str, self.seeds)),
                        "n_trials": self.n_trials,
                        "sampler": str((self.cfg.get("sampler") or {}).get("_target_", "")),
                        "pruner": str((self.cfg.get("pruner") or {}).get("_target_", "")),
                        **{f"space.{k}": repr(v) for k, v in self.space.distributions.items()},
                    },
                )

    # ---- accounting ----------------------------------------------------------------------
    def _counts(self) -> dict[str, int]:
        from optuna.trial import TrialState

        counts = {s.name: 0 for s in TrialState}
        for t in self.study.get_trials(deepcopy=False):
            counts[t.state.name] += 1
        return counts

    def fail_stale_trials(self) -> list[int]:
        """Fail RUNNING trials whose worker is gone and enqueue their parameters again."""
        from optuna.trial import TrialState

        failed = []
        now, host = time.time(), socket.gethostname()
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            attrs = t.system_attrs
            pid = attrs.get(PID_ATTR)
            beat = float(attrs.get(HEARTBEAT_ATTR) or (t.datetime_start.timestamp() if t.datetime_start else now))
            if pid == os.getpid() and attrs.get(HOST_ATTR) == host:
                continue
            dead = attrs.get(HOST_ATTR) == host and pid is not None and not _pid_alive(int(pid))
            if not dead and now - beat <= self.stale_after:
                continue
            try:
                self.storage.set_trial_user_attr(t._trial_id, "t4bench_failed", "stale: worker gone")
                self.storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            except Exception:  # another worker failed it first
                continue
            self._requeue(t)
            self._end_trial_run(t.user_attrs.get(MLFLOW_ATTR), "KILLED", "FAIL")
            failed.append(t.number)
            log.warning("trial %d: worker (pid %s on %s) is gone; failed it and queued its parameters again",
                        t.number, pid, attrs.get(HOST_ATTR))
        return failed

    def _requeue(self, trial: Any) -> None:
        if trial.params:
            self.study.enqueue_trial(dict(trial.params), user_attrs={RETRY_ATTR: trial.number})

    def _next_trial(self) -> Any | None:
        with critical_section(self.storage_url):
            self.fail_stale_trials()
            counts = self._counts()
            finished = counts["COMPLETE"] + counts["PRUNED"]
            if finished + counts["RUNNING"] >= self.n_trials:
                return None
            if counts["FAIL"] >= self.max_failures + self._stale_fails():
                raise RuntimeError(f"{counts['FAIL']} failed trials (max_failures={self.max_failures}); giving up")
            trial = self.study.ask(fixed_distributions=dict(self.space.distributions))
            for key, value in ((HOST_ATTR, socket.gethostname()), (PID_ATTR, os.getpid()), (HEARTBEAT_ATTR, time.time())):
                self.storage.set_trial_system_attr(trial._trial_id, key, value)
        if not is_journal(self.storage_url):
            from optuna.trial import TrialState

            alive = [
                t for t in self.study.get_trials(deepcopy=False)
                if t.number < trial.number and t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
            ]
            if len(alive) >= self.n_trials:
                trial.set_user_attr("t4bench_failed", "surplus: n_trials reached by other workers")
                self.study.tell(trial, state=TrialState.FAIL)
                return None
        return trial

    def _stale_fails(self) -> int:
        """Trials failed because a worker died are not the trials' fault: not counted as failures."""
        return sum(1 for t in self.study.get_trials(deepcopy=False) if "t4bench_failed" in t.user_attrs)

    # ---- workers -------------------------------------------------------------------------
    def _spawn_workers(self) -> None:
        if self.n_jobs <= 1 or self.worker_index != 0:
            return
        argv = [a for a in sys.orig_argv if not a.startswith(("hydra.sweeper.n_jobs=", "hydra.sweeper.worker_index="))]
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        for index in range(1, self.n_jobs):
            out = open(self.sweep_dir / f"worker-{index}.log", "ab")
            cmd = [*argv, "hydra.sweeper.n_jobs=1", f"hydra.sweeper.worker_index={index}"]
            self._children.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=os.getcwd()))
            log.info("started worker %d (pid %d): log %s", index, self._children[-1].pid, out.name)

    def _wait_workers(self) -> None:
        codes = [child.wait() for child in self._children]
        if any(codes):
            raise RuntimeError(f"sweep worker processes exited with {codes}; see {self.sweep_dir}/worker-*.log")

    def _stop_workers(self) -> None:
        for child in self._children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in self._children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()

    # ---- one trial -----------------------------------------------------------------------
    def _job_overrides(self, trial: Any, seed: int, lead: bool, trial_run: str | None) -> list[str]:
        overrides = [*self.space.fixed, *self.space.overrides(trial.params), f"seed={seed}"]
        overrides.append(f"tracking.sweep_id={_quote(self.sweep_id)}")
        if trial_run:
            overrides.append(f"tracking.parent_run_id={trial_run}")
        if self.pruner is not None and not isinstance(self.pruner, self.optuna.pruners.NopPruner):
            key = "+callbacks.optuna_pruning"
            overrides += [
                f"{key}._target_=t4bench.sweep.pruning.OptunaPruningReporter",
                f"{key}.storage={_quote(self.storage_url)}",
                f"{key}.study_name={_quote(self.study_name)}",
                f"{key}.trial_number={trial.number}",
                f"{key}.target='${{model.target}}'",
                f"{key}.direction={self.objective.direction}",
                f"{key}.report={'true' if lead else 'false'}",
                f"{key}.pruner={spaces.format_value(OmegaConf.to_container(self.cfg['pruner'], resolve=True))}",
            ]
        return overrides

    def _launch(self, trial: Any, indexed_seeds: Sequence[tuple[int, int]], trial_run: str | None) -> list[tuple[int, Any]]:
        batch = [self._job_overrides(trial, seed, i == 0, trial_run) for i, seed in indexed_seeds]
        first = trial.number * len(self.seeds) + indexed_seeds[0][0]
        returns = self.launcher.launch(batch, initial_job_idx=first)
        return [(i, ret) for (i, _), ret in zip(indexed_seeds, returns)]

    def run_trial(self, trial: Any) -> str:
        from optuna.trial import TrialState

        trial_run = None
        if self.mlflow is not None:
            trial_run = mlflow_runs.create_child(
                self.mlflow, self.exp_id, str(self.parent_id), self.sweep_id, "trial",
                run_name=f"{self.study_name}-trial-{trial.number}",
                tags={"t4bench.trial_number": trial.number, "t4bench.optuna.study": self.study_name,
                      "t4bench.model": str(self.config.model.name), "t4bench.optuna.state": "RUNNING",
                      **({"t4bench.retry_of": trial.user_attrs[RETRY_ATTR]} if RETRY_ATTR in trial.user_attrs else {})},
            )
            mlflow_runs.log_params(self.mlflow, trial_run, {**trial.params, "seeds": ",".join(map(str, self.seeds))})
            trial.set_user_attr(MLFLOW_ATTR, trial_run)
        log.info("trial %d: %s on seeds %s", trial.number, trial.params, self.seeds)
        results: list[dict[str, Any]] = []
        max_epochs = 0
        state = "COMPLETE"
        try:
            with _Heartbeat(self.storage, trial._trial_id, self.heartbeat_interval):
                indexed = list(enumerate(self.seeds))
                batches = [indexed] if self.batch_seeds else [[s] for s in indexed]
                for batch in batches:
                    for i, ret in self._launch(trial, batch, trial_run):
                        result = dict(ret.return_value)  # raises the job's exception if it failed
                        max_epochs = max(max_epochs, int(ret.cfg.max_epochs))
                        result["seed"] = self.seeds[i]
                        results.append(result)
                        if self.mlflow is not None and result.get("run_id"):
                            mlflow_runs.set_tags(self.mlflow, result["run_id"], {
                                "t4bench.trial_number": trial.number, "t4bench.optuna.study": self.study_name,
                                "t4bench.seed_index": i})
                        if i == 0 and result.get("outcome") == "converged":
                            self._report_converged(trial, result, int(ret.cfg.max_epochs))
                    if any(r.get("outcome") == "pruned" for r in results):
                        state = "PRUNED"
                        break
        except (Exception, SystemExit) as err:  # a failed job: this trial fails, the sweep goes on
            log.error("trial %d failed: %s: %s", trial.number, type(err).__name__, err)
            trial.set_user_attr("t4bench_error", f"{type(err).__name__}: {err}"[:1000])
            self.study.tell(trial, state=TrialState.FAIL)
            self._end_trial_run(trial_run, "FAILED", "FAIL")
            return "FAIL"
        except BaseException:  # SIGTERM / Ctrl-C: fail it, queue it again, stop the sweep
            trial.set_user_attr("t4bench_failed", "interrupted")
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            self._requeue(self.study._storage.get_trial(trial._trial_id))
            self._end_trial_run(trial_run, "KILLED", "FAIL")
            raise
        trial.set_user_attr("seed_outcomes", [str(r.get("outcome")) for r in results])
        trial.set_user_attr("seed_run_ids", [str(r.get("run_id", "")) for r in results])
        trial.set_user_attr("epochs_run", sum(float(r.get("epochs_run", 0) or 0) for r in results))
        if state == "PRUNED":
            epoch = self.study._storage.get_trial(trial._trial_id).user_attrs.get(PRUNED_ATTR)
            self.study.tell(trial, state=TrialState.PRUNED)
            log.info("trial %d: pruned at epoch %s of seed %s", trial.number, epoch, self.seeds[0])
            self._log_trial(trial_run, results, None, [], max_epochs)
            self._end_trial_run(trial_run, "FINISHED", "PRUNED")
            return "PRUNED"
        value, per_seed = self.objective(results, max_epochs)
        trial.set_user_attr("seed_values", per_seed)
        self.study.tell(trial, value)
        log.info("trial %d: %s=%.4f (per seed %s)", trial.number, self.objective.aggregate, value, per_seed)
        self._log_trial(trial_run, results, value, per_seed, max_epochs)
        self._end_trial_run(trial_run, "FINISHED", "COMPLETE")
        return "COMPLETE"

    def _report_converged(self, trial: Any, result: Mapping[str, Any], max_epochs: int) -> None:
        """The lead seed converged at epoch k: its quality gap is 0 from k on (docs/sweeps.md)."""
        if self.pruner is None or self.objective.direction != "minimize":
            return
        k = float(result.get("epochs_to_converge", math.nan))
        if not math.isfinite(k):
            return
        for step in range(int(k), max(int(k), max_epochs) + 1):
            trial.report(0.0, step)

    def _log_trial(self, run_id: str | None, results: Sequence[Mapping[str, Any]], value: float | None,
                   per_seed: Sequence[float], max_epochs: int) -> None:
        if self.mlflow is None or run_id is None:
            return
        metrics = stats.flat_metrics(stats.describe_runs(results))
        metrics["epochs_spent"] = sum(float(r.get("epochs_run", 0) or 0) for r in results)
        if value is not None:
            metrics["objective"] = value
        mlflow_runs.log_metrics(self.mlflow, run_id, metrics)
        for i, v in enumerate(per_seed):
            mlflow_runs.log_metrics(self.mlflow, run_id, {"seed_objective": v}, step=i)

    def _end_trial_run(self, run_id: str | None, status: str, state: str) -> None:
        if self.mlflow is None or not run_id:
            return
        try:
            mlflow_runs.set_tags(self.mlflow, run_id, {"t4bench.optuna.state": state})
            self.mlflow.set_terminated(run_id, status=status)
        except Exception as err:  # tracking must not lose the study's accounting
            log.warning("MLflow trial run %s: %s", run_id, err)

    # ---- the sweep -----------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        from optuna.trial import TrialState

        trials = self.study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        out: dict[str, Any] = {
            "study": self.study_name,
            "storage": self.storage_url,
            "counts": self._counts(),
            "epochs_spent": sum(float(t.user_attrs.get("epochs_run", 0)) for t in trials),
            "trials": [
                {"number": t.number, "state": t.state.name, "value": t.value, "params": t.params,
                 "seed_values": t.user_attrs.get("seed_values"), "epochs_run": t.user_attrs.get("epochs_run")}
                for t in trials
            ],
        }
        if complete:
            best = self.study.best_trial
            out.update(best_value=best.value, best_params=best.params, best_trial=best.number)
        return out

    def _update_parent(self, final: bool) -> None:
        if self.mlflow is None or self.parent_id is None:
            return
        summary = self.summary()
        counts = summary["counts"]
        metrics = {"n_complete": counts["COMPLETE"], "n_pruned": counts["PRUNED"], "n_failed": counts["FAIL"],
                   "epochs_spent": summary["epochs_spent"]}
        tags: dict[str, Any] = {}
        if "best_value" in summary:
            metrics["best_value"] = summary["best_value"]
            tags["t4bench.best_trial"] = summary["best_trial"]
            tags.update({f"t4bench.best.{k}": v for k, v in summary["best_params"].items()})
        try:
            mlflow_runs.log_metrics(self.mlflow, self.parent_id, metrics, step=counts["COMPLETE"] + counts["PRUNED"])
            mlflow_runs.set_tags(self.mlflow, self.parent_id, tags)
            if final:
                import json

                self.sweep_dir.mkdir(parents=True, exist_ok=True)
                path = self.sweep_dir / "optuna_summary.json"
                path.write_text(json.dumps(summary, indent=2, default=str))
                self.mlflow.log_artifact(self.parent_id, str(path))
                done = counts["COMPLETE"] + counts["PRUNED"] >= self.n_trials and counts["RUNNING"] == 0
                if done:
                    self.mlflow.set_terminated(self.parent_id, status="FINISHED")
        except Exception as err:
            log.warning("MLflow parent run %s: %s", self.parent_id, err)

    def run(self) -> dict[str, Any]:
        # the same handler as a training run's: SIGTERM becomes runner.RunTerminated, which the
        # in-flight trial turns into FAIL + requeue. Imported here, not at module level, so that
        # loading the sweeper plugin does not import torch.
        from t4bench.runner import sigterm_raises

        with sigterm_raises():
            try:
                self._spawn_workers()
                while True:
                    trial = self._next_trial()
                    if trial is None:
                        break
                    self.run_trial(trial)
                    self._update_parent(final=False)
                self._wait_workers()
            except BaseException as err:
                self._stop_workers()
                if self.mlflow is not None and self.parent_id and not isinstance(err, Exception):
                    try:
                        self.mlflow.set_terminated(self.parent_id, status="KILLED")
                    except Exception:
                        pass
                raise
        self._update_parent(final=True)
        summary = self.summary()
        self._print(summary)
        return summary

    # ---- held-out validation ---------------------------------------------------------------
    def validate(self, seeds: Sequence[int]) -> dict[str, Any]:
        """Re-run the best trial's parameters and the reference ones (the config's own values) on
        `seeds`, with exactly the sweep's composition; runs already finished are reused."""
        from t4bench.sweep.summary import record, summarize

        if self.mlflow is None:
            raise ValueError("validation reads its runs back from MLflow: hydra.sweeper.mlflow must be true")
        best = self.study.best_trial
        sets = {
            "best": (self.space.overrides(best.params, strict=False), f"{self.sweep_id}-validate-best-t{best.number}"),
            "reference": ([], f"{self.sweep_id}-validate-reference"),
        }
        out: dict[str, Any] = {"study": self.study_name, "seeds": list(seeds), "best_trial": best.number,
                               "best_params": best.params, "best_value": best.value}
        for offset, (label, (params, sweep_id)) in enumerate(sets.items(), start=1):
            parent = mlflow_runs.get_or_create_parent(
                self.mlflow, self.exp_id, sweep_id, kind="validation", run_name=f"validate-{label}-{self.study_name}",
                tags={"t4bench.model": str(self.config.model.name), "t4bench.validation.of": self.sweep_id,
                      "t4bench.validation.set": label})
            try:
                mlflow_runs.set_tags(self.mlflow, parent, {f"t4bench.params.{o.split('=', 1)[0]}": o.split("=", 1)[1] for o in params})
                done = {r["seed"] for r in mlflow_runs.seed_results(self.mlflow, self.exp_id, sweep_id)}
                todo = [s for s in seeds if s not in done]
                batch = [[*self.space.fixed, *params, f"seed={s}", f"tracking.sweep_id={_quote(sweep_id)}",
                          f"tracking.parent_run_id={parent}"] for s in todo]
                log.info("validation %s: %s on seeds %s (%d already run)", label, params or "reference", todo, len(done & set(seeds)))
                if batch:
                    for ret in self.launcher.launch(batch, initial_job_idx=offset * 100000 + int(todo[0])):
                        _ = ret.return_value
                # by seed: runs of one set may come from several validation processes (in any order)
                results = sorted((r for r in mlflow_runs.seed_results(self.mlflow, self.exp_id, sweep_id) if r["seed"] in set(seeds)),
                                 key=lambda r: r["seed"])
                summary = summarize(results)
                record(self.mlflow, parent, summary, self.sweep_dir / f"validate-{label}", f"{label} ({sweep_id})")
            except BaseException as err:
                # never leave the validation parent RUNNING: a re-run of the command finds and reuses it
                killed = isinstance(err, (KeyboardInterrupt, RunTerminated))
                self.mlflow.set_terminated(parent, status="KILLED" if killed else "FAILED")
                raise
            self.mlflow.set_terminated(parent, status="FINISHED")
            out[label] = {"sweep_id": sweep_id, "overrides": params, **summary}
        self._print_validation(out)
        return out

    def _print_validation(self, out: Mapping[str, Any]) -> None:
        import json

        from t4bench.sweep.summary import _json_safe

        columns = {f"{label}:{metric}": out[label]["distributions"][metric]
                   for metric in ("epochs_to_converge", "time_to_train_s") for label in ("best", "reference")}
        text = "\n".join([
            f"held-out validation of study {self.study_name} on seeds {out['seeds']}",
            f"best (trial {out['best_trial']}): {' '.join(out['best']['overrides'])}",
            "reference: the config's own values",
            stats.format_table(columns),
            "per seed epochs_to_converge:",
            *(f"  {label:<10}" + " ".join(
                f"{r['seed']}:{'-' if not math.isfinite(r['epochs_to_converge']) else int(r['epochs_to_converge'])}"
                for r in out[label]["runs"]) for label in ("best", "reference")),
        ])
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        (self.sweep_dir / "validation.json").write_text(json.dumps(_json_safe(dict(out)), indent=2, default=str))
        (self.sweep_dir / "validation.md").write_text(f"```\n{text}\n```\n")
        if self.parent_id:
            try:
                self.mlflow.log_artifact(self.parent_id, str(self.sweep_dir / "validation.md"))
                b, r = out["best"]["distributions"]["epochs_to_converge"], out["reference"]["distributions"]["epochs_to_converge"]
                mlflow_runs.log_metrics(self.mlflow, self.parent_id, {
                    "validation_best_epochs_mean": b["mean"], "validation_best_epochs_std": b["std"],
                    "validation_reference_epochs_mean": r["mean"], "validation_reference_epochs_std": r["std"]})
            except Exception as err:
                log.warning("MLflow parent run %s: %s", self.parent_id, err)
        print(text, flush=True)

    def _print(self, summary: Mapping[str, Any]) -> None:
        counts = summary["counts"]
        lines = [
            f"study {self.study_name} ({self.storage_url}): {counts['COMPLETE']} complete, "
            f"{counts['PRUNED']} pruned, {counts['FAIL']} failed, {counts['RUNNING']} running; "
            f"{summary['epochs_spent']:.0f} epochs spent",
        ]
        if "best_value" in summary:
            lines.append(f"best trial {summary['best_trial']}: {self.objective.aggregate} "
                         f"{self.objective.metric} = {summary['best_value']:.4f} with {summary['best_params']}")
        print("\n".join(lines), flush=True)
