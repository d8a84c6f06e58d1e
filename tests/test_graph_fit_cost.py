"""perf/graph_fit_cost.py on the CPU: it times this tree's replay check, and refuses a base tree
that has no perf_step.py in one line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "perf"))
graph_fit_cost = importlib.import_module("graph_fit_cost")


def test_times_this_trees_check(capsys: pytest.CaptureFixture[str]) -> None:
    graph_fit_cost.main(["--rounds", "2", "--number", "20"])
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("this tree") and float(line.split()[2]) > 0


def test_a_base_without_perf_step_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no .*perf_step\.py"):
        graph_fit_cost.main(["--base-src", str(tmp_path), "--rounds", "2", "--number", "1"])
