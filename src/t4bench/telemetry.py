"""GPU telemetry through NVML (`pynvml`, from nvidia-ml-py): one background sampler on rank 0.

Every `interval_s` the sampler reads, for each GPU this node's ranks train on: utilization, memory
used, power, temperature, SM clock, clock-throttle reasons and the total-energy counter. Readings
are buffered and handed to a sink (MLflow, from the runner) every `log_interval_s`, so the training
thread never waits on NVML or on the tracking store. At the end it gives summary metrics
(`energy_to_train_kj`, `avg_power_w`, `max_temp_c`, `throttled_fraction`, ...) over the training
window (MLPerf run_start..run_stop when marked, else the whole sampling time) and inventory tags.

The series it logs are the ones MLflow's own GPU monitor (`t4bench.tracking.system_metrics`) lacks, named
as MLflow names its own (`system/gpu_<NVML index>_<what>_<unit>`) so the run page's System metrics
tab shows them beside MLflow's utilization, memory and power of the same GPU: temperature, SM
clock, throttling and energy (`SERIES`).

No NVML (a CPU host, no driver) or a CPU profile: telemetry is off, the reason is a tag, no error.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from t4bench.gpu_inventory import inventory, nvml_try
from t4bench.tracking import names as mlflow_names

#: throttle reasons that mean the GPU ran slower than it could (power cap, thermal, HW slowdown,
#: power brake); idle, application-clock and sync-boost reasons are not throttling
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80

#: (name, value, timestamp_ms, step) of one metric point
MetricPoint = tuple[str, float, int, int]
Sink = Callable[[list[MetricPoint]], None]

#: MLflow's system-metric namespace (the System metrics tab shows the metrics named under it)
SYSTEM_PREFIX = "system/"
#: our per-GPU series, by field: what MLflow's GPU monitor does not log (it logs utilization,
#: memory and power as system/gpu_<i>_utilization_percentage, _memory_usage_megabytes, ...)
SERIES = {
    "temp_c": "temperature_celsius",
    "sm_clock_mhz": "sm_clock_megahertz",
    "throttled": "throttled",
    "throttle_reasons": "throttle_reasons",
    "energy_kj": "energy_kilojoules",
}


def series_name(gpu: int, field: str) -> str:
    """`system/gpu_<gpu>_<name>` of one of SERIES' fields."""
    return f"{SYSTEM_PREFIX}gpu_{gpu}_{SERIES[field]}"


@dataclass(frozen=True)
class Reading:
    """One GPU at one moment; None where the GPU does not support the query."""

    gpu: int
    time_s: float
    util_pct: float | None
    mem_used_gb: float | None
    power_w: float | None
    temp_c: float | None
    sm_clock_mhz: float | None
    throttle_reasons: int | None
    #: the driver's total-energy counter, millijoules since the driver loaded
    energy_mj: int | None

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons and self.throttle_reasons & THROTTLE_MASK)


