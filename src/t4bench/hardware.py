"""Hardware profiles (`conf/hw/*.yaml`): detect what this machine has, resolve `hw=auto`, check the
requested profile against it before anything is created, and the CPU threads per rank.
`t4bench.run_env` calls these once and carries the outcome; nothing here changes a config.

Detection asks NVML first (names, no CUDA context) and falls back to `torch.cuda` only when a CUDA
driver library is present, so a CPU host answers without importing torch (a wrong `hw=` fails in
about a second, before torch and MLflow load). A mismatch
(`hw=t4` on an H200 or on a CPU-only host, `hw.count=4` with one GPU) is one `T4BenchError` line
naming what was asked and what was found; `hw.strict=false` runs anyway and the run is tagged.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t4bench import gpu_inventory, resources
from t4bench.errors import T4BenchError
from t4bench.spec import HwSpec
from t4bench.spec.section import build
from t4bench.tracking import names

#: conf/hw/ as shipped in the package (t4bench.resources)
PROFILE_DIR = resources.conf_dir() / "hw"
#: the run block every profile gets (count, strict, threads, telemetry, runs_per_gpu, ...)
RUN_BLOCK = PROFILE_DIR / "run" / "default.yaml"
#: keys of conf/hw/auto.yaml that, when not null, override the detected profile's values
_AUTO_OVERRIDES = ("count", "precision", "strict", "loader_workers", "threads", "telemetry")


@dataclass(frozen=True)
class Found:
    """What this machine has: local GPU names (empty on a CPU host) and where that was read."""

    gpus: tuple[str, ...]
    #: "nvml", "torch.cuda" or "none"
    source: str
    #: why NVML could not be asked (empty when it was)
    nvml_error: str = ""
    #: what CUDA said when NVML found nothing: no driver library, or torch.cuda's device count
    cuda_note: str = "torch.cuda: 0 devices"

    def describe(self) -> str:
        if not self.gpus:
            why = f"; NVML: {self.nvml_error}" if self.nvml_error else ""
            return f"no NVIDIA GPU ({self.cuda_note}{why})"
        names: dict[str, int] = {}
        for name in self.gpus:
            names[name] = names.get(name, 0) + 1
        return ", ".join(f"{n}x {name}" for name, n in names.items())


@dataclass
class Check:
    """The outcome of `check`: the machine, and the mismatch when `hw.strict=false` let it pass."""

    requested: str
    found: Found
    mismatch: str | None = None
    #: True when a GPU profile runs on a host without CUDA (strict=false): train on the CPU
    cpu_fallback: bool = False

    def tags(self) -> dict[str, str]:
        tags = {
            names.HW_REQUESTED: self.requested,
            names.HW_DETECTED: self.found.describe(),
            names.HW_DETECTED_SOURCE: self.found.source,
        }
        if self.mismatch:
            tags[names.HW_MISMATCH] = self.mismatch
        return tags


def nvml_gpu_names() -> tuple[list[str] | None, str]:
    """GPU names from NVML (those CUDA_VISIBLE_DEVICES leaves), or (None, reason) when NVML is not
    usable here."""
    found, why = gpu_inventory.nvml_names()
    return (None, why) if found is None else (_visible(found), "")


def _visible(names: list[str]) -> list[str]:
    """NVML sees every GPU; CUDA_VISIBLE_DEVICES (numeric indices) narrows what torch may use."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return names
    picked = []
    for item in visible.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():  # UUIDs / MIG ids: trust torch's count below
            return names[: _torch_count(len(names))]
        if int(item) < len(names):
            picked.append(names[int(item)])
    return picked


def _torch_count(nvml_count: int) -> int:
    try:
        import torch
    except ImportError:  # a TensorFlow-only install: NVML's count is the best answer left
        return nvml_count
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cuda_driver_present() -> bool:
    """Whether the CUDA driver library loads: without it torch.cuda cannot see a GPU either, so
    detection can answer without importing torch (which takes seconds)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def detect() -> Found:
    names, error = nvml_gpu_names()
    if names:
        return Found(tuple(names), "nvml")
    if not cuda_driver_present():
        return Found((), "none", error, "no CUDA driver: libcuda.so.1 not found")
    try:
        import torch
    except ImportError:  # a TensorFlow-only install
        return Found((), "none", error, "NVML found nothing and torch is not installed to ask CUDA")
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        gpus = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        return Found(gpus, "torch.cuda", error)
    return Found((), "none", error)


def load_profile(name: str) -> DictConfig:
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.exists():
        raise T4BenchError(f"hw={name}: no profile {path}")
    # as config.yaml composes it: the shared run block (count, strict, threads, telemetry) under the profile
    profile = OmegaConf.merge(OmegaConf.load(RUN_BLOCK), OmegaConf.load(path))
    assert isinstance(profile, DictConfig)
    return profile


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml") if p.stem != "auto")


def matches(pattern: object, gpu_name: str) -> bool:
    """Whether a profile's `nvml_name` (a regular expression; None: no GPU) names `gpu_name`."""
    return bool(pattern) and re.search(str(pattern), gpu_name, re.IGNORECASE) is not None


