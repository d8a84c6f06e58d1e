"""MLflow's own system-metrics monitor on a t4bench run: CPU, memory, disk, network and (with
nvidia-ml-py and a driver) each GPU's utilization, memory and power, as `system/...` metrics that
the run page's System metrics tab charts. `t4bench.telemetry` adds what it lacks for the GPUs
(temperature, SM clock, throttling, energy: `system/gpu_<i>_...`) and the energy-to-train summary.

MLflow's public monitor class is used as `mlflow.start_run(log_system_metrics=True)` uses it,
without the fluent API's process-wide active run. Its own switches still hold:
MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false turns it off, MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL
sets the interval. It never fails a run: a monitor that cannot start is a tag and one console line saying why.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from t4bench.errors import T4BenchError
from t4bench.tracking import names
from t4bench.tracking.run_config import RunConfig

#: the run tag that says whether MLflow's monitor runs ("on: ..." / "off: <reason>")
TAG = names.SYSTEM_METRICS
#: seconds between samples (each one logged); MLflow's default of 10 s leaves a short run with none
DEFAULT_INTERVAL_S = 2.0
#: the config key that overrides it (0 or null: off)
CONFIG_KEY = "system_metrics_interval_s"


def interval_from(cfg: RunConfig) -> float | None:
    """`tracking.system_metrics_interval_s` (default DEFAULT_INTERVAL_S); None when 0 or null.
    Raises a one-line T4BenchError for a value that is not a number of seconds."""
    tracking = cfg.get("tracking") or {}
    value = tracking.get(CONFIG_KEY, DEFAULT_INTERVAL_S)
    try:
        seconds = 0.0 if value is None else float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if seconds < 0 or seconds != seconds:  # negative, NaN or not a number
        raise T4BenchError(f"tracking.{CONFIG_KEY}={value!r}: give seconds between samples, or 0 for none")
    return seconds or None


class Monitor:
    """A started monitor (`On`) or the reason there is none (`Off`)."""

    def tags(self) -> dict[str, str]:
        raise NotImplementedError

    def finish(self) -> None:
        """Stop sampling and log what is buffered (before the run is closed)."""


class Off(Monitor):
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def tags(self) -> dict[str, str]:
        return {TAG: f"off: {self.reason}"}


class On(Monitor):
    def __init__(self, monitor: Any) -> None:
        self.monitor = monitor

    def tags(self) -> dict[str, str]:
        kinds = ", ".join(type(m).__name__.removesuffix("Monitor").lower() for m in self.monitor.monitors)
        return {TAG: f"on: MLflow SystemMetricsMonitor every {self.monitor.sampling_interval:g} s ({kinds})"}

    def finish(self) -> None:
        self.monitor.finish()


def start(tracking_uri: str, run_id: str, interval_s: float | None) -> Monitor:
    """MLflow's monitor sampling the run `run_id` every `interval_s` s, or `Off(reason)`."""
    if interval_s is None:
        return Off(f"disabled (tracking.{CONFIG_KEY}=0)")
    from mlflow.environment_variables import MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING

    if MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING.is_set() and not MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING.get():
        return Off("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING is false")
    # its start/stop INFO lines would interleave with the progress output; the run tag says it
    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
    try:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # resume_logging: a run continued (resume=, an adopted run) goes on from its last step
        monitor = SystemMetricsMonitor(
            run_id, sampling_interval=interval_s, resume_logging=True, tracking_uri=tracking_uri
        )
        monitor.start()
    except Exception as err:  # psutil missing, a store that refuses: the run goes on without it
        reason = f"{type(err).__name__}: {err}".splitlines()[0]
        # a tag alone goes unseen until someone misses the charts: say it once on the console
        print(f"t4bench: system metrics off: {reason} (the run goes on without them)", file=sys.stderr)
        return Off(reason)
    return On(monitor)
