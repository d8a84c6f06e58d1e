"""Starting ranks (`hw.count=N`) and joining ranks an outer launcher started (torchrun)."""

from __future__ import annotations

import os

import torch.distributed as dist
from omegaconf import DictConfig

from t4bench.errors import T4BenchError


def launched_world_size() -> int:
    """WORLD_SIZE set by torchrun / torch.distributed.run (1 when run directly)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def should_spawn(cfg: DictConfig) -> bool:
    return int(cfg.hw.count) > 1 and launched_world_size() == 1


def spawn(cfg: DictConfig) -> dict:
    raise T4BenchError("hw.count > 1 without an outer launcher is not available yet")


def init_process_group(cfg: DictConfig) -> None:
    """Join the group an outer launcher described in the environment."""
    if launched_world_size() > 1 and not dist.is_initialized():
        backend = "gloo" if cfg.hw.name == "cpu" else "nccl"
        dist.init_process_group(backend=backend)
