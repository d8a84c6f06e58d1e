"""model.optimizer.clip_grad_norm: the step that clips the gradients' global norm before the
optimizer moves (t4bench.pytorch.distributed.clipped_scaler_step), on a real model and optimizer."""

from __future__ import annotations

import torch

from t4bench.pytorch import distributed


def _update_norm(max_norm: float | None) -> float:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    (model(torch.randn(16, 8)) * 100.0).pow(2).mean().backward()
    if max_norm is None:
        distributed.scaler_step(scaler, optimizer)
    else:
        distributed.clipped_scaler_step(max_norm, list(model.parameters()))(scaler, optimizer)
    # plain SGD with lr 1: the update is the (clipped) gradient itself
    delta = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before, strict=True)])
    return float(delta.norm())


def test_clipping_bounds_the_update_and_leaves_small_gradients_alone() -> None:
    unclipped = _update_norm(None)
    assert unclipped > 10.0
    assert abs(_update_norm(1.0) - 1.0) < 1e-4
    assert abs(_update_norm(unclipped * 2) - unclipped) < 1e-3 * unclipped
