"""The GPU-resident NCF path (`perf.gpu_data`, t4bench.benchmarks.ncf.gpu_data) run on the CPU, so CI walks the
code that `model=ncf hw=h200` takes: the device sampler's batches, the evaluation candidates held
on the device, and the trivial baseline read back from them (the host/device boundary that broke
the default H200 run). A device mix-up that only a real GPU shows stays the GPU smoke's to find
(scripts/gpu/smoke.sh)."""

from __future__ import annotations

import numpy as np
import torch
from conftest import DATA_ROOT, compose_spec, only_run, run_context

from t4bench.benchmarks.ncf.gpu_data import GpuNegativeSampler, GpuResidentNCF
from t4bench.tracking.tags import run_tags


def test_device_sampler_draws_only_unseen_negatives_and_shards_cover_the_epoch() -> None:
    cfg = compose_spec(["model=ncf", "perf.gpu_data=true", f"paths.data_root={DATA_ROOT}"])
    bench = GpuResidentNCF(cfg, run_context(data_root=DATA_ROOT))
    assert isinstance(bench.sampler, GpuNegativeSampler), "perf.gpu_data=true must take the device path on a CPU"
    users, items, labels = bench.sampler.epoch_samples(epoch=1)
    negatives = labels == 0
    assert int(negatives.sum()) == len(bench.sampler.users) * bench.train_negatives
    positive = set(bench.data.positive_keys.tolist())
    keys = (users[negatives] * bench.num_items + items[negatives]).tolist()
    assert not positive.intersection(keys), "a sampled negative is a training positive"
    # two ranks' shards of one epoch: disjoint up to the padding, together every sample
    n = len(labels)
    shards = [
        GpuNegativeSampler(
            bench.data, bench.train_negatives, run_context(rank=r, world_size=2, data_root=DATA_ROOT)
        ).shard(n, 1)
        for r in (0, 1)
    ]
    assert set(torch.cat(shards).tolist()) == set(range(n))
    # the popularity baseline reads the candidates back from the device
    quality = bench.trivial_quality()
    assert 0.0 < quality["hr_at_10"] < 0.66
    assert np.isfinite(quality["hr_at_10"])


def test_default_h200_ncf_settings_train_to_target_on_the_cpu(run_t4bench, mlflow_client) -> None:
    # perf=h200 is what `model=ncf hw=h200` composes; on a CPU its CUDA-only options are dropped
    # (recorded) and the device-resident data path stays
    run_t4bench("model=ncf", "hw=cpu", "perf=h200", "seed=2")
    run = only_run(mlflow_client, "t4bench-ncf")
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.outcome"] == "converged"
    tags = run_tags(mlflow_client, run)  # the perf options are in the run's tag file
    assert tags["t4bench.perf.gpu_data"] == "true"
    assert "cuda_graphs (no CUDA device)" in tags["t4bench.perf.dropped"]
    assert run.data.metrics["trivial_quality"] < run.data.metrics["eval_quality"]
