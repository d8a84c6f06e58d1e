"""MLflow tracking: creating, filling and closing one run. The names are in `t4bench.tracking.names`.

Contract (reports, sweeps and the UI depend on these names):
- params: the resolved config, flattened (`model.lr`, `hw.name`, `seed`, ...)
- tags: t4bench.model / hw / hw_count / scale / framework / outcome / throughput_unit on the run
  (`names.RUN_TAGS`); every other t4bench tag (versions, perf options, devices, liveness)
  in the run's `run_tags.json` artifact — `tags.run_tags(client, run)` reads both
- per-epoch metrics (step = epoch): eval_quality, train_loss, epoch_time_s, throughput
  (`t4bench.tracking.epoch_metrics`)
- summary metrics: epochs_run, run_train_s, run_wall_s, converged, avg_throughput on every run;
  epochs_to_converge and time_to_train_s only on a converged run (MLPerf has no time to train for
  a run that did not reach its target)
- artifacts: the resolved config YAML and the MLPerf log
- system metrics (`system/...`, the run page's System metrics tab): MLflow's own monitor, started
  by the process that logs the run's metrics (`t4bench.tracking.system_metrics`)

Experiments are made classic-ML (not GenAI) with a description (`t4bench.tracking.experiments`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import platform
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

from mlflow.entities import Metric, Param
from omegaconf import OmegaConf

import t4bench
from t4bench.spec import HwSpec
from t4bench.tracking import experiments, names, run_names, system_metrics
from t4bench.tracking.client import mlflow_client
from t4bench.tracking.run_config import RunConfig
from t4bench.tracking.tags import chunks, create_run, fold_tags, store_tags

log = logging.getLogger(__name__)

_VERSIONED = (
    "torch",
    "torchvision",
    "mlflow",
    "hydra-core",
    "optuna",
    "nvidia-ml-py",
    "tensorflow",
    "horovod",
    # the quality metrics: BLEU and COCO mAP can shift between versions
    "sacrebleu",
    "sentencepiece",
    "pycocotools",
)


class RunPlace(Protocol):
    """What a run records of where it trains (`t4bench.run_env.RunEnvironment` is one: named
    here, not imported, so tracking stays below run_env, which spells its tags from tracking.names)."""

    @property
    def hw(self) -> HwSpec: ...

    @property
    def world_size(self) -> int: ...


class BenchmarkKind(Protocol):
    """What a run records of its benchmark class (`t4bench.benchmark.Benchmark`'s class attributes)."""

    framework: ClassVar[str]
    throughput_unit: ClassVar[str]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{'model': {'lr': 1}} -> {'model.lr': '1'}; lists stay one value."""
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def resolved_config(cfg: RunConfig, env: RunPlace) -> dict[str, Any]:
    """The config as the run used it: `${...}` resolved, and `hw` the profile trained on (`hw=auto`
    resolved, hw.count = the ranks), so params and resolved_config.yaml say what ran."""
    container = cfg.logged_config()
    container.pop("hydra", None)
    container["hw"] = OmegaConf.to_container(env.hw.rest, resolve=True)
    return container


def software_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in _VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[package] = importlib.metadata.version(package)
    # a source checkout on PYTHONPATH (no pip install) has no distribution metadata
    versions["t4bench"] = t4bench.__version__
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def default_run_name(cfg: RunConfig, env: RunPlace) -> str:
    """The run's name when tracking.run_name gives none (t4bench.tracking.run_names.job)."""
    return run_names.job(cfg, env.hw.name, env.world_size)


def _artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """Beside the SQLite file, so runs and artifacts move together; a server decides for itself."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///"))
        return (db.parent / "mlartifacts" / experiment).resolve().as_uri()
    return None


class RunTracker:
    """One MLflow run. Only rank 0 holds an enabled tracker; the others get `RunTracker.disabled()`."""

    def __init__(self, tracking_uri: str | None, run_id: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        # a new SQLite store: made by one process at a time
        self.client = mlflow_client(tracking_uri, new_store=True) if tracking_uri else None
        self.run_id = run_id
        self.system_metrics_interval_s: float | None = system_metrics.DEFAULT_INTERVAL_S
        self._system_metrics: system_metrics.Monitor | None = None

    @classmethod
    def disabled(cls) -> RunTracker:
        return cls(None)

    @property
    def enabled(self) -> bool:
        return self.client is not None

    def ensure_experiment(self, name: str) -> str:
        """The experiment's id; made classic-ML with a description if it is new, given them if it
        lacks them (an experiment made before, or by hand: its own values are kept)."""
        assert self.client is not None and self.tracking_uri is not None
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                return self.client.create_experiment(
                    name,
                    artifact_location=_artifact_location(self.tracking_uri, name),
                    tags=experiments.tags_for(name),
                )
            except Exception:  # another process created it in between (parallel sweep workers)
                found = self.client.get_experiment_by_name(name)
                if found is None:
                    raise
        for key, value in experiments.missing_tags(name, found.tags).items():
            self.client.set_experiment_tag(found.experiment_id, key, value)
        return found.experiment_id

    def start(self, cfg: RunConfig, env: RunPlace, tags: Mapping[str, str]) -> str:
        """Create the run (or adopt `self.run_id` made by a launcher) and log config + tags."""
        if self.client is None:
            return ""
        self.system_metrics_interval_s = system_metrics.interval_from(cfg)  # a bad value: before any run
        adopted = self.run_id is not None
        if self.run_id is None:
            experiment_id = self.ensure_experiment(str(cfg.tracking.experiment))
            name = str(cfg.tracking.run_name or default_run_name(cfg, env))
            self.run_id = create_run(self.client, experiment_id, name, tags)
        else:  # a run made by a launcher (mlflow run): give it the contract's name too
            self.client.update_run(self.run_id, name=str(cfg.tracking.run_name or default_run_name(cfg, env)))
            self.set_tags(tags)
        params = flatten(resolved_config(cfg, env))
        for where in ("resume", "checkpoint.dir"):  # a resumed run changes them: not what ran
            params.pop(where, None)
        if adopted:  # a resumed run keeps the params it started with; what changed becomes tags
            logged = self.client.get_run(self.run_id).data.params
            changed = {k: v[:6000] for k, v in params.items() if k in logged and logged[k] != v[:6000]}
            self.set_tags({f"{names.RESUME_CHANGED_PREFIX}{k}": v for k, v in changed.items()})
            params = {k: v for k, v in params.items() if k not in logged}
        self._log_batch(params=[Param(k, v[:6000]) for k, v in sorted(params.items())])
        return self.run_id

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self.client is not None and self.run_id:
            store_tags(self.client, self.run_id, tags)

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        self._monitor_system()
        now = int(time.time() * 1000)
        self._log_batch(metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()])

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        self.log_metrics(metrics, step=epoch)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if self.client is not None and self.run_id and path.exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def end(self, status: str) -> None:
        """FINISHED, FAILED or KILLED — never left RUNNING."""
        if self._system_metrics is not None:  # its last points land before the run closes
            self._system_metrics.finish()
            self._system_metrics = None
        if self.client is not None and self.run_id:
            try:  # the heartbeat's tags (stopped by now) and any other written straight on the run
                fold_tags(self.client, self.run_id)
            except Exception as err:  # closing the run matters more than its tag budget
                log.warning("t4bench: tags of run %s not moved to %s: %s", self.run_id, names.RUN_TAGS_FILE, err)
            self.client.set_terminated(self.run_id, status=status)
            if self.tracking_uri:  # where to look at it: the experiment's runs, classic-ML view
                experiment_id = self.client.get_run(self.run_id).info.experiment_id
                print(experiments.ui_line(self.tracking_uri, experiment_id), flush=True)

    def _monitor_system(self) -> None:
        """MLflow's system-metrics monitor on this run, from the first metrics this process logs.
        The process that logs a run's metrics is the one training it: a launcher that only makes
        the run (runner._spawn_ranks) logs none, so one monitor runs per run, on the trainer."""
        if self._system_metrics is not None or self.client is None or not self.run_id:
            return
        assert self.tracking_uri is not None
        self._system_metrics = system_metrics.start(self.tracking_uri, self.run_id, self.system_metrics_interval_s)
        self.set_tags(self._system_metrics.tags())

    def _log_batch(
        self,
        metrics: list[Metric] | None = None,
        params: list[Param] | None = None,
    ) -> None:
        if self.client is None or not self.run_id:
            return
        client, run_id = self.client, self.run_id
        for chunk in chunks(metrics or []):
            client.log_batch(run_id, metrics=chunk)
        for param_chunk in chunks(params or []):
            client.log_batch(run_id, params=param_chunk)


def contract_tags(cfg: RunConfig, env: RunPlace, bench_cls: type[BenchmarkKind]) -> dict[str, str]:
    """The tags every run carries from its creation (reports and sweeps filter on them)."""
    tags = {
        names.MODEL: str(cfg.model.name),
        names.HW: str(env.hw.name),
        names.HW_COUNT: str(env.world_size),
        names.SCALE: str(cfg.scale.name),
        names.DATA: "synthetic" if cfg.input.synthetic else "real",
        names.FRAMEWORK: str(bench_cls.framework),
        names.THROUGHPUT_UNIT: str(bench_cls.throughput_unit),
        names.SEED: str(cfg.seed),
        names.OUTCOME: names.OUTCOME_RUNNING,
    }
    tags.update({f"{names.VERSION_PREFIX}{k}": v for k, v in software_versions().items()})
    commit = git_commit()
    if commit:
        tags[names.MLFLOW_GIT_COMMIT] = commit
    if cfg.tracking.sweep_id:
        tags[names.SWEEP_ID] = str(cfg.tracking.sweep_id)
    if cfg.tracking.parent_run_id:
        tags[names.MLFLOW_PARENT_RUN_ID] = str(cfg.tracking.parent_run_id)
    tags.update(cfg.tags)  # the user's tracking.tags, then the runner's derived ones
    return tags
