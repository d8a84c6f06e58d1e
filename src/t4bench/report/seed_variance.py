"""How much of the epochs-to-converge variance each seed explains: a two-way crossed random-effects
split of a sweep that runs every weights seed with every data seed, R times each.

    y[w, d, r] = mu + A[w] + B[d] + AB[w, d] + E[w, d, r]

A: the weights seed (`seed`: initial weights, dropout), B: the data seed (`data_seed`: order,
negatives), AB: their interaction (a pairing of weights and data that converges unlike what either
seed predicts alone), E: the repeat (the same pair run again: run-to-run noise of the arithmetic).
Each is an independent zero-mean draw with its own variance; the parts are those variances.

Estimator: the ANOVA (expected mean squares) estimator of a balanced two-way random-effects model
(Montgomery, "Design and Analysis of Experiments", two-factor random effects model): statsmodels
fits the OLS model with both factors and their interaction and `anova_lm` gives the mean squares;
each part is the difference of two mean squares over its multiplier. On balanced data these are
REML's estimates whenever none is negative; a negative one is set to 0 (the usual truncation).
With one run per pair (R = 1) the interaction and the repeat cannot be told apart and are one part.

CIs: the pigeonhole bootstrap (Owen 2007, Ann. Appl. Stat. 1(1)): weights seeds and data seeds
resampled with replacement, independently, each drawn seed bringing all its runs (its cells and
their repeats) - scipy.stats.bootstrap with the two seed lists as two unpaired samples. Runs are not
independent draws (runs of one seed share its A), so resampling runs would understate the spread;
the seeds are the independent units. Percentile intervals: truncated parts put mass exactly at 0,
where BCa's bias correction is undefined. With a handful of seeds per factor the intervals rest on
that handful: a part's estimate from 4 levels can sit far from its truth, and a percentile interval
around it is no guarantee of coverage; read them as how far the seeds at hand move the estimate.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from t4bench.errors import T4BenchError

#: the parts, in the order tables and figures show them
WEIGHTS, DATA, INTERACTION, REPEAT, RESIDUAL = "weights", "data", "interaction", "repeat", "interaction+repeat"
#: what each part is, for tables and legends
MEANING = {
    WEIGHTS: "weights seed (`seed`): initial weights, dropout",
    DATA: "data seed (`data_seed`): order, negatives",
    INTERACTION: "weights x data pairing",
    REPEAT: "repeat (same seeds again): run-to-run noise",
    RESIDUAL: "pairing and run-to-run noise (one run per pair)",
}


def parts(repeats: int) -> tuple[str, ...]:
    return (WEIGHTS, DATA, INTERACTION, REPEAT) if repeats > 1 else (WEIGHTS, DATA, RESIDUAL)


def as_cube(table: pd.DataFrame, value: str = "epochs") -> np.ndarray:
    """(weights seeds, data seeds, repeats) array of `value` from rows with columns `weights`,
    `data`, `value`; a pair's repeats in row order. Every pair needs the same number of runs."""
    counts = table.groupby(["weights", "data"]).size()
    weights, data = sorted(table["weights"].unique()), sorted(table["data"].unique())
    missing = [(w, d) for w in weights for d in data if (w, d) not in counts.index]
    if missing or counts.nunique() != 1:
        short = missing or [pair for pair, n in counts.items() if n != counts.max()]
        raise T4BenchError(
            f"the sweep is not a complete crossed design ({len(weights)} weights seeds x {len(data)} data "
            f"seeds, {counts.max() if len(counts) else 0} runs per pair): pairs short of runs (seed, data_seed): "
            + ", ".join(f"({w}, {d})" for w, d in short[:8])
            + (" ..." if len(short) > 8 else "")
        )
    if len(weights) < 2 or len(data) < 2:
        raise T4BenchError(
            f"a split needs at least 2 weights seeds and 2 data seeds; got {len(weights)} and {len(data)}"
        )
    ordered = table.assign(_w=table["weights"].map(weights.index), _d=table["data"].map(data.index))
    repeats = int(counts.iloc[0])
    cube = np.empty((len(weights), len(data), repeats))
    for (w, d), rows in ordered.groupby(["_w", "_d"], sort=False):
        cube[int(w), int(d), :] = rows[value].to_numpy(dtype=float)
    return cube


@functools.lru_cache(maxsize=16)
def _design(shape: tuple[int, ...]) -> tuple[np.ndarray, Any]:
    """(design matrix, its patsy design_info) of the crossed model for a (W, D, R) cube, y in C
    order, as statsmodels' formula API builds them: once per shape (every bootstrap resample has
    the cube's shape, and building the design costs more than the fit)."""
    from statsmodels.formula.api import ols

    n_w, n_d, n_r = shape
    w, d, _ = np.meshgrid(np.arange(n_w), np.arange(n_d), np.arange(n_r), indexing="ij")
    frame = pd.DataFrame({"y": 0.0, "w": w.ravel(), "d": d.ravel()})
    model = ols(_formula(n_r), frame)
    # statsmodels releases that build formulas without patsy keep no design_info: None sends the
    # fit through the formula API instead (slower per bootstrap resample, same mean squares)
    return np.asarray(model.exog), getattr(model.data, "design_info", None)


def _formula(n_r: int) -> str:
    return "y ~ C(w) * C(d)" if n_r > 1 else "y ~ C(w) + C(d)"


