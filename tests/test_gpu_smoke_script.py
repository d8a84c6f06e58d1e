"""scripts/gpu/smoke.sh refuses a case it does not know before running anything: a misspelt case
(or one from a newer tree) would otherwise run the default model and be written under its name.
PERF=<profile> reaches every run and the CSV's command column."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "scripts" / "gpu" / "smoke.sh"


@pytest.mark.parametrize("where", ["CASES", "TOGETHER"])
def test_unknown_case_exits_2_with_one_line_and_runs_nothing(tmp_path: Path, where: str) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "CASES": "ncf", "HW": "cpu", where: "gnmt-synthtic"}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown case 'gnmt-synthtic'" in lines[0] and "gnmt-synthetic" in lines[0], lines
    assert done.stdout == "" and not (tmp_path / "smoke" / "ncf.log").exists()


def test_perf_reaches_every_run_and_the_command_column(tmp_path: Path) -> None:
    # PERF=h200 on an H100 runs the H200's settings there; the row must say which profile ran. A
    # profile that does not exist is refused in one line before any training
    env = {**os.environ, "OUT": str(tmp_path), "CASES": "ncf", "HW": "cpu", "PERF": "nosuch"}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert "ncf: exit 2" in done.stdout, done.stdout + done.stderr
    (row,) = list(csv.DictReader((tmp_path / "smoke" / "gpu_smoke.csv").open()))
    assert row["command"] == "python -m t4bench model=ncf hw=cpu perf=nosuch" and row["exit"] == "2"
    assert "perf=nosuch: no such option" in (tmp_path / "smoke" / "ncf.log").read_text()
