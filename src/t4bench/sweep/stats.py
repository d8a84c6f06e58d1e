"""The distribution of a set of runs: what a seed sweep, a trial and a validation report.

A run that did not converge has epochs_to_converge = NaN. MLPerf counts such a run as infinitely
slow, so it is the one dropped as the slowest by the olympic mean; with two or more of them the
olympic mean is undefined (NaN). mean/std/min/max/cv are over the converged runs only and always
come with `converged_fraction`, so a fast mean over few converged seeds cannot pass unnoticed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STAT_NAMES = ("n", "n_converged", "converged_fraction", "mean", "std", "min", "max", "cv", "olympic_mean")


def _finite(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1); 0 for a single value, NaN for none."""
    if not values:
        return math.nan
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    vals = sorted(values)
    if not vals:
        return math.nan
    pos = (len(vals) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def olympic_mean(values: Sequence[float]) -> float:
    """MLPerf's olympic mean: drop the fastest and the slowest, average the rest.

    Non-finite values (runs that did not converge) count as slowest; if more than one run did not
    converge the result is NaN. Fewer than three runs: the plain mean of the converged ones.
    """
    vals = [float(v) if v is not None and math.isfinite(float(v)) else math.inf for v in values]
    if not vals:
        return math.nan
    if len(vals) < 3:
        finite = _finite(vals)
        return sum(finite) / len(finite) if len(finite) == len(vals) else math.nan
    vals.sort()
    kept = vals[1:-1]
    if any(math.isinf(v) for v in kept):
        return math.nan
    return sum(kept) / len(kept)


def describe(values: Sequence[float | None]) -> dict[str, float]:
    """n, n_converged, converged_fraction, mean, std (sample, ddof=1), min, max, cv, olympic_mean."""
    n = len(values)
    finite = _finite(v for v in values if v is not None)
    k = len(finite)
    mean = sum(finite) / k if k else math.nan
    std = sample_std(finite)
    return {
        "n": float(n),
        "n_converged": float(k),
        "converged_fraction": k / n if n else math.nan,
        "mean": mean,
        "std": std,
        "min": min(finite) if finite else math.nan,
        "max": max(finite) if finite else math.nan,
        "cv": std / mean if k and mean else math.nan,
        "olympic_mean": olympic_mean(list(values)),  # type: ignore[arg-type]
    }


def describe_runs(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per-metric distributions of run results (the task function's return dicts).

    epochs_to_converge and time_to_train_s count only converged runs (time of a run that never
    reached the target is not a time-to-train); epochs_run counts all of them.
    """
    converged = [bool(float(r.get("converged", 0.0) or 0.0)) for r in results]

    def column(key: str, only_converged: bool) -> list[float | None]:
        out: list[float | None] = []
        for ok, r in zip(converged, results):
            value = r.get(key)
            out.append(float(value) if value is not None and (ok or not only_converged) else math.nan)
        return out

    return {
        "epochs_to_converge": describe(column("epochs_to_converge", True)),
        "time_to_train_s": describe(column("time_to_train_s", True)),
        "epochs_run": describe(column("epochs_run", False)),
    }


def outcome_counts(results: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        outcome = str(r.get("outcome", "unknown"))
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def flat_metrics(distributions: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """{'epochs_to_converge': {'mean': 3}} -> {'epochs_to_converge_mean': 3} for MLflow."""
    return {f"{metric}_{stat}": value for metric, stats in distributions.items() for stat, value in stats.items()}


def format_table(columns: Mapping[str, Mapping[str, float]], title: str = "") -> str:
    """Plain-text table: one row per statistic, one column per distribution."""
    names = list(columns)
    width = max([12, *(len(n) for n in names)])
    lines = [title] if title else []
    lines.append(f"{'':<20}" + "".join(f"{n:>{width + 2}}" for n in names))
    for stat in STAT_NAMES:
        row = f"{stat:<20}"
        for n in names:
            value = columns[n].get(stat, math.nan)
            if stat in ("n", "n_converged"):
                row += f"{int(value):>{width + 2}d}" if math.isfinite(value) else f"{'-':>{width + 2}}"
            else:
                row += f"{value:>{width + 2}.3f}" if math.isfinite(value) else f"{'nan':>{width + 2}}"
        lines.append(row)
    return "\n".join(lines)
