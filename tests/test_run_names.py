"""Run names (t4bench.tracking.run_names) that show whole in MLflow's Run Name column at each run's nesting
depth, tell what the run is, and stay apart; the browser check of the same is in test_mlflow_ui."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from omegaconf import OmegaConf

from t4bench.tracking import run_names
from t4bench.tracking.optuna_runs import parent_run_name, seed_run_name, trial_run_name
from t4bench.tracking.run import default_run_name
from tests.conftest import compose

PARENT = "mlflow.parentRunId"


def depths(runs: Iterable[Any]) -> dict[str, int]:
    """Each run's nesting depth in the runs table (0: top level), from its parent chain."""
    by_id = {r.info.run_id: r for r in runs}

    def depth(run: Any) -> int:
        parent = by_id.get(run.data.tags.get(PARENT, ""))
        return 0 if parent is None else 1 + depth(parent)

    return {run_id: depth(run) for run_id, run in by_id.items()}


def names_that_do_not_fit(runs: Iterable[Any]) -> list[tuple[str, int]]:
    """(name, depth) of the runs whose name is longer than its depth shows."""
    runs = list(runs)
    at = depths(runs)
    return [
        (r.info.run_name, at[r.info.run_id]) for r in runs if not run_names.fits(r.info.run_name, at[r.info.run_id])
    ]


def test_the_limits_are_the_measured_ones() -> None:
    # 122, 98 and 74 px for the name (docs/mlflow_ui.md), a digit 6.7 px wide
    assert run_names.RUN_NAME_MAX == (17, 14, 10)
    assert [run_names.max_length(d) for d in (0, 1, 2, 3)] == [17, 14, 10, 10]


def test_a_long_name_keeps_its_head_and_a_hash_of_the_whole() -> None:
    assert run_names.fit("x" * 17) == "x" * 17
    fitted = {run_names.fit(f"a-long-sweep-folder-{n}") for n in (1, 2)}
    assert len(fitted) == 2 and all(len(n) == 17 and n.startswith("a-long-sweep~") for n in fitted)
    assert run_names.fit("abcdefghij-klmnop", depth=1) == "abcdefghi~" + run_names.fit("abcdefghij-klmnop", 1)[-4:]
    assert len(run_names.fit("y" * 30, depth=2)) == 10


def test_training_runs_on_their_own_name_model_scale_hw_and_seed() -> None:
    env = OmegaConf.create({"hw": {"name": "cpu"}, "world_size": 1})
    assert default_run_name(compose(["model=ncf", "seed=3"]), env) == "ncf-mini-cpux1-s3"
    # the model is the experiment's (t4bench-<model>): left out when the whole name is too long
    h200 = OmegaConf.create({"hw": {"name": "h200"}, "world_size": 8})
    assert default_run_name(compose(["model=transformer", "seed=1000"]), h200) == "mini-h200x8-s1000"


def test_a_sweep_job_is_named_by_its_swept_values() -> None:
    groups = ["model", "hw", "hparams"]
    assert run_names.swept(["model=ncf", "seed=2"], ["seed"], groups) == "seed=2"
    assert run_names.swept(["hparams=tuned", "seed=2"], ["hparams", "seed"], groups) == "tuned seed=2"
    assert run_names.swept(["model.optimizer.lr=0.001", "seed=2"], ["model.optimizer.lr", "seed"], groups) == (
        "lr=0.001 s2"
    )
    assert run_names.swept(["model=ncf"], ["seed"], groups) is None
    # Hydra's own parse of the sweep's overrides
    assert run_names.swept_keys(["model=ncf", "seed=1,2", "+x=a,b", "lr=range(1,3)", "hw=cpu"]) == ["seed", "x", "lr"]


def test_a_nested_run_without_a_known_sweep_is_named_by_its_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(run_names.ENV_SWEPT_KEYS, raising=False)
    env = OmegaConf.create({"hw": {"name": "cpu"}, "world_size": 1})
    assert default_run_name(compose(["seed=5", "tracking.parent_run_id=abc"]), env) == "seed=5"


def test_sweep_parents_and_their_runs() -> None:
    assert run_names.seed_sweep("2026-12-04_14-32-59") == "seeds-1204-143259"
    assert run_names.seed_sweep("sweep") == "seeds-sweep"
    assert parent_run_name("ncf_tuned", "3f9a1c2b") == "ncf_tuned-3f9a"
    assert parent_run_name("gnmt_ding_tuned", "3f9a1c2b") == "gnmt_ding_tuned"  # the study alone fits
    apart = {parent_run_name("a_very_long_study_name", uid) for uid in ("3f9a1c2b", "77aa1c2b")}
    assert len(apart) == 2 and all(n.startswith("a_very_long~") for n in apart)  # no "_" before the hash
    assert (trial_run_name(7), seed_run_name(7, 101), seed_run_name(7, 12345678)) == (
        "trial-007",
        "seed=101",
        "s12345678",
    )
    assert run_names.validation("ncf_tuned", "3f9a1c2b") == "val-ncf_tuned"
    assert run_names.report("ncf_mini") == "report-ncf_mini"


@pytest.mark.parametrize("seed", [0, 7, 1000, 123456789])
def test_every_name_fits_its_depth(seed: int) -> None:
    made = [
        (run_names.training("transformer", "reference", "v100-sxm2", 8, seed), 0),
        (run_names.seed_sweep("2026-12-04_14-32-59"), 0),
        (parent_run_name("transformer_ding_tuned", "3f9a1c2b"), 0),
        (run_names.validation("transformer_ding_tuned", "3f9a1c2b"), 0),
        (run_names.report("a_report_folder_of_a_long_name"), 0),
        (trial_run_name(1234), 1),
        (run_names.fit("tuned-t1234", 1), 1),
        (run_names.swept(["hparams=reference", f"seed={seed}"], ["hparams", "seed"], ["hparams"]) or "", 1),
        (seed_run_name(1234, seed), 2),
    ]
    assert [(n, d) for n, d in made if not run_names.fits(n, d)] == []
