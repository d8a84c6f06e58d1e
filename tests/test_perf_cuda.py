"""The whole-step CUDA graph and the prefetcher on a GPU (skipped without CUDA): a replayed step
must train exactly as the eager step does, LR changes included."""

from __future__ import annotations

import pytest
import torch
from conftest import run_context

from t4bench.pytorch.perf import PerfOptions
from t4bench.pytorch.perf_step import GraphStep, build_step, prefetched

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def loss_fn(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y), len(x)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_graph_step_trains_as_the_eager_step(optimizer: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    ctx = run_context("cuda:0")
    torch.manual_seed(0)
    models = [
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).cuda() for _ in range(2)
    ]
    models[1].load_state_dict(models[0].state_dict())
    options = PerfOptions(cuda_graphs=True, graph_warmup_steps=2)

    def make(model: torch.nn.Module, perf: PerfOptions) -> torch.optim.Optimizer:
        opt: torch.optim.Optimizer = (
            torch.optim.Adam(model.parameters(), lr=1e-2)
            if optimizer == "adam"
            else torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
        )
        return perf.prepare_optimizer(opt)

    opts = [make(models[0], PerfOptions()), make(models[1], options)]
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    steps = [
        build_step(loss_fn, models[0], opts[0], scaler, ctx, PerfOptions()),
        build_step(loss_fn, models[1], opts[1], scaler, ctx, options),
    ]
    assert isinstance(steps[1], GraphStep)
    batches = [(torch.randn(64, 16, device="cuda"), torch.randn(64, 1, device="cuda")) for _ in range(8)]
    batches.append((torch.randn(10, 16, device="cuda"), torch.randn(10, 1, device="cuda")))  # short: eager
    for index, batch in enumerate(batches):
        lr = 1e-2 if index < 5 else 3e-3  # the loop writes floats into the groups before each step
        for opt in opts:
            for group in opt.param_groups:
                group["lr"] = lr
        losses = [step(batch)[0] for step in steps]
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_prefetch_hands_out_every_batch_on_the_device_in_order() -> None:
    batches = [(torch.full((4,), float(i)).pin_memory(),) for i in range(5)]
    out = [b[0] for b in prefetched(batches, run_context("cuda:0"))]
    assert all(t.is_cuda for t in out)
    assert [float(t[0]) for t in out] == [0.0, 1.0, 2.0, 3.0, 4.0]
