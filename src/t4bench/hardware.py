"""Hardware profiles (`conf/hw/*.yaml`): detect what this machine has, resolve `hw=auto`, check the
requested profile against it before anything is created, and pick the device of a rank.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from t4bench.errors import T4BenchError

PROFILE_DIR = Path(__file__).resolve().parents[2] / "conf" / "hw"
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
    extra_tags: dict[str, str] = field(default_factory=dict)

    def tags(self) -> dict[str, str]:
        tags = {
            "t4bench.hw_requested": self.requested,
            "t4bench.hw_detected": self.found.describe(),
            "t4bench.hw_detected_source": self.found.source,
            **self.extra_tags,
        }
        if self.mismatch:
            tags["t4bench.hw_mismatch"] = self.mismatch
        return tags


def nvml_gpu_names() -> tuple[list[str] | None, str]:
    """GPU names from NVML, or (None, reason) when NVML is not usable here."""
    try:
        import pynvml
    except ImportError as err:
        return None, f"pynvml not importable ({err}); pip install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return None, str(err)
    try:
        names = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return _visible(names), ""
    except pynvml.NVMLError as err:
        return None, str(err)
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


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
            return names[: _torch_count()]
        if int(item) < len(names):
            picked.append(names[int(item)])
    return picked


def _torch_count() -> int:
    import torch

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
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        gpus = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        return Found(gpus, "torch.cuda", error)
    return Found((), "none", error)


def load_profile(name: str) -> DictConfig:
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.exists():
        raise T4BenchError(f"hw={name}: no profile {path}")
    profile = OmegaConf.load(path)
    assert isinstance(profile, DictConfig)
    return profile


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml") if p.stem != "auto")


def matches(profile: DictConfig | dict[str, Any], gpu_name: str) -> bool:
    pattern = profile.get("nvml_name")
    return bool(pattern) and re.search(str(pattern), gpu_name, re.IGNORECASE) is not None


def profile_for(found: Found) -> str:
    """The profile name of the detected hardware: cpu without a GPU, else the one matching GPU 0."""
    if not found.gpus:
        return "cpu"
    for name in profile_names():
        if matches(load_profile(name), found.gpus[0]):
            return name
    raise T4BenchError(
        f"hw=auto found {found.describe()}, which no profile in {PROFILE_DIR} matches "
        f"(profiles: {', '.join(profile_names())}); add conf/hw/<name>.yaml with its nvml_name"
    )


# --------------------------------------------------------------------------------------------
# resolution (before spawning) and the check


def outer_world_size() -> int:
    """Ranks an outer launcher started (torchrun, horovodrun/mpirun, SLURM srun); 1 when none."""
    for var in ("WORLD_SIZE", "HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if os.environ.get(var):
            return int(os.environ[var])
    if os.environ.get("SLURM_PROCID") is not None and os.environ.get("SLURM_NTASKS"):
        return int(os.environ["SLURM_NTASKS"])
    return 1


def outer_rank() -> int:
    """This process's global rank under an outer launcher (0 when run directly)."""
    for var in ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(var):
            return int(os.environ[var])
    return 0


