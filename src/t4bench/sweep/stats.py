"""The distribution of a set of runs: what a seed sweep, a trial and a validation report.

Which runs converged comes from each run's outcome, never from which values are present: a run
that did not converge has no epochs_to_converge or time_to_train_s, but it has an epochs_run, and
counting present values would call it converged. MLPerf counts a run that did not converge as
infinitely slow, so it is the one dropped as the slowest by the olympic mean; with two or more of
them the olympic mean is undefined (NaN). mean/std/min/max/cv of a score are over the converged
runs only and always come with `converged_fraction`, so a fast mean over few converged seeds
cannot pass unnoticed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from t4bench.tracking import names

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


def describe(values: Sequence[float | None], converged: Sequence[bool], *, scores: bool = True) -> dict[str, float]:
    """n, n_converged, converged_fraction, mean, std (sample, ddof=1), min, max, cv, olympic_mean.

    `converged` says which runs converged (from their outcomes): it alone makes n_converged. With
    `scores` (epochs_to_converge, time_to_train_s) only converged runs' values count and the
    others are infinitely slow in the olympic mean; without (epochs_run) every run's value counts."""
    if len(values) != len(converged):
        raise ValueError(f"{len(values)} values but {len(converged)} converged flags")
    n, k = len(values), sum(bool(ok) for ok in converged)
    kept = [v if (ok or not scores) and v is not None else math.nan for v, ok in zip(values, converged, strict=True)]
    finite = _finite(kept)
    mean = sum(finite) / len(finite) if finite else math.nan
    std = sample_std(finite)
    return {
        "n": float(n),
        "n_converged": float(k),
        "converged_fraction": k / n if n else math.nan,
        "mean": mean,
        "std": std,
        "min": min(finite) if finite else math.nan,
        "max": max(finite) if finite else math.nan,
        "cv": std / mean if finite and mean else math.nan,
        "olympic_mean": olympic_mean(kept),
    }


