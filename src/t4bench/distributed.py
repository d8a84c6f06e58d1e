"""Collective helpers the loop uses; all are no-ops in a single process.

Process-group setup and rank launching live in `t4bench.launch`; this module only talks to an
already-initialised group, so the loop reads the same with 1 or N ranks.
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def _reduce(values: list[float], op: Any, device: torch.device) -> list[float]:
    if not active():
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return tensor.tolist()


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    return _reduce(values, dist.ReduceOp.SUM, device)


def all_reduce_max(values: list[float], device: torch.device) -> list[float]:
    return _reduce(values, dist.ReduceOp.MAX, device)


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank `src`'s object on every rank (eval metrics, the MLflow run id)."""
    if not active():
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def barrier() -> None:
    if active():
        dist.barrier()


def wrap_for_data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DDP around the model when several ranks train; the bare model otherwise."""
    if not active() or world_size() == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def wrap_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
    """Hook for backends that reduce gradients in the optimizer (Horovod); DDP needs nothing."""
    return optimizer
