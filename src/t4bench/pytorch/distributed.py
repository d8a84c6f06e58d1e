"""Collective helpers the loop uses; all are no-ops in a single process.

Two backends sit behind the same functions: torch.distributed (DDP; NCCL on GPUs, gloo on CPU) and
Horovod (`dist=horovod`: `hvd.DistributedOptimizer` reduces gradients, rank 0's initial parameters
and optimizer state are broadcast). Process-group setup and rank launching live in
`t4bench.pytorch.launch`; this module only talks to an already-initialised group, so the loop reads the
same with 1 or N ranks and with either backend.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from t4bench.errors import T4BenchError

T = TypeVar("T")

HOROVOD_INSTALL_HINT = (
    "dist=horovod needs Horovod with PyTorch support, which is not installed: build it with "
    "`scripts/build_horovod.sh` (horovod 0.28.1 from the PyPI sdist with the C++17/20 build fix; "
    "needs cmake, g++, openmpi-bin, libopenmpi-dev; ~6 min), or use dist=ddp"
)


@dataclass
class HorovodBinding:
    """Whether this process's helpers go through Horovod: `hvd` is horovod.torch once
    `use_horovod` ran (dist=horovod), else None; `compression` is DistributedOptimizer's
    ("none" | "fp16")."""

    hvd: ModuleType | None = None
    compression: str = "none"


#: the process's binding: one per process, as torch.distributed's process group is
HOROVOD = HorovodBinding()


def import_horovod() -> ModuleType:
    try:
        import horovod.torch as hvd
    except ImportError as err:
        raise T4BenchError(f"{HOROVOD_INSTALL_HINT} ({err})") from err
    return hvd


def use_horovod(hvd: ModuleType | None, compression: str = "none") -> None:
    """Route every helper through Horovod (called by `launch.init_process_group` after hvd.init)."""
    HOROVOD.hvd, HOROVOD.compression = hvd, compression


def backend() -> str:
    if HOROVOD.hvd is not None:
        return "horovod"
    if active():
        return str(dist.get_backend())
    return "none"


def active() -> bool:
    if HOROVOD.hvd is not None:
        return True
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    if HOROVOD.hvd is not None:
        return int(HOROVOD.hvd.rank())
    return dist.get_rank() if active() else 0


def world_size() -> int:
    if HOROVOD.hvd is not None:
        return int(HOROVOD.hvd.size())
    return dist.get_world_size() if active() else 1


def _reduce(values: list[float], op: str, device: torch.device) -> list[float]:
    if not active() or world_size() == 1:
        return [float(v) for v in values]
    hvd = HOROVOD.hvd
    if hvd is not None:
        tensor = torch.tensor(values, dtype=torch.float64)  # Horovod CPU ops; the values are tiny
        hvd_op = hvd.Sum if op == "sum" else hvd.Max
        return hvd.allreduce(tensor, op=hvd_op, name=f"{__name__}.reduce_{op}").tolist()
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return tensor.tolist()


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    return _reduce(values, "sum", device)


def all_reduce_max(values: list[float], device: torch.device) -> list[float]:
    return _reduce(values, "max", device)


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank `src`'s object on every rank (eval metrics, the MLflow run id, the output dir)."""
    if not active() or world_size() == 1:
        return obj
    if HOROVOD.hvd is not None:
        return HOROVOD.hvd.broadcast_object(obj, root_rank=src)
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def barrier() -> None:
    if not active() or world_size() == 1:
        return
    if HOROVOD.hvd is not None:
        HOROVOD.hvd.barrier()
    else:
        dist.barrier()


def wrap_for_data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DDP around the model when several ranks train; the bare model otherwise.

    With Horovod the model stays bare (the optimizer reduces gradients) and rank 0's initial
    parameters and buffers are broadcast here, so every replica starts identical.
    """
    if not active() or world_size() == 1:
        return model
    if HOROVOD.hvd is not None:
        HOROVOD.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def wrap_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
    """Horovod: `hvd.DistributedOptimizer` (allreduce of gradients, averaged) and a broadcast of
    rank 0's optimizer state. DDP reduces in backward and needs nothing."""
    hvd = HOROVOD.hvd
    if hvd is None or world_size() == 1:
        return optimizer
    compression = hvd.Compression.fp16 if HOROVOD.compression == "fp16" else hvd.Compression.none
    wrapped = hvd.DistributedOptimizer(
        optimizer, named_parameters=unwrap(model).named_parameters(), compression=compression
    )
    # horovod 0.28's zero_grad() takes no arguments; the loop calls zero_grad(set_to_none=True)
    wrapped.zero_grad = types.MethodType(_horovod_zero_grad, wrapped)
    hvd.broadcast_optimizer_state(wrapped, root_rank=0)
    return wrapped


def _horovod_zero_grad(self: Any, set_to_none: bool = True) -> None:
    if self._handles:  # same guard as Horovod's own zero_grad
        raise AssertionError(
            "optimizer.zero_grad() was called after loss.backward() but before optimizer.step() "
            "or optimizer.synchronize()"
        )
    super(type(self), self).zero_grad(set_to_none=set_to_none)


def scaler_step(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> None:
    """`scaler.step(optimizer); scaler.update()` that is also right for Horovod with fp16:
    gradients must be reduced (synchronize) before the scaler unscales and checks them."""
    hvd_optimizer: Any = optimizer  # hvd.DistributedOptimizer adds synchronize/skip_synchronize
    if HOROVOD.hvd is not None and scaler.is_enabled() and hasattr(hvd_optimizer, "synchronize"):
        hvd_optimizer.synchronize()
        scaler.unscale_(optimizer)
        with hvd_optimizer.skip_synchronize():
            scaler.step(optimizer)
    else:
        scaler.step(optimizer)
    scaler.update()


def clipped_scaler_step(max_norm: float, parameters: list[torch.nn.Parameter]) -> Any:
    """`scaler_step` that first clips the gradients' global L2 norm to `max_norm`: on the reduced
    (Horovod: synchronized; DDP: already all-reduced by backward) and unscaled gradients, so every
    rank clips the same vector by the same factor."""

    def step(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> None:
        hvd_optimizer: Any = optimizer
        horovod = HOROVOD.hvd is not None and hasattr(hvd_optimizer, "synchronize")
        if horovod:
            hvd_optimizer.synchronize()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters, max_norm)
        if horovod:
            with hvd_optimizer.skip_synchronize():
                scaler.step(optimizer)
        else:
            scaler.step(optimizer)
        scaler.update()

    return step


def shutdown() -> None:
    """Leave the group (end of a rank); safe to call when none was joined."""
    if HOROVOD.hvd is not None:
        try:
            HOROVOD.hvd.shutdown()
        finally:
            HOROVOD.hvd = None
    elif dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