def outer_local_world_size() -> int:
    for var in ("LOCAL_WORLD_SIZE", "HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        if os.environ.get(var):
            return int(os.environ[var])
    if os.environ.get("SLURM_PROCID") is not None and os.environ.get("SLURM_NTASKS_PER_NODE"):
        return int(os.environ["SLURM_NTASKS_PER_NODE"].split("(")[0])
    return outer_world_size()


def resolve(cfg: DictConfig, found: Found | None = None) -> Found:
    """In place: `hw=auto` becomes the detected profile (with auto's non-null keys on top), and
    under an outer launcher `hw.count` becomes the launcher's world size. Returns the detection."""
    found = found or detect()
    with open_dict(cfg):
        if str(cfg.hw.name) == "auto":
            picked = load_profile(profile_for(found))
            for key in _AUTO_OVERRIDES:
                value = cfg.hw.get(key)
                if value is not None:
                    picked[key] = value
            picked["requested"] = "auto"
            cfg.hw = picked
        world = outer_world_size()
        if world > 1:
            count = int(cfg.hw.count)
            if count not in (1, world):
                raise T4BenchError(
                    f"hw.count={count} but the launcher started {world} ranks "
                    "(leave hw.count out under torchrun/horovodrun/srun, or make them agree)"
                )
            cfg.hw.count = world
    return found


def check(cfg: DictConfig, found: Found | None = None) -> Check:
    """Fail before any training when the requested hardware is not here (unless hw.strict=false)."""
    found = found or detect()
    requested = str(cfg.hw.get("requested") or cfg.hw.name)
    result = Check(requested=requested, found=found)
    name = str(cfg.hw.name)
    count = int(cfg.hw.count)
    local = outer_local_world_size() if outer_world_size() > 1 else count
    problem = None
    if name == "cpu":
        return result
    asked = f"hw={name}" + (f" hw.count={count}" if count > 1 else "") + f" asks for {local}x {_label(cfg)}"
    if not found.gpus:
        nvml = f"NVML: {found.nvml_error}; " if found.nvml_error else ""
        problem = f"{asked}, but this machine has no NVIDIA GPU ({nvml}{found.cuda_note}); use hw=cpu or hw=auto"
        result.cpu_fallback = True
    else:
        wrong = [gpu for gpu in found.gpus if not matches(cfg.hw, gpu)]
        if wrong:
            try:
                hint = f"; use hw={profile_for(found)} or hw=auto"
            except T4BenchError:
                hint = ""
            problem = f"{asked}, but this machine has {found.describe()}{hint}"
        elif local > len(found.gpus):
            problem = f"{asked}, but this machine has only {found.describe()}"
    if problem is None:
        return result
    if bool(cfg.hw.strict):
        raise T4BenchError(f"{problem} (hw.strict=false runs anyway)")
    result.mismatch = problem
    return result


def _label(cfg: DictConfig) -> str:
    return str(cfg.hw.get("label") or f"{cfg.hw.name} GPU")


def device_for(cfg: DictConfig, local_rank: int) -> Any:
    """This rank's device: cuda:<local_rank> for GPU profiles (when CUDA is here), else the CPU."""
    import torch

    if cfg.hw.name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    index = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def host_cores() -> int:
    """Cores this process may run on (the affinity mask: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_per_rank(cfg: DictConfig, local_ranks: int) -> int | None:
    """torch intra-op threads for one rank: `hw.threads` when set; with several ranks on this host
    and no OMP_NUM_THREADS, the cores split between them (each rank's default of every core
    oversubscribes the host: 2 ranks x 2 threads on 2 cores run several times slower);
    None keeps torch's default."""
    chosen = cfg.hw.get("threads")
    if chosen is not None:
        if int(chosen) < 1:
            raise T4BenchError(f"hw.threads={chosen}: give a positive number of threads per rank, or null")
        return int(chosen)
    if local_ranks > 1 and not os.environ.get("OMP_NUM_THREADS"):
        return max(1, host_cores() // local_ranks)
    return None


def uses_gpu(cfg: DictConfig) -> bool:
    import torch

    return cfg.hw.name != "cpu" and torch.cuda.is_available()


def profile_tags(cfg: DictConfig) -> dict[str, str]:
    """The profile's facts as tags, so a report can put throughput next to the hardware's peaks."""
    hw = cfg.hw
    precision = str(hw.precision)
    peak = (hw.get("peak_tflops") or {}).get(precision)
    tags = {
        "t4bench.precision": precision,
        "t4bench.hw_profile.memory_gb": hw.get("memory_gb"),
        "t4bench.hw_profile.peak_tflops": peak,
        "t4bench.hw_profile.memory_bandwidth_gbs": hw.get("memory_bandwidth_gbs"),
        "t4bench.hw_profile.tdp_w": hw.get("tdp_w"),
        "t4bench.hw_profile.interconnect": hw.get("interconnect"),
    }
    return {k: str(v) for k, v in tags.items() if v is not None}
