"""The README's GPU table from a `gpu_suite.py` CSV, as markdown on stdout.

    python perf/suite_table.py perf/results/gpu_suite_nvidia-h200_2026-12-03.csv

NaN throughputs (a run whose loss was not finite) print as "NaN (loss ...)", never as a figure; with
`--repeats` the same/bare ratio is the ratio of the medians with the per-repeat range.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

#: gpu_suite's best_perf mark for a profile that sets no option for the model (best column not run)
UNSET = "(sets nothing)"


def _rate(value: str, loss: str) -> str:
    number = float(value)
    if math.isnan(number):
        return f"NaN (loss {float(loss):.3g})" if not math.isfinite(float(loss)) else "not run"
    return f"{number:,.0f}" if number >= 100 else f"{number:.3g}"


def _best(row: dict[str, str]) -> str:
    if row["best_perf"] == "none":  # --best none: no best column was run
        return "not run"
    if row["best_perf"].endswith(UNSET):  # the profile leaves the model at perf=default
        return f"not run (perf={row['best_perf'].split()[0]} sets nothing)"
    return f"{_rate(row['t4bench_best'], row['best_loss'])} (perf={row['best_perf']})"


def _ratio(value: str) -> str:
    number = float(value)
    return "-" if math.isnan(number) else f"{number:.3f}"


def _same_over_bare(row: dict[str, str]) -> str:
    """The ratio of the medians, and with several repeats the range of the per-repeat ratios (CSVs
    from before `ratio_each` have one pair)."""
    each = [float(v) for v in (row.get("ratio_each") or "").split()]
    if len(each) < 2:
        return _ratio(row["same_over_bare"])
    return f"{_ratio(row['same_over_bare'])} ({min(each):.3f}-{max(each):.3f}, n={len(each)})"


def _share(value: str) -> str:
    number = float(value)
    return "-" if math.isnan(number) else f"{100 * number:.1f}%"


def _gib(row: dict[str, str], column: str) -> str:
    number = float(row.get(column) or "nan")  # CSVs from before the peak columns have none
    return "-" if math.isnan(number) else f"{number:.1f}"


def markdown(path: Path) -> str:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        return f"{path}: no rows"
    first = rows[0]
    lines = [
        f"{first['gpu']}, torch {first['torch']}, {first['precision']}, synthetic reference shapes, "
        f"{first['date']}; FLOP share = counted FLOP/s over the measured {float(first['peak_tflops']):,.0f} "
        "TFLOP/s bf16 matmul peak",
        "",
        "| model | batch | unit | bare eager | t4bench same settings | ratio | t4bench best | best / bare "
        "| FLOP share bare / best | peak GiB bare / same / best |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['batch']} | {row['unit']} | {_rate(row['bare_eager'], row['bare_loss'])} "
            f"| {_rate(row['t4bench_same'], row['same_loss'])} | {_same_over_bare(row)} "
            f"| {_best(row)} "
            f"| {_ratio(row['best_over_bare'])} "
            f"| {_share(row['bare_flop_fraction'])} / {_share(row['best_flop_fraction'])} "
            f"| {_gib(row, 'bare_peak_gib')} / {_gib(row, 'same_peak_gib')} / {_gib(row, 'best_peak_gib')} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: suite_table.py RESULTS.csv")
    print(markdown(Path(sys.argv[1])))