def converged_flags(results: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Which runs converged, from their outcome (`t4bench.outcome`), not from the metrics they have."""
    return [str(r.get("outcome", "")) == names.OUTCOME_CONVERGED for r in results]


def describe_runs(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per-metric distributions of run results (the task function's return dicts, or
    `sweep_layout.run_result`'s).

    epochs_to_converge and time_to_train_s are over converged runs only (a run that never reached
    the target has neither); epochs_run is over every run. n_converged and converged_fraction are
    the same in every row: the outcomes'."""
    converged = converged_flags(results)

    def column(key: str) -> list[float | None]:
        return [None if r.get(key) is None else float(r[key]) for r in results]

    return {
        names.EPOCHS_TO_CONVERGE: describe(column(names.EPOCHS_TO_CONVERGE), converged),
        names.TIME_TO_TRAIN_S: describe(column(names.TIME_TO_TRAIN_S), converged),
        names.EPOCHS_RUN: describe(column(names.EPOCHS_RUN), converged, scores=False),
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


# ---- held-out comparison of two arms (tuned vs reference) -------------------------------------
#: the goal of a tuned preset (issue #13): epochs-to-converge mean >= 30% lower and std >= 50% lower
#: than the reference's, each with its bootstrap 95% CI of tuned/reference excluding 1.0
GOAL_MEAN_RATIO = 0.70
GOAL_STD_RATIO = 0.50
_UNBOUNDED = 1e12


def censored_epochs(results: Sequence[Mapping[str, Any]], default_max_epochs: float) -> list[float]:
    """epochs_to_converge per run, where a run that did not converge enters as its max_epochs.

    That run needed more than max_epochs: max_epochs is a lower bound of its true value (right-
    censored), so means and stds that include it are lower bounds too, and a tuned arm cannot gain
    from runs that never reached the target."""
    out = []
    for r in results:
        value = float(r.get(names.EPOCHS_TO_CONVERGE, math.nan) or math.nan)
        converged = bool(float(r.get("converged", 0.0) or 0.0)) or str(r.get("outcome")) == "converged"
        if converged and math.isfinite(value):
            out.append(value)
            continue
        budget = float(r.get("max_epochs", math.nan) or math.nan)
        out.append(budget if math.isfinite(budget) else float(default_max_epochs))
    return out


def arm_stats(values: Sequence[float], n_converged: int) -> dict[str, float]:
    """n, converged fraction, mean, std (ddof=1), olympic mean (drop one min and one max), min, max."""
    vals = sorted(float(v) for v in values)
    n = len(vals)
    return {
        "n": float(n),
        "n_converged": float(n_converged),
        "converged_fraction": n_converged / n if n else math.nan,
        "mean": sum(vals) / n if n else math.nan,
        "std": sample_std(vals),
        "olympic_mean": sum(vals[1:-1]) / (n - 2) if n >= 3 else math.nan,
        "min": vals[0] if vals else math.nan,
        "max": vals[-1] if vals else math.nan,
    }


def _ratio_ci(
    tuned: Sequence[float], reference: Sequence[float], statistic: str, n_resamples: int, seed: int
) -> dict[str, Any]:
    """tuned/reference of the mean or the std, with scipy's bootstrap 95% CI (BCa; the percentile
    method where BCa is undefined, e.g. when resampled stds of 0 make ratios infinite)."""
    import warnings

    import numpy as np
    from scipy import stats as sps

    def stat(x: Any, axis: int = -1) -> Any:
        return np.mean(x, axis=axis) if statistic == "mean" else np.std(x, ddof=1, axis=axis)

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        # a resample without spread in the reference (integer epochs make them common): x/0 is
        # "unbounded" (a large finite stand-in, reported as inf), 0/0 is "no change" (1.0); NaN
        # or inf would make every percentile of the bootstrap distribution NaN
        num, den = stat(x, axis), stat(y, axis)
        safe = np.where(den > 0, den, 1.0)
        return np.where(den > 0, num / safe, np.where(num > 0, _UNBOUNDED, 1.0))

    t, r = np.asarray(tuned, dtype=float), np.asarray(reference, dtype=float)
    value = float(ratio(t, r)) if len(r) >= (2 if statistic == "std" else 1) else math.nan
    low = high = math.nan
    method = "BCa"
    if len(t) >= 2 and len(r) >= 2:
        for method in ("BCa", "percentile"):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                res = sps.bootstrap(
                    (t, r),
                    ratio,
                    paired=False,
                    vectorized=True,
                    n_resamples=n_resamples,
                    confidence_level=0.95,
                    method=method,
                    rng=np.random.default_rng(seed),
                )
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
            if not (math.isnan(low) or math.isnan(high)):
                break
    low, high, value = (math.inf if v >= _UNBOUNDED / 10 else v for v in (low, high, value))
    return {"value": value, "ci_low": low, "ci_high": high, "ci_method": method}


def compare_arms(
    tuned: Sequence[float], reference: Sequence[float], *, n_resamples: int = 9999, seed: int = 0
) -> dict[str, Any]:
    """Ratios tuned/reference of mean and std with bootstrap 95% CIs, Brown-Forsythe (Levene,
    center=median) for the spread and Mann-Whitney U (two-sided) for the location."""
    import warnings

    from scipy import stats as sps

    out: dict[str, Any] = {
        "mean_ratio": _ratio_ci(tuned, reference, "mean", n_resamples, seed),
        "std_ratio": _ratio_ci(tuned, reference, "std", n_resamples, seed),
    }
    with warnings.catch_warnings():  # identical values in both arms: the tests are undefined (NaN)
        warnings.simplefilter("ignore")
        levene = sps.levene(tuned, reference, center="median")
        mwu = sps.mannwhitneyu(tuned, reference, alternative="two-sided")
    out["brown_forsythe"] = {"statistic": float(levene.statistic), "p_value": float(levene.pvalue)}
    out["mann_whitney"] = {"statistic": float(mwu.statistic), "p_value": float(mwu.pvalue)}
    return out


def goal_check(comparison: Mapping[str, Any]) -> dict[str, bool]:
    """mean: ratio <= 0.70 and its CI below 1.0; std: ratio <= 0.50 and its CI below 1.0."""

    def meets(entry: Mapping[str, float], bound: float) -> bool:
        return bool(entry["value"] <= bound and entry["ci_high"] < 1.0)

    mean_ok = meets(comparison["mean_ratio"], GOAL_MEAN_RATIO)
    std_ok = meets(comparison["std_ratio"], GOAL_STD_RATIO)
    return {"mean": mean_ok, "std": std_ok, "pass": mean_ok and std_ok}
