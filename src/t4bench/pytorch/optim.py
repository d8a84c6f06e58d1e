"""Optimizers from the `model.optimizer` config node."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch


def build(params: Iterable[Any], optimizer: Mapping[str, Any], lr: float) -> torch.optim.Optimizer:
    """The optimizer of the `model.optimizer` map (name, weight_decay, betas, eps / momentum, nesterov)."""
    cfg = optimizer
    name = str(cfg["name"]).lower()
    weight_decay = float(cfg.get("weight_decay", 0.0))
    if name in ("adam", "adamw"):
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        return cls(
            params,
            lr=lr,
            betas=tuple(cfg.get("betas", (0.9, 0.999))),
            eps=float(cfg.get("eps", 1e-8)),
            weight_decay=weight_decay,
        )
    if name == "sgd":
        return torch.optim.SGD(
            params,
            lr=lr,
            momentum=float(cfg.get("momentum", 0.0)),
            nesterov=bool(cfg.get("nesterov", False)),
            weight_decay=weight_decay,
        )
    raise ValueError(f"optimizer.name must be adam, adamw or sgd, got {name!r}")
