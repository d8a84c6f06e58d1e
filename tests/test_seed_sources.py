"""The seed-sources split (t4bench.report.seed_variance, t4bench.report.seed_sources): on synthetic
sweeps built from known variance parts the estimates land on them; on a real crossed NCF mini sweep
the command writes its tables and figure, and refuses bad input in one line."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA_ROOT, REPO, run_cli

from t4bench.errors import T4BenchError
from t4bench.report import seed_variance as sv

pytest.importorskip("statsmodels")

TRUE = {sv.WEIGHTS: 0.25, sv.DATA: 0.09, sv.INTERACTION: 0.04, sv.REPEAT: 0.01}


def synthetic_cube(rng: np.random.Generator, shape: tuple[int, int, int], true: dict[str, float]) -> np.ndarray:
    """y = 4 + A[w] + B[d] + AB[w, d] + E[w, d, r], each part normal with its variance in `true`."""
    n_w, n_d, _ = shape
    a = rng.normal(0, np.sqrt(true[sv.WEIGHTS]), (n_w, 1, 1))
    b = rng.normal(0, np.sqrt(true[sv.DATA]), (1, n_d, 1))
    ab = rng.normal(0, np.sqrt(true.get(sv.INTERACTION, 0.0)), (n_w, n_d, 1))
    e = rng.normal(0, np.sqrt(true.get(sv.REPEAT, 0.0)), shape)
    return 4.0 + a + b + ab + e


def test_estimates_average_to_the_parts_the_data_were_built_from() -> None:
    # the ANOVA estimators are unbiased before truncation: over 40 synthetic sweeps (10 x 10 x 3)
    # their mean is the truth within a few standard errors; a wrong multiplier (weights over D
    # instead of D x R), a swapped factor or the residual taken for the pairing would miss by far more
    rng = np.random.default_rng(20260501)
    estimates = pd.DataFrame([sv.components(synthetic_cube(rng, (10, 10, 3), TRUE)) for _ in range(40)])
    for part, truth in TRUE.items():
        mean, se = estimates[part].mean(), estimates[part].std(ddof=1) / np.sqrt(len(estimates))
        assert abs(mean - truth) < max(4 * se, 0.1 * truth), (part, mean, truth, se)
    shares = estimates.div(estimates.sum(axis=1), axis=0).mean()
    assert shares[sv.WEIGHTS] > shares[sv.DATA] > shares[sv.INTERACTION] > shares[sv.REPEAT]


def test_one_run_per_pair_merges_pairing_and_noise() -> None:
    rng = np.random.default_rng(7)
    merged = TRUE[sv.INTERACTION] + TRUE[sv.REPEAT]
    estimates = pd.DataFrame([sv.components(synthetic_cube(rng, (12, 12, 1), TRUE)) for _ in range(30)])
    assert list(estimates.columns) == [sv.WEIGHTS, sv.DATA, sv.RESIDUAL]
    assert abs(estimates[sv.RESIDUAL].mean() - merged) < 0.15 * merged
    assert abs(estimates[sv.WEIGHTS].mean() - TRUE[sv.WEIGHTS]) < 0.2 * TRUE[sv.WEIGHTS]


def test_identical_repeats_give_a_repeat_part_of_zero_not_an_error() -> None:
    # CPU runs of one (seed, data_seed) are bit-exact: the residual is 0 and F is infinite
    cube = synthetic_cube(np.random.default_rng(3), (4, 4, 1), TRUE)
    split = sv.split(np.repeat(cube, 2, axis=2), n_resamples=100)
    assert split.variance[sv.REPEAT] == pytest.approx(0.0, abs=1e-12)
    assert split.variance_ci[sv.REPEAT] == pytest.approx((0.0, 0.0), abs=1e-12)
    assert sum(split.share.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("repeats", [1, 2])
def test_the_formula_api_path_gives_the_same_mean_squares(repeats: int) -> None:
    # statsmodels releases that keep no patsy design_info take the formula API path (the GPU host's
    # unpinned statsmodels did); its ANOVA must be the fast path's, term for term
    from statsmodels.stats.anova import anova_lm

    cube = synthetic_cube(np.random.default_rng(11), (5, 4, repeats), TRUE)
    slow = anova_lm(sv._formula_fit(cube), typ=1)["mean_sq"]
    fast = sv._mean_squares(cube)
    assert set(fast) == {str(term) for term in slow.index}
    for term, value in slow.items():
        assert fast[str(term)] == pytest.approx(float(value), rel=1e-9, abs=1e-12), term


def test_bootstrap_intervals_tell_a_large_part_from_an_absent_one() -> None:
    # the weights seed explains nearly everything, the data seed and the pairing nothing: the
    # weights' intervals stay clear of 0 and hold the estimate, the data's reach down to 0
    true = {sv.WEIGHTS: 0.5, sv.DATA: 0.0, sv.INTERACTION: 0.0, sv.REPEAT: 0.01}
    split = sv.split(synthetic_cube(np.random.default_rng(11), (8, 8, 2), true), n_resamples=120)
    for part in split.parts:
        low, high = split.variance_ci[part]
        assert low <= split.variance[part] <= high or split.variance[part] == 0.0, (part, split)
    assert split.variance_ci[sv.WEIGHTS][0] > 0.02 and split.share_ci[sv.WEIGHTS][0] > 0.6
    assert split.variance_ci[sv.DATA][0] == 0.0 and split.share_ci[sv.DATA][1] < 0.1
    assert split.share[sv.REPEAT] < 0.1


def test_a_sweep_short_of_a_pair_is_refused_by_name() -> None:
    table = pd.DataFrame({"weights": [1, 1, 2], "data": [5, 6, 5], "epochs": [3.0, 3.5, 4.0]})
    with pytest.raises(T4BenchError, match=r"not a complete crossed design.*\(2, 6\)"):
        sv.as_cube(table)


# --------------------------------------------------------------------------------------------
# a real crossed sweep

NCF_READY = (DATA_ROOT / "movielens-100k" / "ml-100k.inter").is_file()
#: low enough that most runs meet it within max_epochs, so that the runs differ
TARGET = "model.target.hr_at_10=0.56"


@pytest.fixture(scope="module")
def crossed_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("seed_sources")
    proc = run_cli(
        "sweep",
        "model=ncf",
        "progress=off",
        "max_epochs=2",
        "eval_every=0.25",
        TARGET,
        "seed=range(0,2)",
        "data_seed=range(100,102)",
        "+tracking.tags.repeat=range(0,2)",
        "tracking.sweep_id=crossed",
        module="t4bench.cli",
        store=store,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return store


@pytest.mark.slow
@pytest.mark.skipif(not NCF_READY, reason="movielens-100k not prepared")
def test_crossed_ncf_sweep_is_split_and_written(crossed_sweep: Path) -> None:
    out = crossed_sweep / "split"
    proc = run_cli(
        "--sweep-id",
        "reference=crossed",
        "--resamples",
        "200",
        "--out",
        str(out),
        module="t4bench.report.seed_sources",
        store=crossed_sweep,
    )
    assert proc.returncode == 0, proc.stderr
    with (out / "seed_sources_runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert len(runs) == 8
    assert {(r["seed"], r["data_seed"], r["repeat"]) for r in runs} == {
        (str(s), str(d), str(r)) for s in (0, 1) for d in (100, 101) for r in (0, 1)
    }
    parts = pd.read_csv(out / "seed_sources.csv")
    assert list(parts["part"]) == [sv.WEIGHTS, sv.DATA, sv.INTERACTION, sv.REPEAT]
    assert (parts["runs"] == 8).all()
    # one thread on a CPU: a pair run twice is the same run, so the repeat part is nil
    assert parts.set_index("part").loc[sv.REPEAT, "variance"] == pytest.approx(0.0, abs=1e-9)
    by_pair = {}
    for r in runs:
        by_pair.setdefault((r["seed"], r["data_seed"]), set()).add(r["epochs"])
    assert all(len(values) == 1 for values in by_pair.values()), by_pair
    assert (parts["not_converged"] == sum(r["converged"] != "True" for r in runs)).all()
    text = (out / "seed_sources.md").read_text()
    assert "2 weights seeds x 2 data seeds x 2 repeats = 8 runs" in text
    assert "data_seed=range(100,102)" in text  # the sweep's overrides, from its parent run
    assert (out / "seed_sources.png").stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.skipif(not NCF_READY, reason="movielens-100k not prepared")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep-id", "nope"], "no training runs with sweep id 'nope'"),
        (["--sweep-id", "crossed", "--experiment", "t4bench-gnmt"], "no experiment 't4bench-gnmt'"),
        (["--sweep-id", "crossed", "--resamples", "10"], "--resamples 10"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(crossed_sweep: Path, args: list[str], message: str) -> None:
    out = crossed_sweep / "refused"
    db = crossed_sweep / "mlflow.db"
    before = sqlite3.connect(db).execute("select count(*) from runs").fetchone()
    proc = run_cli(*args, "--out", str(out), module="t4bench.report.seed_sources", store=crossed_sweep)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("t4bench: error: ")
    assert message in proc.stderr
    assert not out.exists()
    assert sqlite3.connect(db).execute("select count(*) from runs").fetchone() == before


def test_a_missing_store_is_refused_and_not_made(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'none.db'}"
    proc = run_cli("--sweep-id", "x", "--tracking-uri", uri, module="t4bench.report.seed_sources", store=None)
    assert proc.returncode == 2 and "no tracking store" in proc.stderr, proc.stderr
    assert not (tmp_path / "none.db").exists()


def test_the_preset_crosses_every_weights_seed_with_every_data_seed_twice() -> None:
    # the jobs Hydra's basic sweeper makes of sweeps/seed_sources.yaml, with a seed range given on
    # the command line replacing the preset's
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    params = OmegaConf.load(REPO / "sweeps" / "seed_sources.yaml").hydra.sweeper.params
    overrides = [f"{key}={value}" for key, value in params.items()] + ["seed=range(5,7)"]
    (jobs,) = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides), None)
    keys = [tuple(sorted(job)) for job in jobs]
    assert len(keys) == len(set(keys)) == 2 * 4 * 2
    assert {job[0] for job in jobs} == {"seed=5", "seed=6"}
    assert {job[2] for job in jobs} == {"+tracking.tags.repeat=0", "+tracking.tags.repeat=1"}
