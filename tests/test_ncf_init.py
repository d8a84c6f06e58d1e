"""NCF's embedding init scale (model.arch.init_std): the default is the MLPerf reference's 0.01,
bit for bit, and the knob scales the four embedding tables only."""

from __future__ import annotations

import torch
from conftest import compose

from t4bench.benchmarks.ncf.model import NeuMF


def build(**kwargs: float) -> NeuMF:
    torch.manual_seed(0)
    return NeuMF(500, 800, 32, [64, 32, 16], **kwargs)


def test_default_init_is_the_reference_one() -> None:
    assert compose(["model=ncf"]).model.arch.init_std == 0.01
    default, explicit = build(), build(init_std=0.01)
    for a, b in zip(default.state_dict().values(), explicit.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_init_std_scales_the_embeddings_only() -> None:
    small, large = build(init_std=0.01), build(init_std=0.1)
    for name in ("gmf_user", "gmf_item", "mlp_user", "mlp_item"):
        std = float(getattr(large, name).weight.detach().std())
        assert 0.09 < std < 0.11, (name, std)
        assert torch.allclose(getattr(large, name).weight, 10 * getattr(small, name).weight)
    assert torch.equal(small.head.weight, large.head.weight)
