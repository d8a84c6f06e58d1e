"""`python -m t4bench.report` on a real store made by real NCF mini runs (3 seeds, one epoch, a
target some seeds miss, plus one 2-rank run) — tables, figures, the report run, and bad input."""

from __future__ import annotations

import math
import os
import re
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
# two evaluations an epoch: epochs to converge of 0.5 or 1, so the arms of the preset comparison vary
COMMON = ["model=ncf", "max_epochs=1", "eval_every=0.5", f"model.target.hr_at_10={TARGET}", "progress=off"]


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
    common = COMMON
    # a 3-seed sweep of the reference settings and one of the tuned preset (the preset comparison)
    for preset in ("reference", "tuned"):
        _run(
            [
                "-m",
                "t4bench",
                "--multirun",
                *common,
                f"hparams={preset}",
                f"seed={','.join(map(str, SEEDS))}",
                f"hydra.sweep.dir={root / preset}",
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


def _training_runs(uri: str, preset: str | None = "reference") -> list:  # type: ignore[type-arg]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t4bench-ncf")
    assert exp is not None
    return [
        r
        for r in client.search_runs([exp.experiment_id])
        if "t4bench.sweep_role" not in r.data.tags
        and "-validate-" not in r.data.tags.get("t4bench.sweep_id", "")
        and preset in (None, r.data.params["hparams.name"])
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
    # the time-to-train row for cpu×1 of each preset counts every run, converged or not; rows are
    # configurations (a hash of the settings), not names
    config = r"\| ncf \| mini \| cpu \| 1 \| [0-9a-f]{8} \| "
    assert re.search(config + rf"hparams=reference[^|]* \| {len(SEEDS)} \| {converged}/{len(SEEDS)} \|", md), md
    assert re.search(rf"\| ncf \| mini \| cpu \| 1 \| [0-9a-f]{{8}} \| hparams=tuned[^|]* \| {len(SEEDS)} \|", md), md
    assert re.search(r"\| ncf \| mini \| cpu \| 2 \| [0-9a-f]{8} \| hparams=reference[^|]* \| 1 \|", md), md
    assert "## Speed-up against t4\n\nSpeed-up needs two hardware profiles; these runs have one (cpu)." in md
    assert "## Presets compared" in md and "mean ratio [95 % CI]" in md
    # a section with nothing to show is there, with the one line that says why
    assert "## Throughput (synthetic data)\n\nNo `input=synthetic` run matches" in md
    assert "## Optuna study\n\nNo `--optuna-storage` given" in md
    assert str(root) not in md and str(root) not in (out / "report.html").read_text() and str(root) not in proc.stdout
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
    # independent of the report code: straight from the runs' metrics and tags
    row = table[(table["hw_count"] == 1) & (table["hparams"] == "reference")].iloc[0]
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
    # every 1-GPU run the filter matched: the seeds of both presets and both validation sets
    expected = 2 * len(SEEDS) + 2 * len(VALIDATION_SETS)
    assert sorted(p.name for p in one_gpu) == sorted(f"result_{i}.txt" for i in range(expected))
    assert (out / "unchecked" / "results" / "cpux2_mini" / "ncf" / "result_0.txt").exists()
    for log in one_gpu:
        assert ':::MLLOG {"namespace": "", ' in log.read_text() and '"key": "run_stop"' in log.read_text()
    import json

    desc = json.loads((out / "unchecked" / "systems" / "cpux1_mini.json").read_text())
    assert desc["division"] == "open" and desc["system_name"] == "cpux1_mini" and desc["number_of_nodes"] == 1
    # the software versions, read from the runs' run_tags.json (they are not tags on the run)
    assert desc["framework"].startswith("PyTorch 2.") and "mlflow 3." in desc["sw_notes"], desc
    assert proc.stdout.count("<- run ") == expected + 1


def _selected(uri: str):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    from t4bench.report import figures
    from t4bench.report.query import RunFilter, select

    runs = select(MlflowClient(uri), RunFilter(models=["ncf"])).runs
    return runs.drop(index=figures.validation_sets(runs).index)


def _marks(fig, gid: str) -> list[float]:  # type: ignore[no-untyped-def]
    """y values of every scatter mark with this gid, read back from the Figure."""
    ax = fig.axes[0]
    return [float(y) for c in ax.collections if c.get_gid() == gid for _, y in c.get_offsets()]


def _missed(fig) -> dict[float, int]:  # type: ignore[no-untyped-def]
    """x of a configuration -> its runs that did not converge, read from the counts' row."""
    found = {}
    for text in fig.axes[0].texts:
        if text.get_gid() == "missed":
            k, n = map(int, re.match(r"(\d+) of (\d+)\nnot converged$", text.get_text()).groups())  # type: ignore[union-attr]
            assert 0 < k <= n
            found[text.get_position()[0]] = k
    return found


def test_figures_plot_every_run_and_name_each_mark(store: tuple[Path, str]) -> None:
    from matplotlib.collections import PolyCollection

    from t4bench.report import figures

    _, uri = store
    runs = _selected(uri)
    reasons: list[str] = []
    drawn = dict(
        figures.time_to_train(runs, reasons) + figures.epochs(runs, reasons) + figures.time_to_train_cdfs(runs, reasons)
    )
    assert set(drawn) == {"ttt_ncf_mini.png", "epochs_ncf_mini.png", "cdf_ncf_mini.png"}, reasons
    for name, fig in drawn.items():
        ax = fig.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel(), name
        assert "k/n" not in ax.get_title() and ax.get_title(), name
        assert ax.get_legend() is not None and [t.get_text() for t in ax.get_legend().get_texts()], name
        assert any(len(c.get_offsets()) for c in ax.collections) or any(len(line.get_xdata()) for line in ax.lines)
    # independent of the report: every run of the store, straight from its metrics and tags
    store_runs = _training_runs(uri, preset=None)
    done = [r for r in store_runs if r.data.tags["t4bench.outcome"] == "converged"]
    missed = len(store_runs) - len(done)
    ttt = drawn["ttt_ncf_mini.png"]
    assert sorted(_marks(ttt, "run")) == pytest.approx(sorted(r.data.metrics["time_to_train_s"] for r in done))
    # a run that did not converge is no point at any height, only a count above its configuration
    for fig in (ttt, drawn["epochs_ncf_mini.png"]):
        assert not _marks(fig, figures.MISSED)
        assert sum(_missed(fig).values()) == missed
    legend = [t.get_text() for t in ttt.axes[0].get_legend().get_texts()]
    assert figures.DOT in legend
    assert (figures.OLYMPIC in legend) == bool(_marks(ttt, "olympic"))
    # configurations are named by what differs between them (the preset), the hash only after it
    ticks = [t.get_text() for t in ttt.axes[0].get_xticklabels()]
    labels = [" ".join(t.split("\n")[1:-1]) for t in ticks]  # between "cpu×1" and "#<id> (n runs)"
    assert sorted(label.split()[0] for label in labels) == ["hparams=reference", "hparams=reference", "hparams=tuned"]
    tuned = next(label for label in labels if label.startswith("hparams=tuned"))
    assert "=" in tuned.removeprefix("hparams=tuned"), tuned  # a setting the tuned preset changes, by name
    assert all(re.search(r"#[0-9a-f]{8} \(\d+ runs\)$", t) for t in ticks), ticks
    # the olympic mean of the reference 1-GPU seeds (3 runs: the middle one, a miss counting as slowest)
    ref = sorted(
        r.data.metrics["time_to_train_s"] if r in done else math.inf
        for r in _training_runs(uri)
        if r.data.tags["t4bench.hw_count"] == "1"
    )
    if math.isfinite(ref[1]):
        assert any(v == pytest.approx(ref[1]) for v in _marks(ttt, "olympic"))
    # epochs to converge: a dot per converged run, at whole evaluations (0.5 epochs), never a band
    ep = drawn["epochs_ncf_mini.png"]
    assert sorted(_marks(ep, "run")) == pytest.approx(sorted(r.data.metrics["epochs_to_converge"] for r in done))
    assert all((2 * v).is_integer() for v in _marks(ep, "run"))
    assert not any(isinstance(c, PolyCollection) for c in ep.axes[0].collections)
    # each CDF ends at its configuration's converged fraction, named in the legend
    cdf = drawn["cdf_ncf_mini.png"].axes[0]
    for line, text in zip(cdf.lines, cdf.get_legend().get_texts(), strict=True):
        k, n = map(int, re.search(r"(\d+) of (\d+) converged", text.get_text()).groups())  # type: ignore[union-attr]
        assert line.get_ydata()[-1] == pytest.approx(k / n)


def test_presets_compared_with_bootstrap_cis(store: tuple[Path, str]) -> None:
    """3 seeds of hparams=tuned against 3 of the reference: ratios of mean and std, with CIs."""
    from t4bench.report import presets

    _, uri = store
    table, why = presets.compare(_selected(uri))
    assert len(table) == 1, why
    row = table.iloc[0]
    assert row["preset"] == "tuned" and row["hw_count"] == 1

    def censored(preset: str) -> list[float]:
        return [
            r.data.metrics["epochs_to_converge"]
            if r.data.tags["t4bench.outcome"] == "converged"
            else r.data.metrics["epochs_run"]
            for r in _training_runs(uri, preset)
            if r.data.tags["t4bench.hw_count"] == "1"
        ]

    tuned, ref = censored("tuned"), censored("reference")
    assert row["mean_ratio_value"] == pytest.approx((sum(tuned) / len(tuned)) / (sum(ref) / len(ref)))
    low, high = row["mean_ratio_ci_low"], row["mean_ratio_ci_high"]
    assert low <= row["mean_ratio_value"] <= high
    converged = sum(r.data.tags["t4bench.outcome"] == "converged" for r in _training_runs(uri, "tuned"))
    assert row["converged"] == f"{converged}/{len(SEEDS)}"


def test_runs_are_grouped_by_configuration_not_by_name(store: tuple[Path, str]) -> None:
    """The seeds of one setting share a config id (whatever their GPU count, seed or run name);
    another preset, or a trial's own learning rate, is another configuration."""
    from t4bench.report.configs import config_id

    _, uri = store
    ids = {
        (r.data.params["hparams.name"], r.data.tags["t4bench.hw_count"], r.data.tags["t4bench.seed"]): config_id(
            r.data.params
        )
        for r in _training_runs(uri, preset=None)
    }
    reference = {v for (preset, _, _), v in ids.items() if preset == "reference"}
    tuned = {v for (preset, _, _), v in ids.items() if preset == "tuned"}
    assert len(reference) == 1 and len(tuned) == 1 and reference != tuned
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t4bench-ncf")
    assert exp is not None
    by_set = {}
    for run in client.search_runs([exp.experiment_id], "tags.`t4bench.sweep_id` LIKE 'demo-validate-%'"):
        if "t4bench.sweep_role" in run.data.tags:  # the sweep's parent run: not a training run
            continue
        by_set.setdefault(run.data.tags["t4bench.sweep_id"], set()).add(config_id(run.data.params))
    # each validation set is one configuration; the best trial's lr makes it another one
    assert all(len(v) == 1 for v in by_set.values()) and len(set.union(*by_set.values())) == 2
    assert by_set["demo-validate-reference"] == reference
