"""Several runs on one GPU (`hw.runs_per_gpu=N`, docs/sweeps.md): the memory check made before a
sweep starts anything, the number of sweep workers it implies, and the tags every packed run gets.

Light at import (stdlib, OmegaConf): the check runs in a Hydra callback before any run exists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from t4bench import hardware
from t4bench.errors import T4BenchError
from t4bench.spec import HwSpec, RunSpec
from t4bench.tracking import names

#: how the peak of one run is measured when the table has none (the refusal says it)
MEASURE_HINT = (
    "run one alone and read the GPU memory NVML shows in use (nvidia-smi; the N=1 row of perf/runs_per_hour.py)"
)


def runs_per_gpu(spec: RunSpec) -> int:
    value = spec.hw.get("runs_per_gpu", 1)
    if value is None or int(value) < 1:
        raise T4BenchError(f"hw.runs_per_gpu={value}: give a positive number of runs per GPU")
    return int(value)


def table_key(spec: RunSpec) -> str:
    """The `hw.peak_memory_gib` entry of this run: <model>_<scale>."""
    return f"{spec.model.name}_{spec.scale.name}"


def fit_error(
    runs: int, peak_gib: float | None, totals_gib: Sequence[float], margin: float, context_gib: float, what: str
) -> str | None:
    """Why `runs` copies of a run using `peak_gib` on the GPU (plus `context_gib`
    each) do not fit in (1 - margin) of the smallest GPU of `totals_gib`; None when they fit.
    Pure: the totals come from NVML in `check`, from the test's numbers in tests."""
    if runs <= 1:
        return None
    if peak_gib is None:
        return (
            f"hw.runs_per_gpu={runs}: the peak GPU memory of {what} is unknown (hw.peak_memory_gib.{what}=null); "
            f"{MEASURE_HINT}, then pass hw.peak_memory_gib.{what}=<GiB>"
        )
    if not totals_gib:
        return f"hw.runs_per_gpu={runs}: no GPU memory size could be read; use hw.runs_per_gpu=1"
    total = min(totals_gib)
    usable = total * (1.0 - margin)
    need = runs * (float(peak_gib) + context_gib)
    if need > usable:
        peak = float(peak_gib)
        fits = int(usable // (peak + context_gib))
        return (
            f"hw.runs_per_gpu={runs}: {runs} x ({peak:.1f} GiB peak of {what} + {context_gib:.1f} GiB context) "
            f"= {need:.1f} GiB > {usable:.1f} GiB ({1.0 - margin:.0%} of {total:.0f} GiB); at most {fits} fit"
        )
    return None


def check(spec: RunSpec, totals_gib: Sequence[float] | None = None) -> None:
    """Raise T4BenchError (one line) unless `hw.runs_per_gpu` runs of this config fit this host:
    on a GPU, in its memory (NVML's total unless `totals_gib` is given); on hw=cpu, one core each."""
    runs = runs_per_gpu(spec)
    if runs == 1:
        return
    if spec.hw.name == "cpu":
        cores = hardware.host_cores()
        if runs > cores:
            raise T4BenchError(f"hw.runs_per_gpu={runs} on hw=cpu: only {cores} cores here, one run per core at most")
        return
    if totals_gib is None:
        from t4bench.gpu_inventory import nvml_memory_gib

        read, why = nvml_memory_gib()
        if read is None:
            raise T4BenchError(f"hw.runs_per_gpu={runs}: cannot read the GPU's memory size from NVML ({why})")
        totals_gib = read
    peaks = spec.hw.get("peak_memory_gib") or {}
    peak = peaks.get(table_key(spec))
    error = fit_error(
        runs,
        None if peak is None else float(peak),
        totals_gib,
        float(spec.hw.get("pack_margin", 0.1)),
        float(spec.hw.get("context_gib", 0.0)),
        table_key(spec),
    )
    if error:
        raise T4BenchError(error)


def memory_fraction(hw: HwSpec, share: int) -> float | None:
    """The share of the GPU's memory this run's caching allocator may hold: `hw.gpu_memory_fraction`
    when given, else (1 - hw.pack_margin) / N for a run packed N (`share`) to a GPU, else None (no
    cap). Without a cap packed runs' allocators keep what the GPU lets them: 24 Transformer ding runs,
    2.2 GiB each alone, filled an 80 GiB H100 and cuDNN's attention failed in 23 (2026-12-05).
    With one, a run at its share frees its cache before it asks the GPU for more."""
    given = hw.get("gpu_memory_fraction")
    if given is not None:
        value = float(given)
        if not 0.0 < value <= 1.0:
            raise T4BenchError(f"hw.gpu_memory_fraction={given}: give a share of the GPU's memory in (0, 1]")
        return value
    if share <= 1:
        return None
    return (1.0 - float(hw.get("pack_margin", 0.1))) / share


def gpu_count() -> int:
    """GPUs this process may use (NVML narrowed by CUDA_VISIBLE_DEVICES); 1 on a CPU-only host."""
    found, _ = hardware.nvml_gpu_names()
    return max(len(found or []), 1)


def sweep_jobs(spec: RunSpec, given: Any) -> int:
    """Optuna sweep workers: `hydra.sweeper.n_jobs` when given, else runs_per_gpu x GPUs."""
    if given not in (None, ""):
        return int(given)
    runs = runs_per_gpu(spec)
    return runs if runs == 1 else runs * gpu_count()


def visible_gpu(worker: int, gpus: int, environ: dict[str, str] | None = None) -> str:
    """The CUDA_VISIBLE_DEVICES entry of sweep worker `worker` when workers spread over `gpus` GPUs
    round-robin (worker i on GPU i mod gpus, of those already visible)."""
    env = os.environ if environ is None else environ
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    pool = visible or [str(i) for i in range(gpus)]
    return pool[worker % len(pool)]


def derive(spec: RunSpec, multirun: bool) -> tuple[int, int | None, dict[str, str]]:
    """How many runs share the GPU, the CPU threads of a packed CPU run (None: unchanged) and the
    sharing tags: t4bench.gpu_share (runs of this sweep at once on the GPU: hw.runs_per_gpu in a
    --multirun, else 1), t4bench.mps (on/off), t4bench.gpu_memory_fraction (a capped GPU run). On
    hw=cpu, packed runs split the cores (hw.threads unset and no OMP_NUM_THREADS): N runs with
    every core's threads each would oversubscribe the host."""
    share = runs_per_gpu(spec) if multirun else 1
    mps = "on" if multirun and bool(spec.hw.get("mps", False)) else "off"
    tags = {names.GPU_SHARE: str(share), names.MPS: mps}
    fraction = memory_fraction(spec.hw, share)  # checked on every hw: a bad value is refused on a CPU too
    if fraction is not None and spec.hw.name != "cpu":
        tags[names.GPU_MEMORY_FRACTION] = f"{fraction:.4f}"
    threads = None
    if share > 1 and spec.hw.name == "cpu" and spec.hw.threads is None and not os.environ.get("OMP_NUM_THREADS"):
        threads = max(1, hardware.host_cores() // share)
    return share, threads, tags
