"""`ema.half_life_epochs`: evaluate an exponential moving average (EMA) of the weights instead of
the weights the optimizer just wrote.

Why: at the mini scale the quality curve flattens near its target, so each evaluation's value is
the trend plus the last few hundred steps' noise, and a run converges at the first evaluation that
the noise lifts over the target. Averaging the weights over a fraction of an epoch damps that noise
(NCF mini: HR@10's jitter from one evaluation to the next fell from ~0.0055 to ~0.0034;
docs/convergence.md, "Round 4: weight averaging"). It changes what is evaluated: no MLPerf v0.5
reference averages weights, so a run with it on is not a reference run (its param
`ema.half_life_epochs` says so).

The update is torch's own (`torch.optim.swa_utils.get_ema_multi_avg_fn`: one foreach `lerp` over
the floating-point parameters and buffers after each optimizer step); integer buffers (BatchNorm's
batch counter) are copied, not averaged. Not `AveragedModel` itself: it keeps its update counter on
the host and copies it to the device at every update, a host-device sync per training step that
a CUDA-graphed step cannot afford. The decay per step comes from a half-life in epochs of samples
(whatever `model.schedule.unit`), so one setting averages over the same data at any batch size.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.optim.swa_utils import get_ema_multi_avg_fn

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec


def decay_per_step(half_life_epochs: float, samples_per_epoch: int, global_batch: int) -> float:
    """The EMA decay d with d ** (steps in `half_life_epochs` epochs) == 1/2."""
    steps = half_life_epochs * samples_per_epoch / global_batch
    if half_life_epochs <= 0 or steps <= 0:
        raise T4BenchError(
            f"ema.half_life_epochs={half_life_epochs:g}: must be > 0 to average (0 turns it off), "
            f"over an epoch of at least one sample (this one has {samples_per_epoch})"
        )
    decay = float(0.5 ** (1.0 / steps))
    if decay >= 1.0:  # so long that the average would never move from the first weights
        raise T4BenchError(f"ema.half_life_epochs={half_life_epochs:g}: too long to average anything")
    return decay


def _averaged_tensors(module: torch.nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(floating-point parameters and buffers, the other buffers), in a fixed order."""
    tensors = [*module.parameters(), *module.buffers()]
    return [t for t in tensors if t.is_floating_point()], [t for t in tensors if not t.is_floating_point()]


class WeightAverage:
    """The EMA of a model's parameters and buffers, on the model's device, updated by `update`."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0  # on the host: checking it never waits for the device
        self.module = copy.deepcopy(model).requires_grad_(False)
        # a deep copy clones each RNN weight on its own; cuDNN wants them in one block again
        for layer in self.module.modules():
            if isinstance(layer, torch.nn.RNNBase):
                layer.flatten_parameters()
        self._update = get_ema_multi_avg_fn(decay)
        self._floats, self._others = _averaged_tensors(self.module)
        self._sources: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None

    @classmethod
    def from_config(
        cls, cfg: RunSpec, model: torch.nn.Module, samples_per_epoch: int, global_batch: int
    ) -> WeightAverage | None:
        """None when `ema.half_life_epochs` is 0 (or absent), and for `input.synthetic` runs, which
        never evaluate (their throughput would pay for an average nobody reads)."""
        half_life = float((cfg.get("ema") or {}).get("half_life_epochs") or 0.0)
        if half_life == 0 or bool((cfg.get("input") or {}).get("synthetic", False)):
            return None
        return cls(model, decay_per_step(half_life, samples_per_epoch, global_batch))

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        if self._sources is None:  # the trained model keeps its tensors: list them once
            self._sources = _averaged_tensors(model)
        floats, others = self._sources
        if self.updates == 0:  # the first update starts the average at the current weights
            for mine, theirs in zip(self._floats, floats, strict=True):
                mine.copy_(theirs)
        elif self._floats:
            self._update(self._floats, floats, None)
        for mine, theirs in zip(self._others, others, strict=True):
            mine.copy_(theirs)
        self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {"module": self.module.state_dict(), "updates": self.updates, "decay": self.decay}

    def load_state_dict(self, state: dict[str, Any], /) -> None:
        if abs(float(state["decay"]) - self.decay) > 1e-12:
            raise T4BenchError(
                f"the checkpoint's weight average decays by {float(state['decay']):.8f} a step, this run's by "
                f"{self.decay:.8f} (ema.half_life_epochs or the batch changed): resume with the run's settings"
            )
        self.module.load_state_dict(state["module"])
        self.updates = int(state["updates"])