def read_gpu(nvml: ModuleType, handle: Any, gpu: int, now: float | None = None) -> Reading:
    util = nvml_try(nvml.nvmlDeviceGetUtilizationRates, handle)
    memory = nvml_try(nvml.nvmlDeviceGetMemoryInfo, handle)
    power_mw = nvml_try(nvml.nvmlDeviceGetPowerUsage, handle)
    temp = nvml_try(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
    clock = nvml_try(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1))
    reasons_fn = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    reasons = nvml_try(reasons_fn, handle)
    energy = nvml_try(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
    return Reading(
        gpu=gpu,
        time_s=time.monotonic() if now is None else now,
        util_pct=float(util.gpu) if util is not None else None,
        mem_used_gb=memory.used / 1e9 if memory is not None else None,
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        temp_c=float(temp) if temp is not None else None,
        sm_clock_mhz=float(clock) if clock is not None else None,
        throttle_reasons=int(reasons) if reasons is not None else None,
        energy_mj=int(energy) if energy is not None else None,
    )


def metric_points(readings: Sequence[Reading], step: int, energy_base_mj: dict[int, int]) -> list[MetricPoint]:
    """MLflow points for one sample of all GPUs (SERIES, `system/gpu_<i>_...`)."""
    stamp = int(time.time() * 1000)
    points: list[MetricPoint] = []
    for r in readings:
        values = {
            "temp_c": r.temp_c,
            "sm_clock_mhz": r.sm_clock_mhz,
            "throttled": None if r.throttle_reasons is None else float(r.throttled),
            "throttle_reasons": None if r.throttle_reasons is None else float(r.throttle_reasons),
        }
        if r.energy_mj is not None and r.gpu in energy_base_mj:
            values["energy_kj"] = (r.energy_mj - energy_base_mj[r.gpu]) / 1e6
        points.extend((series_name(r.gpu, k), float(v), stamp, step) for k, v in values.items() if v is not None)
    return points


@dataclass
class Window:
    """The span summary metrics cover, with the energy counters at both ends."""

    start_s: float
    stop_s: float | None = None
    energy_start_mj: dict[int, int] = field(default_factory=dict)
    energy_stop_mj: dict[int, int] = field(default_factory=dict)


def summarize(samples: Sequence[Sequence[Reading]], window: Window) -> dict[str, float]:
    """Summary metrics over the samples inside `window` (each sample: one Reading per GPU)."""
    stop = window.stop_s if window.stop_s is not None else float("inf")
    inside = [s for s in samples if s and window.start_s <= s[0].time_s <= stop]
    duration = (
        window.stop_s if window.stop_s is not None else (inside[-1][0].time_s if inside else window.start_s)
    ) - window.start_s
    summary: dict[str, float] = {"telemetry_samples": float(len(inside))}
    energy_j: float | None = None
    gpus = set(window.energy_start_mj) & set(window.energy_stop_mj)
    if gpus:
        energy_j = sum(window.energy_stop_mj[g] - window.energy_start_mj[g] for g in gpus) / 1000.0
    elif len(inside) >= 2:  # no energy counter: integrate the summed power (trapezoids)
        energy_j = 0.0
        for before, after in itertools.pairwise(inside):
            p0 = sum(r.power_w or 0.0 for r in before)
            p1 = sum(r.power_w or 0.0 for r in after)
            energy_j += (p0 + p1) / 2 * (after[0].time_s - before[0].time_s)
    if energy_j is not None:
        summary["energy_to_train_kj"] = energy_j / 1000.0
        if duration > 0:
            summary["avg_power_w"] = energy_j / duration
    elif inside:
        powers = [sum(r.power_w or 0.0 for r in s) for s in inside]
        summary["avg_power_w"] = sum(powers) / len(powers)
    temps = [r.temp_c for s in inside for r in s if r.temp_c is not None]
    if temps:
        summary["max_temp_c"] = max(temps)
    flagged = [s for s in inside if any(r.throttle_reasons is not None for r in s)]
    if flagged:
        summary["throttled_fraction"] = sum(any(r.throttled for r in s) for s in flagged) / len(flagged)
    utils = [r.util_pct for s in inside for r in s if r.util_pct is not None]
    if utils:
        summary["avg_gpu_util_pct"] = sum(utils) / len(utils)
    mems = [r.mem_used_gb for s in inside for r in s if r.mem_used_gb is not None]
    if mems:
        summary["max_gpu_mem_used_gb"] = max(mems)
    clocks = [r.sm_clock_mhz for s in inside for r in s if r.sm_clock_mhz is not None]
    if clocks:
        summary["avg_sm_clock_mhz"] = sum(clocks) / len(clocks)
    return summary


class Telemetry:
    """The interface the runner uses; `Off` and `Sampler` implement it."""

    enabled = False

    def tags(self) -> dict[str, str]:
        raise NotImplementedError

    def mark_start(self) -> None:
        """Training starts (MLPerf run_start): summary metrics count from here."""

    def mark_stop(self) -> None:
        """Training ended (MLPerf run_stop)."""

    def stop(self) -> dict[str, float]:
        """Stop sampling, flush what is buffered, return the summary metrics."""
        return {}


class Off(Telemetry):
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def tags(self) -> dict[str, str]:
        return {mlflow_names.TELEMETRY: f"off: {self.reason}"}


class Sampler(Telemetry):
    enabled = True

    def __init__(
        self,
        nvml: ModuleType,
        handles: Sequence[Any],
        *,
        interval_s: float = 1.0,
        log_interval_s: float = 10.0,
        sink: Sink | None = None,
        owns_nvml: bool = True,
    ) -> None:
        self.nvml = nvml
        self.handles = list(handles)
        #: each GPU's NVML index (what MLflow's GPU monitor numbers it by); its position if unknown
        self.indices = [_nvml_index(nvml, h, i) for i, h in enumerate(self.handles)]
        self.interval_s = max(float(interval_s), 0.05)
        self.log_interval_s = float(log_interval_s)
        self.sink = sink
        self.owns_nvml = owns_nvml
        self.samples: list[list[Reading]] = []
        self._pending: list[MetricPoint] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="t4bench-telemetry", daemon=True)
        self._inventory = inventory(nvml, self.handles)
        self._energy_base = self._energy_now()
        self.window = Window(start_s=time.monotonic(), energy_start_mj=dict(self._energy_base))
        self.sample_cost_s = 0.0
        self.sink_errors = 0

    def _energy_now(self) -> dict[int, int]:
        energy = {}
        for i, h in zip(self.indices, self.handles, strict=True):
            value = nvml_try(self.nvml.nvmlDeviceGetTotalEnergyConsumption, h)
            if value is not None:
                energy[i] = int(value)
        return energy

    def start(self) -> Sampler:
        self.sample_once()
        self._thread.start()
        return self

    def tags(self) -> dict[str, str]:
        return {
            mlflow_names.TELEMETRY: f"on: {len(self.handles)} GPU(s) every {self.interval_s:g} s",
            **self._inventory,
        }

    def sample_once(self) -> list[Reading]:
        started = time.perf_counter()
        now = time.monotonic()
        readings = [read_gpu(self.nvml, h, i, now) for i, h in zip(self.indices, self.handles, strict=True)]
        points = metric_points(readings, len(self.samples), self._energy_base)
        with self._lock:
            self.samples.append(readings)
            self._pending.extend(points)
        self.sample_cost_s += time.perf_counter() - started
        return readings

    def _run(self) -> None:
        last_flush = time.monotonic()
        while not self._stop.wait(self.interval_s):
            self.sample_once()
            if time.monotonic() - last_flush >= self.log_interval_s:
                self.flush()
                last_flush = time.monotonic()

    def flush(self) -> None:
        with self._lock:
            points, self._pending = self._pending, []
        if points and self.sink is not None:
            try:
                self.sink(points)
            except Exception:  # a busy tracking store must not kill the run; the summary still lands
                self.sink_errors += 1

    def mark_start(self) -> None:
        self.window = Window(start_s=time.monotonic(), energy_start_mj=self._energy_now())

    def mark_stop(self) -> None:
        self.window.stop_s = time.monotonic()
        self.window.energy_stop_mj = self._energy_now()

    def stop(self) -> dict[str, float]:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        if self.window.stop_s is None:
            self.mark_stop()
        self.sample_once()
        self.flush()
        with self._lock:
            summary = summarize(self.samples, self.window)
        if self.samples:
            summary["telemetry_sample_cost_ms"] = 1000 * self.sample_cost_s / len(self.samples)
        if self.owns_nvml:
            nvml_try(self.nvml.nvmlShutdown)
        return summary


