"""scripts/schedule_unit.py's table logic: a budget-killed run that a later call ran again counts
once, with the later outcome; the summary's ratio to N=1 and its bootstrap CI."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "schedule_unit.py"


@pytest.fixture(scope="module")
def table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("schedule_unit_script", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(n: int, seed: int, epochs: float, outcome: str = "converged", start: int = 0) -> dict[str, object]:
    return {"start": start, "model": "gnmt", "N": n, "unit": "steps", "seed": seed,
            "epochs_to_converge": epochs, "outcome": outcome}  # fmt: skip


def test_a_rerun_replaces_the_killed_run_whatever_the_order(table: ModuleType) -> None:
    killed_late = row(1, 0, math.nan, "killed", start=200)  # killed after the rerun started: still loses
    rerun = row(1, 0, 12.0, start=100)
    other = row(1, 1, math.nan, "killed", start=50)  # never rerun: kept, as killed
    kept = table.latest_outcome([killed_late, rerun, other])
    assert sorted((r["seed"], r["outcome"], r["epochs_to_converge"] == 12.0) for r in kept) == [
        (0, "converged", True),
        (1, "killed", False),
    ]
    assert all("start" not in r for r in kept)


def test_summary_ratio_to_n1_with_a_ci_that_contains_it(table: ModuleType) -> None:
    rows = [row(1, s, e) for s, e in enumerate([10.0, 12.0, 14.0, 11.0, 13.0])]
    rows += [row(2, s, e) for s, e in enumerate([20.0, 26.0, 22.0, 24.0, math.nan])]
    by_n = {r["N"]: r for r in table.summary(rows)}
    assert by_n[1]["ratio_to_n1"] == 1.0 and by_n[1]["ci_low"] == ""
    assert (by_n[2]["runs"], by_n[2]["converged"], by_n[2]["mean"]) == (5, 4, 23.0)  # the NaN is counted, not averaged
    assert by_n[2]["ratio_to_n1"] == pytest.approx(23.0 / 12.0, abs=1e-3)
    assert by_n[2]["ci_low"] < by_n[2]["ratio_to_n1"] < by_n[2]["ci_high"]


def test_rows_written_then_read_back_give_the_same_summary(table: ModuleType, tmp_path: Path) -> None:
    rows = [row(1, s, e) for s, e in enumerate([10.0, 12.0, 14.0])] + [row(2, 0, math.nan, "not_converged")]
    rows = [{k: v for k, v in r.items() if k != "start"} for r in rows]
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    table.write_csv(first, rows[:2], table.COLUMNS)
    table.write_csv(second, rows[2:], table.COLUMNS)
    back = table.read_rows([second, first], ["gnmt"])
    assert [(r["N"], r["seed"]) for r in back] == [(1, 0), (1, 1), (1, 2), (2, 0)]  # collect's order
    assert math.isnan(back[-1]["epochs_to_converge"]) and back[-1]["outcome"] == "not_converged"
    assert repr(table.summary(back)) == repr(table.summary(rows))  # repr: NaN cells equal too
    assert table.read_rows([first], ["transformer"]) == []
