"""The per-model loop the perf/ benchmarks share: each model in turn in a work folder, its row
saved after it, and a SIGTERM (a time limit) that keeps the rows of the models that finished.

    signal.signal(signal.SIGTERM, cut_short)
    rows = each_model(models, "SUITE_WORK", measure_one, save)   # measure_one(model, work folder)
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

RESULTS = Path(__file__).resolve().parent / "results"
CUT_NOTE = "cut short by SIGTERM"
Row = TypeVar("Row")


class CutShort(Exception):
    """SIGTERM (a device call's time limit, `timeout`): the model being measured keeps its pairs."""


def cut_short(signum: int, frame: object) -> None:
    raise CutShort  # out of the wait for a column's process (subprocess.run then kills it)


def results_csv(prefix: str, gpu: str) -> Path:
    """perf/results/<prefix>_<gpu as a slug>_<date>.csv."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    return RESULTS / f"{prefix}_{slug}_{dt.date.today().isoformat()}.csv"


def each_model(
    models: Sequence[str],
    work_env: str,
    measure_one: Callable[[str, Path], Row],
    save: Callable[[list[Row]], None],
    stop: Callable[[Row], bool] = lambda row: False,
) -> list[Row]:
    """`measure_one(model, work folder)` for each model in turn ($work_env, else a temporary
    folder), the rows saved after each, so a SIGTERM (CutShort) keeps the models finished; the
    model it cuts gets no row, and none after it (nor after a row `stop` says ends the call)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(os.environ.get(work_env, tmp))
        out.mkdir(parents=True, exist_ok=True)
        for model in models:
            try:
                rows.append(measure_one(model, out))
            except CutShort:
                print(f"{CUT_NOTE} in {model} before its first figures: no row for it", flush=True)
                break
            save(rows)
            if stop(rows[-1]):
                break
    return rows
