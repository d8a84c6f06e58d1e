"""perf/profile_default.py, the benchmark of the hardware's perf profile against perf=default, on
the CPU: the same code path the GPU run takes (two fresh `python -m t4bench` processes a model,
figures read back from MLflow, the profile named by the run's own tags), in its tiny `--smoke`
mode, and its refusal of a throughput whose loss is not finite."""

from __future__ import annotations

import csv
import importlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA_ROOT, REPO

sys.path.insert(0, str(REPO / "perf"))  # the perf/ scripts import each other by name
profile_default = importlib.import_module("profile_default")


def test_smoke_defaults_and_bad_arguments() -> None:
    args = profile_default.parse_args(["--smoke"])
    assert (args.hw, args.models, args.steps, args.warmup, args.batch) == ("cpu", ["ncf"], 2, 1, 64)
    args = profile_default.parse_args(["--models", "resnet50", "--steps", "20", "scale=mini"])
    assert (args.hw, args.models, args.steps, args.warmup, args.overrides) == (
        "auto",
        ["resnet50"],
        20,
        6,
        ["scale=mini"],
    )
    with pytest.raises(SystemExit) as exit_info:
        profile_default.parse_args(["--steps", "0"])
    assert exit_info.value.code == 2


def test_a_throughput_whose_loss_is_not_finite_is_refused() -> None:
    notes: list[str] = []
    finished = {"avg_throughput": 1000.0, "train_loss": 0.5, "failed": 0.0}
    diverged = {"avg_throughput": 1200.0, "train_loss": math.nan, "failed": 0.0}
    assert profile_default.arm_figure("default", [finished], notes) == (1000.0, 0.5) and notes == []
    throughput, loss = profile_default.arm_figure("profile", [finished, diverged], notes)
    assert math.isnan(throughput) and math.isnan(loss)
    assert notes == ["profile arm: loss not finite (0.5, nan): no figure"]
    # a run that failed outright carries its own note (harness_run's): no second one
    failed = {"avg_throughput": math.nan, "train_loss": math.nan, "failed": 1.0}
    assert math.isnan(profile_default.arm_figure("profile", [failed], notes)[0]) and len(notes) == 1


@pytest.mark.slow
def test_smoke_run_writes_both_arms_the_ratio_and_the_profiles_note(tmp_path: Path) -> None:
    """Both arms run, the CSV row holds date, commit, command, unit, both figures and their ratio;
    the cpu profile sets nothing for NCF, which the run's tag and the row's notes say."""
    out = tmp_path / "profile_default.csv"
    env = {**os.environ, "T4BENCH_DATA_DIR": str(DATA_ROOT), "PROFILE_DEFAULT_WORK": str(tmp_path / "work")}
    command = [sys.executable, str(REPO / "perf" / "profile_default.py"), "--smoke", "--csv", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with out.open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["model"], row["gpu"], row["hw"], row["profile"], row["unit"]) == (
        "ncf",
        "cpu",
        "cpu",
        "cpu",
        "samples/s",
    )
    default, profile = float(row["default_throughput"]), float(row["profile_throughput"])
    assert default > 0 and profile > 0 and float(row["ratio"]) == pytest.approx(profile / default)
    assert row["git_commit"] and row["date"] and row["command"].endswith("model.batch_size=64 hw=cpu")
    assert "perf profile cpu sets nothing for ncf: the plain eager loop" in row["notes"]
    assert "| ncf | samples/s |" in proc.stdout
