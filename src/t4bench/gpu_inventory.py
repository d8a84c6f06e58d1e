"""The GPU inventory a telemetry run records as tags (names, driver, CUDA, PCIe link, memory,
power limit), read through NVML (`pynvml`, from nvidia-ml-py); split from `t4bench.telemetry`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from t4bench.tracking import names as mlflow_names

T = TypeVar("T")


def nvml_try(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, or None where the GPU does not support the query (NVML raises then)."""
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported and friends: that field stays None
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def inventory(nvml: ModuleType, handles: Sequence[Any]) -> dict[str, str]:
    """Tags: GPU names, driver, CUDA driver version, PCIe link, memory, power limit."""
    gpu = mlflow_names.GPU_PREFIX
    tags: dict[str, str] = {f"{gpu}count": str(len(handles))}
    names = [_text(nvml_try(nvml.nvmlDeviceGetName, h)) for h in handles]
    tags[f"{gpu}names"] = ", ".join(names)
    driver = nvml_try(nvml.nvmlSystemGetDriverVersion)
    if driver is not None:
        tags[f"{gpu}driver"] = _text(driver)
    cuda = nvml_try(nvml.nvmlSystemGetCudaDriverVersion)
    if cuda:
        tags[f"{gpu}cuda_driver"] = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
    links, memory, limits = [], [], []
    for i, h in enumerate(handles):
        gen, width = (
            nvml_try(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
            nvml_try(nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        )
        max_gen, max_width = (
            nvml_try(nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
            nvml_try(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        )
        if gen is not None:
            links.append(f"gpu{i} gen{gen} x{width} (max gen{max_gen} x{max_width})")
        info = nvml_try(nvml.nvmlDeviceGetMemoryInfo, h)
        if info is not None:
            memory.append(f"{info.total / 2**30:.0f}")
        limit = nvml_try(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
        if limit is not None:
            limits.append(f"{limit / 1000:.0f}")
    if links:
        tags[f"{gpu}pcie"] = "; ".join(links)
    if memory:
        tags[f"{gpu}memory_gib"] = ", ".join(memory)
    if limits:
        tags[f"{gpu}power_limit_w"] = ", ".join(limits)
    try:
        import torch

        if torch.version.cuda:
            tags[f"{gpu}cuda_runtime"] = str(torch.version.cuda)
    except ImportError:
        pass
    return tags


def nvml_read(read: Callable[[ModuleType, list[Any]], T]) -> tuple[T | None, str]:
    """`read(pynvml, handles of every GPU)` between nvmlInit and nvmlShutdown, or (None, reason)
    where NVML is not usable here (no pynvml, no driver, a failing query)."""
    try:
        import pynvml
    except ImportError as err:
        return None, f"pynvml not importable ({err}); pip install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return None, str(err)
    try:
        return read(pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]), ""
    except pynvml.NVMLError as err:
        return None, str(err)
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def nvml_memory_gib() -> tuple[list[float] | None, str]:
    """Total memory (GiB) of each GPU NVML sees, or (None, reason) where NVML is not usable.
    Every GPU, not only CUDA_VISIBLE_DEVICES': packing checks against the smallest."""
    return nvml_read(lambda nvml, handles: [float(nvml.nvmlDeviceGetMemoryInfo(h).total) / 2**30 for h in handles])


def nvml_names() -> tuple[list[str] | None, str]:
    """The name of each GPU NVML sees (every GPU, CUDA_VISIBLE_DEVICES not applied)."""
    return nvml_read(lambda nvml, handles: [_text(nvml.nvmlDeviceGetName(h)) for h in handles])
