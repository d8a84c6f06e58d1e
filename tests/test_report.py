"""`python -m t4bench.report` on a real store made by real NCF mini runs (3 seeds, one epoch, a
target some seeds miss, plus one 2-rank run) — tables, figures, the report run, and bad input."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA_ROOT, REPO

SEEDS = (0, 1, 2)
# HR@10 after one NCF mini epoch is ~0.53-0.56 over seeds: a target in that band makes the store
# hold converged and not-converged runs (the report must count both)
TARGET = 0.55
VALIDATION_SETS = {"reference": [], "best-t1": ["model.optimizer.lr=0.002"]}


def _env(uri: str) -> dict[str, str]:
    return {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO / "src"),
    }


def _run(args: list[str], cwd: Path, uri: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=_env(uri), capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("report_store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    common = ["model=ncf", "max_epochs=1", f"model.target.hr_at_10={TARGET}", "progress=off"]
    _run(
        [
            "-m",
            "t4bench",
            "--multirun",
            *common,
            f"seed={','.join(map(str, SEEDS))}",
            f"hydra.sweep.dir={root / 'sweep'}",
        ],
        root,
        uri,
    )
    _run(["-m", "t4bench", *common, "seed=0", "hw.count=2", f"hydra.run.dir={root / 'run2'}"], root, uri)
    # a held-out validation's two sets, tagged as `t4bench.sweep.holdout` tags them
    for name, extra in VALIDATION_SETS.items():
        _run(
            [
                "-m",
                "t4bench",
                "--multirun",
                *common,
                "seed=100,101",
                f"tracking.sweep_id=demo-validate-{name}",
                *extra,
                f"hydra.sweep.dir={root / name}",
            ],
            root,
            uri,
        )
    return root, uri


def _training_runs(uri: str) -> list:  # type: ignore[type-arg]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t4bench-ncf")
    assert exp is not None
    return [
        r
        for r in client.search_runs([exp.experiment_id])
        if "t4bench.sweep_role" not in r.data.tags and "-validate-" not in r.data.tags.get("t4bench.sweep_id", "")
    ]


def test_report_tables_and_figures_from_real_runs(store: tuple[Path, str]) -> None:
    root, uri = store
    out = root / "report"
    proc = _run(["-m", "t4bench.report", "--out", str(out), "--price", "cpu=0.5"], root, uri)
    md = (out / "report.md").read_text()
    runs = _training_runs(uri)
    one_gpu = [r for r in runs if r.data.tags["t4bench.hw_count"] == "1"]
    assert len(one_gpu) == len(SEEDS)
    converged = sum(r.data.tags["t4bench.outcome"] == "converged" for r in one_gpu)
    # the time-to-train row for cpu×1 counts every run, converged or not
    assert f"| ncf | mini | cpu | 1 | {len(SEEDS)} | {converged}/{len(SEEDS)} |" in md, md
    assert "| ncf | mini | cpu | 2 | 1 |" in md, md
    assert "## Scaling with GPU count" in md and "efficiency" in md
    # validation runs: their own section, not pooled into the time-to-train rows above
    assert "## Tuned vs reference (held-out seeds)" in md and "| demo | reference | 2 |" in md, md
    assert "| demo | best-t1 | 2 |" in md and (out / "validation_demo.png").exists()
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    for png in pngs:
        assert f"]({png.name})" in md
    html = (out / "report.html").read_text()
    assert "<table>" in html and 'src="ttt_ncf_mini.png"' in html
    assert "logged as MLflow run" in proc.stdout

    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t4bench-reports")
    assert exp is not None
    (report_run,) = client.search_runs([exp.experiment_id])
    assert report_run.info.status == "FINISHED"
    logged = {a.path for a in client.list_artifacts(report_run.info.run_id, "report")}
    assert {"report/report.md", "report/report.html", "report/ttt_ncf_mini.png"} <= logged


def test_table_numbers_match_the_store(store: tuple[Path, str]) -> None:
    from mlflow.tracking import MlflowClient

    from t4bench.report import figures, tables
    from t4bench.report.query import RunFilter, select

    _, uri = store
    runs = select(MlflowClient(uri), RunFilter(models=["ncf"])).runs
    table = tables.time_to_train(runs.drop(index=figures.validation_sets(runs).index), {"cpu": 0.5})
    row = table[table["hw_count"] == 1].iloc[0]
    # independent of the report code: straight from the runs' metrics and tags
    times = sorted(
        r.data.metrics["time_to_train_s"] if r.data.tags["t4bench.outcome"] == "converged" else math.inf
        for r in _training_runs(uri)
        if r.data.tags["t4bench.hw_count"] == "1"
    )
    olympic = times[1] if not math.isinf(times[1]) else math.nan  # 3 runs: the middle one
    assert row["runs"] == 3 and row["converged"] == sum(not math.isinf(t) for t in times)
    assert (math.isnan(olympic) and math.isnan(row["ttt_olympic_s"])) or row["ttt_olympic_s"] == pytest.approx(olympic)
    if not math.isnan(olympic):
        assert row["cost"] == pytest.approx(olympic / 3600 * 0.5)
    assert math.isnan(row["energy_kj"])  # CPU runs measure no GPU energy: missing, not 0


def test_no_matching_runs_is_one_line_and_exit_2(store: tuple[Path, str]) -> None:
    root, uri = store
    proc = _run(["-m", "t4bench.report", "--out", str(root / "none"), "--model", "nosuchmodel"], root, uri, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "t4bench: error: no runs match all experiments, model in ['nosuchmodel']"
    ]
    assert not (root / "none" / "report.md").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--price", "cpu=cheap"], "t4bench: error: --price 'cpu=cheap': expected HW=USD_PER_GPU_HOUR"),
        (["--since", "yesterday"], "t4bench: error: date 'yesterday'"),
        (["--experiment", "t4bench-nope"], "t4bench: error: --experiment 't4bench-nope' does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(store: tuple[Path, str], args: list[str], message: str) -> None:
    root, uri = store
    proc = _run(["-m", "t4bench.report", "--no-log", "--out", str(root / "bad"), *args], root, uri, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr


def test_missing_store_is_not_created(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    proc = _run(["-m", "t4bench.report", "--out", str(tmp_path / "r")], tmp_path, uri, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("t4bench: error: no tracking store at")
    assert not (tmp_path / "absent.db").exists()


def test_optuna_study_figures(store: tuple[Path, str], tmp_path: Path) -> None:
    """A real Optuna study in a journal file (a quadratic objective stands in for a sweep)."""
    import optuna

    from t4bench.sweep.storage import open_storage

    journal = tmp_path / "study.journal"
    study = optuna.create_study(
        study_name="quad", storage=open_storage(str(journal)), sampler=optuna.samplers.RandomSampler(seed=0)
    )
    study.optimize(lambda t: (t.suggest_float("x", -2, 2) - 1) ** 2 + t.suggest_float("y", 0, 1), n_trials=8)
    root, uri = store
    out = tmp_path / "report"
    _run(["-m", "t4bench.report", "--no-log", "--out", str(out), "--optuna-storage", str(journal)], root, uri)
    md = (out / "report.md").read_text()
    assert "## Optuna study quad" in md and "best_trial" in md
    assert (out / "optuna_history_quad.png").exists() and (out / "optuna_importances_quad.png").exists()


def test_export_lays_out_result_files(store: tuple[Path, str]) -> None:
    """NCF has no ruleset: its logs go to the `unchecked` package, numbered by start time."""
    root, uri = store
    out = root / "export"
    proc = _run(["-m", "t4bench.report", "export", "--out", str(out), "--model", "ncf"], root, uri)
    one_gpu = sorted((out / "unchecked" / "results" / "cpux1_mini" / "ncf").glob("result_*.txt"))
    # every 1-GPU run the filter matched: the seeds and both validation sets
    expected = len(SEEDS) + 2 * len(VALIDATION_SETS)
    assert sorted(p.name for p in one_gpu) == sorted(f"result_{i}.txt" for i in range(expected))
    assert (out / "unchecked" / "results" / "cpux2_mini" / "ncf" / "result_0.txt").exists()
    for log in one_gpu:
        assert ':::MLLOG {"namespace": "", ' in log.read_text() and '"key": "run_stop"' in log.read_text()
    import json

    desc = json.loads((out / "unchecked" / "systems" / "cpux1_mini.json").read_text())
    assert desc["division"] == "open" and desc["system_name"] == "cpux1_mini" and desc["number_of_nodes"] == 1
    assert proc.stdout.count("<- run ") == expected + 1
