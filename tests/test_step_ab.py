"""perf/step_ab.py on the CPU: both loops of a mini model built in one process and timed in
alternating blocks; the CSV row's ratio is the geometric mean of its rounds with a bootstrap CI
around it, and the median of the rounds with its own; bad arguments exit 2."""

from __future__ import annotations

import csv
import importlib
import math
import statistics
import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "perf"))  # the perf/ scripts import each other by name
step_ab = importlib.import_module("step_ab")


def test_times_both_loops_in_alternating_rounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ab.csv"
    step_ab.main(
        [
            "--device",
            "cpu",
            "--models",
            "ssd",
            "--steps",
            "2",
            "--rounds",
            "4",
            "--warmup",
            "1",
            "--batch",
            "2",
            "--out",
            str(out),
            "scale=mini",
        ]
    )
    (row,) = list(csv.DictReader(out.open()))
    assert row["model"] == "ssd" and row["rounds"] == "4" and row["device"] == "cpu"
    rounds = [float(r) for r in row["ratio_each"].split()]
    assert len(rounds) == 4 and all(r > 0 for r in rounds)
    ratio, low, high = float(row["ratio"]), float(row["ci_low"]), float(row["ci_high"])
    assert ratio == pytest.approx(math.prod(rounds) ** 0.25, rel=1e-3)
    assert low <= ratio <= high
    median, median_low, median_high = (float(row[k]) for k in ("median_ratio", "median_ci_low", "median_ci_high"))
    assert median == pytest.approx(statistics.median(rounds), rel=1e-3)
    assert median_low <= median <= median_high
    # the same SSD step in both loops on one CPU: within a factor that only a broken loop leaves
    assert 0.5 < float(row["bare_ms"]) / float(row["same_ms"]) < 2.0
    printed = capsys.readouterr().out
    assert printed.count("ssd round ") == 4 and "ratio" in printed


def test_summary_is_the_geometric_mean_with_a_ci_that_covers_it() -> None:
    result = step_ab.summarize("x", "cpu", 5, bare=[2.0, 4.0, 2.2, 3.9], same=[1.0, 2.0, 1.0, 2.0])
    assert result.ratio == pytest.approx(math.prod([2.0, 2.0, 2.2, 1.95]) ** 0.25)
    assert result.ci_low < result.ratio < result.ci_high and result.ci_high <= 2.2
    assert result.bare_ms == pytest.approx(3.05) and result.same_ms == pytest.approx(1.5)
    # one wild round moves the mean, not the median
    wild = step_ab.summarize("x", "cpu", 5, bare=[1.0, 1.0, 1.0, 1.0, 1.5], same=[1.0, 1.0, 1.0, 1.0, 1.0])
    assert wild.median_ratio == 1.0 and wild.ratio > 1.08 and wild.median_ci_low == 1.0
    two = step_ab.summarize("x", "cpu", 5, bare=[2.0, 2.0], same=[1.0, 1.0])
    assert two.ratio == pytest.approx(2.0) and math.isnan(two.ci_low) and math.isnan(two.ci_high)
    assert two.median_ratio == 2.0 and math.isnan(two.median_ci_low)


@pytest.mark.parametrize(("flag", "value"), [("--rounds", "1"), ("--steps", "0")])
def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        step_ab.main(["--device", "cpu", flag, value, "--out", str(tmp_path / "x.csv")])
    assert exit_info.value.code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