def _nvml_index(nvml: ModuleType, handle: Any, position: int) -> int:
    index = nvml_try(nvml.nvmlDeviceGetIndex, handle) if hasattr(nvml, "nvmlDeviceGetIndex") else None
    return int(index) if isinstance(index, int) else position


def _handles_for(nvml: ModuleType, count: int) -> list[Any]:
    """NVML handles of the first `count` GPUs CUDA shows this process, matched by UUID (NVML and
    CUDA may order devices differently), falling back to NVML order."""
    handles: list[Any] = []
    try:
        import torch

        if torch.cuda.is_available():
            for i in range(min(count, torch.cuda.device_count())):
                uuid = str(torch.cuda.get_device_properties(i).uuid)
                handles.append(
                    nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
                )
            if handles:
                return handles
    except Exception:
        handles = []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    indices = list(range(nvml.nvmlDeviceGetCount()))
    if visible and all(v.strip().isdigit() for v in visible.split(",") if v.strip()):
        indices = [int(v) for v in visible.split(",") if v.strip()]
    return [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices[:count]]


def start(
    *,
    enabled: bool,
    on_gpu: bool,
    gpus: int,
    interval_s: float = 1.0,
    log_interval_s: float = 10.0,
    sink: Sink | None = None,
) -> Telemetry:
    """A running sampler over this node's `gpus` training GPUs, or `Off(reason)`; never raises."""
    if not enabled:
        return Off("disabled (hw.telemetry.enabled=false)")
    if not on_gpu:
        return Off("no GPU in this run (CPU device)")
    try:
        import pynvml
    except ImportError as err:
        return Off(f"pynvml not importable ({err}); pip install nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except Exception as err:
        return Off(f"NVML unavailable: {err}")
    try:
        handles = _handles_for(pynvml, gpus)
        if not handles:
            nvml_try(pynvml.nvmlShutdown)
            return Off("NVML sees no GPU")
        return Sampler(pynvml, handles, interval_s=interval_s, log_interval_s=log_interval_s, sink=sink).start()
    except Exception as err:
        nvml_try(pynvml.nvmlShutdown)
        return Off(f"NVML error: {err}")
