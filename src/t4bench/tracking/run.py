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

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param

from t4bench.tracking import experiments, liveness, names, system_metrics
from t4bench.tracking.client import mlflow_client
from t4bench.tracking.run_config import RunConfig
from t4bench.tracking.run_facts import (
    BenchmarkKind,
    RunOpening,
    RunPlace,
    contract_tags,
    default_run_name,
    flatten,
    opening,
    resolved_config,
    software_versions,
)
from t4bench.tracking.tags import chunks, create_run, fold_tags, store_tags

# the plain-value part of a run's record lives in run_facts (no MLflow); named here too for the
# modules and tests that import it from this one
__all__ = [
    "BenchmarkKind",
    "RunPlace",
    "RunTracker",
    "contract_tags",
    "default_run_name",
    "flatten",
    "resolved_config",
    "software_versions",
]

log = logging.getLogger(__name__)


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
        return self.open(opening(cfg, env, tags))  # a bad value raises here: before any run

    @property
    def run_pending(self) -> bool:
        return False  # made in this process: there when `begin` returns

    def stopping(self) -> None:
        pass  # nothing is made elsewhere that a stop could wait on

    def begin(self, cfg: RunConfig, env: RunPlace, tags: Mapping[str, str]) -> None:
        """`start` (the Tracker protocol's name: a tracking process may finish it later)."""
        self.start(cfg, env, tags)

    def open(self, values: RunOpening) -> str:
        """`start` from plain values (a tracking process receives these, `run_facts.opening`)."""
        if self.client is None:
            return ""
        self.system_metrics_interval_s = values.system_metrics_interval_s
        adopted = self.run_id is not None
        if self.run_id is None:
            experiment_id = self.ensure_experiment(values.experiment)
            self.run_id = create_run(self.client, experiment_id, values.name, values.tags)
        else:  # a run made by a launcher (mlflow run): give it the contract's name too
            self.client.update_run(self.run_id, name=values.name)
            self.set_tags(values.tags)
        params = dict(values.params)
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
        self.log_stamped(metrics, step, int(time.time() * 1000))

    def log_stamped(self, metrics: Mapping[str, float], step: int, stamp_ms: int) -> None:
        """`log_metrics` at the time they were measured (a tracking process writes them later)."""
        self._monitor_system()
        self._log_batch(metrics=[Metric(k, float(v), stamp_ms, step) for k, v in metrics.items()])

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        self.log_metrics(metrics, step=epoch)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if self.client is not None and self.run_id and path.exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def heartbeat(self) -> liveness.Heartbeat:
        """The run's heartbeat, started (host/pid tags now, the time every interval)."""
        assert self.tracking_uri is not None and self.run_id
        return liveness.Heartbeat(self.tracking_uri, self.run_id).start()

    def telemetry_sink(self) -> Callable[[Sequence[tuple[str, float, int, int]]], None]:
        """Telemetry points to the run, from the sampler's thread, on a client of its own."""
        assert self.tracking_uri is not None and self.run_id
        client, run_id = mlflow_client(self.tracking_uri), self.run_id

        def sink(points: Sequence[tuple[str, float, int, int]]) -> None:
            metrics = [Metric(name, value, stamp, step) for name, value, stamp, step in points]
            for chunk in chunks(metrics):
                client.log_batch(run_id, metrics=chunk)

        return sink

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
