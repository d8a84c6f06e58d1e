"""`data_seed`: the data order and sampling follow it, the model's initial weights follow `seed`, so a
sweep over one with the other fixed splits the seed-to-seed spread (docs/convergence.md). Real
MovieLens-100k, both NCF samplers (host, and the GPU-resident one on host tensors)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from conftest import DATA_ROOT, compose, compose_spec

from t4bench import seeding
from t4bench.benchmarks.ncf.gpu_data import GpuNegativeSampler
from t4bench.benchmarks.ncf.model import NCFBenchmark
from t4bench.errors import T4BenchError
from t4bench.preflight import config as validation
from t4bench.pytorch.context import RunContext

pytestmark = pytest.mark.skipif(
    not (DATA_ROOT / "movielens-100k" / "ml-100k.inter").is_file(), reason="movielens-100k not prepared"
)

BASE = RunContext(
    device=torch.device("cpu"), precision="fp32", rank=0, world_size=1, local_rank=0, seed=0, data_root=DATA_ROOT
)


def _bench(ctx: RunContext) -> NCFBenchmark:
    return NCFBenchmark(compose_spec([f"paths.data_root={DATA_ROOT}"]), ctx)


def _host_epoch(bench: NCFBenchmark) -> list[torch.Tensor]:
    return [torch.cat(part) for part in zip(*bench.train_batches(1), strict=True)]


def _gpu_path_epoch(bench: NCFBenchmark) -> list[torch.Tensor]:
    assert bench.data is not None
    return list(GpuNegativeSampler(bench.data, bench.train_negatives, bench.ctx).batches(1, 4096)[0])


@pytest.mark.parametrize("epoch_of", [_host_epoch, _gpu_path_epoch], ids=["host", "gpu-path-on-cpu"])
def test_data_follows_data_seed_not_seed(epoch_of) -> None:  # type: ignore[no-untyped-def]
    fixed_data = [epoch_of(_bench(replace(BASE, seed=s, data_seed=7))) for s in (0, 5)]
    plain_seed_7 = epoch_of(_bench(replace(BASE, seed=7)))  # data_seed null: `seed` drives the data
    plain_seed_0 = epoch_of(_bench(BASE))
    for got in (fixed_data[1], plain_seed_7):
        assert all(torch.equal(a, b) for a, b in zip(fixed_data[0], got, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(fixed_data[0], plain_seed_0, strict=True))


def test_initial_weights_follow_seed_not_data_seed() -> None:
    def weights(ctx: RunContext) -> torch.Tensor:
        seeding.seed_torch(ctx.seed)  # what the rank session does before building the model
        return torch.cat([p.detach().flatten() for p in _bench(ctx).build_model().parameters()])

    assert torch.equal(weights(replace(BASE, data_seed=7)), weights(replace(BASE, data_seed=8)))
    assert not torch.equal(weights(replace(BASE, data_seed=7)), weights(replace(BASE, seed=1, data_seed=7)))


def test_bad_data_seed_is_one_line() -> None:
    with pytest.raises(T4BenchError, match=r"^data_seed=-1: "):
        validation.validate(compose(["data_seed=-1"]))
    validation.validate(compose(["data_seed=3"]))