def _formula_fit(cube: np.ndarray) -> Any:
    from statsmodels.formula.api import ols

    n_w, n_d, n_r = cube.shape
    w, d, _ = np.meshgrid(np.arange(n_w), np.arange(n_d), np.arange(n_r), indexing="ij")
    frame = pd.DataFrame({"y": cube.ravel(), "w": w.ravel(), "d": d.ravel()})
    return ols(_formula(n_r), frame).fit()


def _mean_squares(cube: np.ndarray) -> dict[str, float]:
    """anova_lm's (sequential, type I: on balanced data all types agree) mean square per term of
    the crossed model fitted by OLS."""
    from statsmodels.regression.linear_model import OLS
    from statsmodels.stats.anova import anova_lm

    exog, design_info = _design(cube.shape)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # identical repeats (CPU runs are bit-exact) leave a residual of 0: F is inf, the MS are fine
        warnings.simplefilter("ignore", RuntimeWarning)
        # design_info as statsmodels' formula API passes it, which anova_lm reads the terms from
        fast = design_info is not None
        fit = OLS(cube.ravel(), exog, design_info=design_info).fit() if fast else _formula_fit(cube)
        anova = anova_lm(fit, typ=1)
    return {str(term): float(value) for term, value in anova["mean_sq"].items()}


def components(cube: np.ndarray) -> dict[str, float]:
    """Each part's variance (epochs^2), ANOVA estimates truncated at 0."""
    n_w, n_d, n_r = cube.shape
    ms = _mean_squares(cube)
    error = max(ms["Residual"], 0.0)
    if n_r > 1:
        pairing = ms["C(w):C(d)"]
        found = {INTERACTION: (pairing - error) / n_r, REPEAT: error}
    else:  # the residual holds the pairing and the noise
        pairing = error
        found = {RESIDUAL: error}
    found[WEIGHTS] = (ms["C(w)"] - pairing) / (n_d * n_r)
    found[DATA] = (ms["C(d)"] - pairing) / (n_w * n_r)
    # rounding leaves ~1e-33 where a part is nil (CPU repeats): below 1e-12 epochs^2 is 0
    return {part: found[part] if found[part] > 1e-12 else 0.0 for part in parts(n_r)}


def shares(variances: dict[str, float]) -> dict[str, float]:
    total = sum(variances.values())
    return {part: value / total if total > 0 else float("nan") for part, value in variances.items()}


@dataclass(frozen=True)
class Split:
    """A sweep's split: per part its variance and share, each with a bootstrap CI."""

    parts: tuple[str, ...]
    variance: dict[str, float]
    share: dict[str, float]
    variance_ci: dict[str, tuple[float, float]]
    share_ci: dict[str, tuple[float, float]]
    shape: tuple[int, int, int]
    n_resamples: int
    confidence: float

    def rows(self) -> list[dict[str, float | str]]:
        return [
            {
                "part": part,
                "variance": self.variance[part],
                "variance_ci_low": self.variance_ci[part][0],
                "variance_ci_high": self.variance_ci[part][1],
                "sd": float(np.sqrt(self.variance[part])),
                "share": self.share[part],
                "share_ci_low": self.share_ci[part][0],
                "share_ci_high": self.share_ci[part][1],
            }
            for part in self.parts
        ]


def _estimates(cube: np.ndarray, names: Sequence[str]) -> np.ndarray:
    variances = components(cube)
    share = shares(variances)
    return np.array([variances[p] for p in names] + [share[p] for p in names])


def split(cube: np.ndarray, *, n_resamples: int = 999, confidence: float = 0.95, seed: int = 0) -> Split:
    """The split of `cube` (as_cube) with pigeonhole-bootstrap percentile CIs."""
    from scipy.stats import bootstrap

    n_w, n_d, n_r = cube.shape
    names = parts(n_r)
    point = _estimates(cube, names)

    def statistic(w_draw: np.ndarray, d_draw: np.ndarray) -> np.ndarray:
        # a seed drawn twice is two levels (the pigeonhole bootstrap), so index by position
        return _estimates(cube[np.asarray(w_draw, dtype=int)][:, np.asarray(d_draw, dtype=int)], names)

    result = bootstrap(
        (np.arange(n_w), np.arange(n_d)),
        statistic,
        paired=False,
        vectorized=False,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    # a resample whose runs all agree has no shares (0/0): those resamples are left out of them
    low, high = _nan_percentiles(result.bootstrap_distribution, confidence)
    k = len(names)
    return Split(
        parts=names,
        variance={p: float(point[i]) for i, p in enumerate(names)},
        share={p: float(point[k + i]) for i, p in enumerate(names)},
        variance_ci={p: (float(low[i]), float(high[i])) for i, p in enumerate(names)},
        share_ci={p: (float(low[k + i]), float(high[k + i])) for i, p in enumerate(names)},
        shape=(n_w, n_d, n_r),
        n_resamples=n_resamples,
        confidence=confidence,
    )


def _nan_percentiles(distribution: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of each statistic over the resamples where it is defined (scipy's
    own `percentile` CI is NaN for a statistic with any NaN resample)."""
    alpha = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN statistic: NaN CI, said so in the table
        low = np.nanpercentile(distribution, 100 * alpha, axis=-1)
        high = np.nanpercentile(distribution, 100 * (1 - alpha), axis=-1)
    return low, high