def profile_for(found: Found) -> str:
    """The profile name of the detected hardware: cpu without a GPU, else the one matching GPU 0."""
    if not found.gpus:
        return "cpu"
    for name in profile_names():
        if matches(load_profile(name).get("nvml_name"), found.gpus[0]):
            return name
    raise T4BenchError(
        f"hw=auto found {found.describe()}, which no profile in {PROFILE_DIR} matches "
        f"(profiles: {', '.join(profile_names())}); add conf/hw/<name>.yaml with its nvml_name"
    )


# --------------------------------------------------------------------------------------------
# resolution and the check (`t4bench.run_env` calls these once, before any rank starts)


def resolve_profile(hw: HwSpec, found: Found, count: int | None = None) -> HwSpec:
    """The profile to train on, as a new section over a new read-only node (the composed one is
    left as it is), with `count` ranks (None: hw.count): `hw` itself for a named profile; for
    `hw=auto` the detected machine's profile with auto's non-null keys on top and `requested: auto`."""
    given: dict[str, Any] = OmegaConf.to_container(hw.rest, resolve=True)  # type: ignore[assignment]
    picked = OmegaConf.create(given) if hw.name != "auto" else _auto_profile(given, found)
    picked["count"] = hw.count if count is None else count
    OmegaConf.set_readonly(picked, True)
    return build(HwSpec, picked, "hw.")


def _auto_profile(chosen: dict[str, Any], found: Found) -> DictConfig:
    """`hw=auto` (its composed keys `chosen`) as the detected machine's profile."""
    picked = load_profile(profile_for(found))
    for key in _AUTO_OVERRIDES:
        value = chosen.get(key)
        if value is not None:
            picked[key] = value
    # the run block's keys that this composition changed (hw=auto hw.runs_per_gpu=12
    # hw.gpu_memory_fraction=0.0375 ...): the picked profile was loaded from its files and would
    # otherwise drop them (runs logged runs_per_gpu=1 and capped at another share, 2026-12-05)
    for key, value in _changed_run_keys(chosen).items():
        OmegaConf.update(picked, key, value, merge=False)
    picked["requested"] = "auto"
    return picked


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_leaves(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def _changed_run_keys(chosen: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys of conf/hw/run/default.yaml whose value in `chosen` differs from that file's."""
    defaults = _leaves(OmegaConf.to_container(OmegaConf.load(RUN_BLOCK)))
    given = _leaves(chosen)
    return {key: given[key] for key, default in defaults.items() if key in given and given[key] != default}


def check(hw: HwSpec, found: Found, local_ranks: int) -> Check:
    """Fail before any training when the requested hardware is not here (unless hw.strict=false).
    `local_ranks`: the ranks that train on this host (each wants a GPU of the profile)."""
    requested = str(hw.get("requested") or hw.name)
    result = Check(requested=requested, found=found)
    name, count = hw.name, hw.count
    problem = None
    if name == "cpu":
        return result
    asked = f"hw={name}" + (f" hw.count={count}" if count > 1 else "") + f" asks for {local_ranks}x {_label(hw)}"
    if not found.gpus:
        nvml = f"NVML: {found.nvml_error}; " if found.nvml_error else ""
        problem = f"{asked}, but this machine has no NVIDIA GPU ({nvml}{found.cuda_note}); use hw=cpu or hw=auto"
        result.cpu_fallback = True
    else:
        wrong = [gpu for gpu in found.gpus if not matches(hw.get("nvml_name"), gpu)]
        if wrong:
            try:
                hint = f"; use hw={profile_for(found)} or hw=auto"
            except T4BenchError:
                hint = ""
            problem = f"{asked}, but this machine has {found.describe()}{hint}"
        elif local_ranks > len(found.gpus):
            problem = f"{asked}, but this machine has only {found.describe()}"
    if problem is None:
        return result
    if hw.strict:
        raise T4BenchError(f"{problem} (hw.strict=false runs anyway)")
    result.mismatch = problem
    return result


def _label(hw: HwSpec) -> str:
    return str(hw.get("label") or f"{hw.name} GPU")


def host_cores() -> int:
    """Cores this process may run on (the affinity mask: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_per_rank(hw: HwSpec, local_ranks: int, environ: Mapping[str, str]) -> int | None:
    """CPU intra-op threads for one rank: `hw.threads` when set; with several ranks on this host
    and no OMP_NUM_THREADS, the cores split between them (each rank's default of every core
    oversubscribes the host: 2 ranks x 2 threads on 2 cores run several times slower);
    None keeps the framework's default."""
    if hw.threads is not None:  # at least 1: the spec's rule
        return hw.threads
    if local_ranks > 1 and not environ.get("OMP_NUM_THREADS"):
        return max(1, host_cores() // local_ranks)
    return None


def profile_tags(hw: HwSpec) -> dict[str, str]:
    """The profile's facts as tags, so a report can put throughput next to the hardware's peaks."""
    precision = str(hw.precision)
    peak = (hw.get("peak_tflops") or {}).get(precision)
    prefix = names.HW_PROFILE_PREFIX
    tags = {
        names.PRECISION: precision,
        f"{prefix}memory_gb": hw.get("memory_gb"),
        f"{prefix}peak_tflops": peak,
        f"{prefix}memory_bandwidth_gbs": hw.get("memory_bandwidth_gbs"),
        f"{prefix}tdp_w": hw.get("tdp_w"),
        f"{prefix}interconnect": hw.get("interconnect"),
    }
    return {k: str(v) for k, v in tags.items() if v is not None}
