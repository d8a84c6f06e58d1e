"""scripts/startup_time.py on one arm (this checkout, one default run): the phases come in the
order the run writes its MLPerf events, the import seconds it reads fit inside their spans, and a
tree that is no checkout is one error line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "startup_time.py"


def _script(cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _table(stdout: str) -> dict[str, list[str]]:
    """The markdown table's rows: first cell -> the other cells."""
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in stdout.splitlines() if line.startswith("|")]
    return {row[0]: row[1:] for row in cells[2:]}


@pytest.mark.slow
def test_one_arm_breaks_the_default_run_into_ordered_phases(tmp_path: Path) -> None:
    done = _script(tmp_path, "--after", str(ROOT), "--repeats", "1", timeout=600)
    assert done.returncode == 0, done.stderr
    table = _table(done.stdout)
    spans = ["imports + compose + checks", "store + data + model", "train = TTT", "summary + exit"]
    phases = {name: next(row for label, row in table.items() if label.startswith(name)) for name in spans}
    whole = table["whole process"]
    for name, (wall, cpu) in phases.items():
        # each span ends after it starts (events in order) and used some CPU
        assert float(wall) > 0 and float(cpu) > 0, (name, wall, cpu)
        imports = table[f"... of which imports (-X importtime), {name}"]
        assert imports[1] == "-"
        assert float(imports[0]) <= float(wall) + 0.02, (name, imports, wall)  # 20 ms: the polling
    # most of the run's imports (torch, Hydra, MLflow) come before its first event
    assert float(table["... of which imports (-X importtime), imports + compose + checks"][0]) > 0.5
    assert float(table["... of which imports (-X importtime), whole process"][0]) <= float(whole[0])
    minus_train = table["**whole - train** (target <= 3 s wall)"]
    assert float(minus_train[0]) == pytest.approx(float(whole[0]) - float(phases["train = TTT"][0]), abs=0.011)
    assert float(table["`python -m t4bench --help` (target <= 0.5 s wall)"][0]) > 0
    assert list(tmp_path.iterdir()) == []  # the runs went to temporary folders, removed


@pytest.mark.slow
def test_plain_runs_without_importtime_and_leaves_the_import_rows_empty(tmp_path: Path) -> None:
    done = _script(tmp_path, "--after", str(ROOT), "--repeats", "1", "--plain", timeout=600)
    assert done.returncode == 0, done.stderr
    table = _table(done.stdout)
    imports = [row for label, row in table.items() if label.startswith("... of which imports")]
    assert len(imports) == 5 and all(row == ["-", "-"] for row in imports), imports
    whole, train = table["whole process"], next(row for label, row in table.items() if label.startswith("train"))
    minus_train = table["**whole - train** (target <= 3 s wall)"]
    assert 0 < float(minus_train[0]) < float(whole[0])
    assert float(minus_train[0]) == pytest.approx(float(whole[0]) - float(train[0]), abs=0.011)


def test_a_tree_without_t4bench_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _script(tmp_path, "--before", str(tmp_path), "--after", str(ROOT), timeout=60)
    assert (done.returncode, done.stdout, list(tmp_path.iterdir())) == (2, "", [])
    assert done.stderr.splitlines() == [
        f"startup_time.py: error: --before {tmp_path.resolve()}: no src/t4bench in it (a checkout root?)"
    ]
