"""The R740 study's published figures (conf/study/r740.yaml) beside the store's runs: a real store
with NCF mini runs of two hw profiles (cpu, and cpu renamed cpu-b), `python -m t4bench.report` on
it, the tables read back from report.md and the figure's plotted data from the Figure."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import DATA_ROOT, REPO

from t4bench.report import published, study

SEEDS = "0,1"
# HR@10 passes 0.3 at the first evaluation (half an epoch) on every seed: every run converges
COMMON = ["model=ncf", "max_epochs=1", "eval_every=0.5", "model.target.hr_at_10=0.3", "progress=off", f"seed={SEEDS}"]
HW = {"cpu": ["hw=cpu"], "cpu-b": ["hw=cpu", "hw.name=cpu-b", "hw.strict=false"]}


def _run(args: list[str], cwd: Path, uri: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO / "src"),
    }
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("study_store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    for name, args in HW.items():
        _run(["-m", "t4bench", "--multirun", *COMMON, *args, f"hydra.sweep.dir={root / name}"], root, uri)
    return root, uri


def _store_runs(uri: str) -> dict[str, list]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t4bench-ncf")
    assert exp is not None
    by_hw: dict[str, list] = {}
    for run in client.search_runs([exp.experiment_id]):
        if "t4bench.sweep_role" in run.data.tags:  # a multirun's parent run: not a training run
            continue
        by_hw.setdefault(run.data.tags["t4bench.hw"], []).append(run)
    return by_hw


def _row(md: str, section: str, start: str) -> list[str]:
    body = md.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    (line,) = [line for line in body.splitlines() if line.startswith(start)]
    return [c.strip() for c in line.strip("|").split("|")]


def test_report_puts_the_study_beside_two_hw_profiles(store: tuple[Path, str]) -> None:
    root, uri = store
    out = root / "report"
    _run(["-m", "t4bench.report", "--out", str(out)], root, uri)
    md = (out / "report.md").read_text()
    by_hw = _store_runs(uri)
    assert sorted(by_hw) == ["cpu", "cpu-b"] and all(len(v) == 2 for v in by_hw.values())
    assert all(r.data.tags["t4bench.outcome"] == "converged" for v in by_hw.values() for r in v)
    # measured speed-up, independent of the report: mean times (2 runs: the olympic mean is the mean)
    mean = {hw: sum(r.data.metrics["time_to_train_s"] for r in runs) / len(runs) for hw, runs in by_hw.items()}
    row = _row(md, study.TITLE_SPEEDUP, "| ncf | mini | 1 |")
    assert row[4] == "cpu-b over cpu"
    assert float(row[5]) == pytest.approx(mean["cpu"] / mean["cpu-b"], rel=5e-3)
    assert row[7] == "–" and "publishes no speed-up for this model" in row[8]
    # every published speed-up has its row, saying no runs; the overall range too
    raw = yaml.safe_load(published.STUDY_FILE.read_text())
    for model, rng in raw["speedup"].items():
        cells = _row(md, study.TITLE_SPEEDUP, f"| {model} | reference |")
        assert cells[5] == study.NO_RUNS and cells[7].startswith(f"{rng['low']:g}"), cells
    overall = _row(md, study.TITLE_SPEEDUP, "| overall |")
    assert overall[5] == study.NO_RUNS and overall[7] == "2.2–3.6×"
    # epochs: the measured rows say the study has no cpu figure; the published rows say no runs
    epochs = {hw: sorted(r.data.metrics["epochs_to_converge"] for r in runs) for hw, runs in by_hw.items()}
    cpu = _row(md, study.TITLE_EPOCHS, "| ncf | mini | cpu | 1 |")
    assert float(cpu[6].split(" ± ")[0]) == pytest.approx(sum(epochs["cpu"]) / 2, rel=5e-3)
    assert "ran t4 and v100-pcie only" in cpu[7]
    for model, by_gpu in raw["epochs"].items():
        for hw, counts in by_gpu.items():
            for count, value in counts.items():
                cells = _row(md, study.TITLE_EPOCHS, f"| {model} | reference | {hw} | {count} |")
                assert cells[6] == study.NO_RUNS and float(cells[7]) == value
    assert f"]({study.FIGURE})" in md and (out / study.FIGURE).read_bytes()[:4] == b"\x89PNG"


def test_figure_marks_published_values_and_every_run(store: tuple[Path, str]) -> None:
    from mlflow.tracking import MlflowClient

    from t4bench.report.query import RunFilter, select

    _, uri = store
    runs = select(MlflowClient(uri), RunFilter()).runs
    fig = study.epochs_figure(runs, published.load())
    panels = {ax.get_title(): ax for ax in fig.axes}
    assert set(panels) == {"gnmt", "transformer", "ncf"}
    raw = yaml.safe_load(published.STUDY_FILE.read_text())
    for model in ("gnmt", "transformer"):
        for hw, counts in raw["epochs"][model].items():
            (line,) = [ln for ln in panels[model].lines if ln.get_gid() == f"published:{hw}"]
            xs, ys = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
            assert xs.tolist() == sorted(counts) and ys.tolist() == [counts[n] for n in sorted(counts)]
    for hw, store_runs in _store_runs(uri).items():
        (dots,) = [c for c in panels["ncf"].collections if c.get_gid() == f"measured:{hw}"]
        assert sorted(np.asarray(dots.get_offsets())[:, 1].tolist()) == pytest.approx(
            sorted(r.data.metrics["epochs_to_converge"] for r in store_runs)
        )


def test_study_pair_rows_match_the_published_range() -> None:
    """The study's own pair (t4, v100-pcie) on a time table: the range, the 2+ GPU note, the
    overall span; an undefined olympic time says so instead of a number."""
    pub = published.load()
    rows = []
    for model, count, t4, v100 in [
        ("resnet50", 1, 360.0, 100.0),
        ("transformer", 1, 280.0, 100.0),
        ("ssd", 2, 330.0, math.nan),
    ]:
        for hw, t in (("t4", t4), ("v100-pcie", v100)):
            rows.append(
                {"model": model, "scale": "reference", "data": "real", "hw": hw, "hw_count": count, "config": "c",
                 "ttt_olympic_s": t, "throughput": 1000.0 / t if t == t else math.nan}
            )  # fmt: skip
    table = study.speedup_rows(pd.DataFrame(rows), pub).set_index("model")
    assert table.loc["resnet50", "measured speed-up"] == "3.6" and table.loc["resnet50", "note"] == "–"
    assert "2+ GPUs" in table.loc["transformer", "note"]
    assert "undefined" in table.loc["ssd", "note"]
    assert table.loc["overall", "measured speed-up"] == "2.8–3.6×"
    assert table.loc["gnmt", "measured speed-up"] == study.NO_RUNS


def _t4bench(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "T4BENCH_DATA_DIR": str(DATA_ROOT), "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "t4bench", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_experiment_matrix_dry_run_and_refusal(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from t4bench.preflight.study_matrix import expand

    raw = OmegaConf.load(REPO / "conf" / "experiment" / "study_r740.yaml")
    runs = expand(OmegaConf.to_container(raw.experiment.matrix))  # type: ignore[arg-type]
    assert len(runs) == 6 * (4 + 3) and len({tuple(r.values()) for r in runs}) == len(runs)
    assert {r["hw"] for r in runs} == {"t4", "v100-pcie"} and max(
        int(r["hw.count"]) for r in runs if r["hw"] == "v100-pcie"
    ) == 3
    dry = _t4bench(["+experiment=study_r740", "experiment.dry_run=true"], tmp_path)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.strip().splitlines()
    assert "42 runs at scale=reference" in lines[0] and len(lines) == 43
    assert "python -m t4bench +experiment=study_r740 model=gnmt hw=v100-pcie hw.count=3" in lines
    # this host has no T4 or V100: hw=auto resolves to cpu, refused in one line before any run exists
    refused = _t4bench(["+experiment=study_r740", "hw=auto"], tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "runs on t4 or v100-pcie only, not hw=cpu" in refused.stderr
    assert not (tmp_path / "mlflow.db").exists()
    over = _t4bench(["+experiment=study_r740", "hw=v100-pcie", "hw.count=4"], tmp_path)
    assert over.returncode == 2 and "not 4" in over.stderr
    job = _t4bench(["+experiment=study_r740", "--cfg", "job"], tmp_path)
    assert "name: reference" in job.stdout and "v100-pcie:" in job.stdout
