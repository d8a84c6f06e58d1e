"""`ema.half_life_epochs`: evaluate an exponential moving average (EMA) of the weights instead of
the weights the optimizer just wrote.

Why: at the mini scale the quality curve flattens near its target, so each evaluation's value is
the trend plus the last few hundred steps' noise, and a run converges at the first evaluation that
the noise lifts over the target. Averaging the weights over a fraction of an epoch damps that noise
(NCF mini: HR@10's jitter from one evaluation to the next fell from ~0.0055 to ~0.0034;
docs/convergence.md, "Round 4: weight averaging"). It changes what is evaluated: no
MLPerf v0.5 reference averages weights, so a run with it on is not a reference run (its param
`ema.half_life_epochs` says so).

The average is torch.optim.swa_utils' AveragedModel with its EMA update (one fused `lerp` over the
parameters and buffers after each optimizer step); its decay per step comes from a half-life in
epochs, so the same setting averages over the same number of samples at any batch size.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from t4bench.errors import T4BenchError


def decay_per_step(half_life_epochs: float, samples_per_epoch: int, global_batch: int) -> float:
    """The EMA decay d with d ** (steps in `half_life_epochs` epochs) == 1/2."""
    steps = half_life_epochs * samples_per_epoch / global_batch
    if steps <= 0:
        raise T4BenchError(f"ema.half_life_epochs={half_life_epochs:g}: must be > 0 to average (0 turns it off)")
    return float(0.5 ** (1.0 / steps))


class WeightAverage:
    """The EMA of `model`'s parameters and buffers (BatchNorm statistics too), updated by `update`."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        # a copy of the model on its device; the first update copies the weights, later ones lerp
        self.averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)

    @classmethod
    def from_config(
        cls, cfg: DictConfig, model: torch.nn.Module, samples_per_epoch: int, global_batch: int
    ) -> WeightAverage | None:
        """None when `ema.half_life_epochs` is 0 (or the config has no `ema` node)."""
        half_life = float((cfg.get("ema") or {}).get("half_life_epochs") or 0.0)
        if half_life == 0:
            return None
        return cls(model, decay_per_step(half_life, samples_per_epoch, global_batch))

    def update(self, model: torch.nn.Module) -> None:
        self.averaged.update_parameters(model)

    @property
    def module(self) -> torch.nn.Module:
        """The averaged model, to evaluate."""
        return self.averaged.module

    def state_dict(self) -> dict[str, Any]:
        return self.averaged.state_dict()

    def load_state_dict(self, state: dict[str, Any], /) -> Any:
        return self.averaged.load_state_dict(state)
