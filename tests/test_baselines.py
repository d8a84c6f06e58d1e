"""Trivial baselines (issue 17.7): what a predictor scores without learning from its inputs, and
the warnings when a target is no better or an epoch is a handful of steps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import DATA_ROOT, run_cli

from t4bench import baselines
from t4bench.benchmarks.ncf import movielens


def test_popularity_ranking_by_hand() -> None:
    # item popularity in training: item 0 x3, item 1 x2, item 2 x1, item 3 x0
    train_items = np.array([0, 0, 0, 1, 1, 2])
    candidates = np.array([[0, 1, 2, 3], [3, 0, 1, 2], [2, 3, 3, 3]])  # positive first
    scored = baselines.popularity_hit_rate(train_items, 4, candidates, k=1)
    # user 0: positive most popular (rank 0, hit); user 1: 3 negatives above (miss); user 2: rank 0 (hit)
    assert scored["hr_at_1"] == pytest.approx(2 / 3)
    assert scored["ndcg_at_1"] == pytest.approx(2 / 3)
    assert baselines.popularity_hit_rate(train_items, 4, candidates, k=4)["hr_at_4"] == 1.0


@pytest.mark.skipif(not (DATA_ROOT / "movielens-100k" / movielens.ML100K_FILE).is_file(), reason="ml-100k not prepared")
def test_ncf_mini_target_beats_popularity() -> None:
    """The shipped NCF mini target (0.66) is well above the popularity ranker on ml-100k."""
    from t4bench.benchmarks.ncf.model import EVAL_NEGATIVES_SEED

    data = movielens.load("movielens-100k", DATA_ROOT / "movielens-100k")
    negatives = data.sample_negatives(np.arange(data.num_users), 100, np.random.default_rng(EVAL_NEGATIVES_SEED))
    trivial = baselines.popularity_hit_rate(
        data.train_items, data.num_items, np.column_stack([data.test_items, negatives])
    )
    assert 0.3 < trivial["hr_at_10"] < 0.5
    assert baselines.target_warning({"hr_at_10": 0.66}, trivial, "popularity") is None
    line = baselines.target_warning({"hr_at_10": 0.40}, trivial, "popularity ranking")
    assert line is not None and "\n" not in line and "hr_at_10 0.4 <= " in line


def test_majority_class() -> None:
    assert baselines.majority_class_accuracy(np.array([0, 1, 1, 2]), np.array([1, 1, 0, 2, 2])) == {"top1": 0.4}


def test_target_warning_needs_every_metric_trivial() -> None:
    trivial = {"box_map": 0.0003, "mask_map": 0.0002}
    assert baselines.target_warning({"box_map": 0.0001, "mask_map": 0.01}, trivial, "prior") is None
    assert baselines.target_warning({"box_map": 0.0001, "mask_map": 0.0001}, trivial, "prior") is not None
    assert baselines.trivial_metrics({"box_map": 0.01, "mask_map": 0.01}, trivial) == {
        "trivial_box_map": 0.0003,
        "trivial_mask_map": 0.0002,
        "trivial_quality": 0.0003,
    }


def test_few_steps_warning() -> None:
    # MLPerf's NCF reference batch on ml-100k: one step per epoch
    line = baselines.few_steps_warning(495_285, 1_048_576)
    assert line is not None and "only 1 optimizer step(s)" in line
    assert baselines.few_steps_warning(495_285, 256) is None


@pytest.mark.skipif(not (DATA_ROOT / "movielens-100k" / movielens.ML100K_FILE).is_file(), reason="ml-100k not prepared")
def test_run_logs_trivial_quality_and_warns(tmp_path: Path) -> None:
    """A real NCF run with a target under the popularity ranker and four steps per epoch."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(
        "progress=plain",
        "hw.telemetry.enabled=false",
        "max_epochs=1",
        "model.target.hr_at_10=0.3",
        "model.batch_size=131072",
        f"hydra.run.dir={tmp_path / 'out'}",
        store=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    assert "warning: an epoch is only 4 optimizer step(s) (495285 samples / global batch 131072)" in output
    assert (
        "warning: the target is no better than a trivial baseline (popularity ranking: hr_at_10 0.3 <= 0.4083)"
        in output
    )
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.metrics["trivial_quality"] == pytest.approx(0.4083, abs=1e-4)
    assert run.data.metrics["trivial_hr_at_10"] == run.data.metrics["trivial_quality"]
