"""A sweep whose range or choice holds no value is refused before anything exists: Hydra would
launch no job and leave an empty parent run (`t4bench.preflight.overrides.check_sweeps_not_empty`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from t4bench.errors import T4BenchError
from t4bench.preflight import overrides


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("seed=range(5,1)", "seed=range(5,1): sweeps nothing: the range from 5 to 1 by 1 holds no value"),
        ("seed=range(0,10,-1)", "the range from 0 to 10 by -1 holds no value"),
    ],
)
def test_an_empty_range_is_refused(line: str, expected: str) -> None:
    with pytest.raises(T4BenchError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        overrides.check_sweeps_not_empty(["model=ncf", line])


@pytest.mark.parametrize(
    "line", ["seed=range(1,5)", "seed=0,1", "seed=choice(3)", "model.optimizer.lr=interval(0.1,1)"]
)
def test_sweeps_with_values_pass(line: str) -> None:
    overrides.check_sweeps_not_empty(["model=ncf", line])


@pytest.mark.parametrize("entry", [["t4bench", "sweep"], ["python", "-m", "t4bench", "--multirun"]])
def test_an_empty_sweep_on_the_command_line_creates_nothing(tmp_path: Path, entry: list[str]) -> None:
    """End to end: one line, exit 2, and no MLflow store, parent run or sweep folder made."""
    store = tmp_path / "mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    command = [sys.executable if entry[0] == "python" else shutil.which(entry[0]) or entry[0], *entry[1:]]
    proc = subprocess.run(
        [*command, "model=ncf", "seed=range(5,1)"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("t4bench: error: seed=range(5,1): sweeps nothing"), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no store, no multirun/ folder
