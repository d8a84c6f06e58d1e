"""Which device this rank trains on, and whether the machine matches the requested `hw` profile."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from t4bench.errors import T4BenchError


def check(cfg: DictConfig) -> None:
    """Fail before any training when the requested hardware is not here."""
    if cfg.hw.name == "cpu":
        return
    found = torch.cuda.device_count()
    if found == 0:
        raise T4BenchError(
            f"hw={cfg.hw.name} asks for {cfg.hw.count} GPU(s) but this machine has no CUDA GPU "
            "(use hw=cpu or hw=auto)"
        )


def device_for(cfg: DictConfig, local_rank: int) -> torch.device:
    if cfg.hw.name == "cpu":
        return torch.device("cpu")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)
