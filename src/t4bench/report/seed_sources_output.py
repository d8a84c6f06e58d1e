"""The seed-sources split written down: seed_sources.csv (arm x part), seed_sources_runs.csv (one
row per run), seed_sources.md (dated, with the sweeps' commits and commands) and seed_sources.png
(each part's variance and share per arm: bars the ANOVA estimates, whiskers the bootstrap CIs)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from t4bench.report.seed_variance import MEANING, Split


@dataclass(frozen=True)
class Arm:
    """One sweep's runs and their split."""

    label: str
    sweep_id: str
    runs: pd.DataFrame
    split: Split
    #: what the sweep ran: its overrides, the runs' commit(s), device, settings
    about: dict[str, str]


FILES = ("seed_sources.csv", "seed_sources_runs.csv", "seed_sources.md", "seed_sources.png")
RUN_COLUMNS = ["run_id", "weights", "data", "repeat", "repeat_tag", "epochs", "converged", "outcome", "max_epochs"]


def parts_table(arms: Sequence[Arm]) -> pd.DataFrame:
    rows = []
    for arm in arms:
        n_w, n_d, n_r = arm.split.shape
        epochs = arm.runs["epochs"]
        for row in arm.split.rows():
            rows.append(
                {
                    "arm": arm.label,
                    "sweep_id": arm.sweep_id,
                    **row,
                    "meaning": MEANING[str(row["part"])],
                    "weights_seeds": n_w,
                    "data_seeds": n_d,
                    "repeats": n_r,
                    "runs": len(arm.runs),
                    "not_converged": int((~arm.runs["converged"]).sum()),
                    "mean_epochs": float(epochs.mean()),
                    "sd_epochs": float(epochs.std(ddof=1)),
                    "confidence": arm.split.confidence,
                    "resamples": arm.split.n_resamples,
                }
            )
    return pd.DataFrame(rows)


def runs_table(arms: Sequence[Arm]) -> pd.DataFrame:
    frames = [arm.runs[RUN_COLUMNS].assign(arm=arm.label, sweep_id=arm.sweep_id) for arm in arms]
    table = pd.concat(frames, ignore_index=True)
    return table.rename(columns={"weights": "seed", "data": "data_seed"})[
        ["arm", "sweep_id", "seed", "data_seed", *RUN_COLUMNS[3:], "run_id"]
    ]


def _ci(value: float, low: float, high: float, digits: int) -> str:
    if not np.isfinite(value):
        return "n/a (no spread)"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _arm_section(arm: Arm) -> list[str]:
    n_w, n_d, n_r = arm.split.shape
    epochs = arm.runs["epochs"]
    missed = arm.runs[~arm.runs["converged"]]
    lines = [
        f"### {arm.label} (sweep `{arm.sweep_id}`)",
        "",
        f"- settings: {arm.about['settings']}; device: {arm.about['device']}; commit: {arm.about['commit']}",
        f"- sweep overrides: `{arm.about['overrides'] or 'not recorded'}`",
        f"- design: {n_w} weights seeds x {n_d} data seeds x {n_r} repeats = {len(arm.runs)} runs; "
        f"epochs to converge {epochs.mean():.3f} ± {epochs.std(ddof=1):.3f} (mean ± sd, all runs), "
        f"variance {epochs.var(ddof=1):.4f}",
        f"- not converged: {len(missed)}"
        + (
            " — entered at max_epochs (right-censored: the parts they land in are lower bounds): "
            + ", ".join(
                f"seed {r.weights} data_seed {r.data} repeat {r.repeat} ({r.outcome}, run {r.run_id})"
                for r in missed.itertuples()
            )
            if len(missed)
            else ""
        ),
        "",
        "| part | what varies | variance (epochs²) [95% CI] | sd (epochs) | share [95% CI] |",
        "| --- | --- | --- | ---: | --- |",
    ]
    for row in arm.split.rows():
        part = str(row["part"])
        variance = _ci(float(row["variance"]), float(row["variance_ci_low"]), float(row["variance_ci_high"]), 4)
        share = _ci(float(row["share"]), float(row["share_ci_low"]), float(row["share_ci_high"]), 3)
        lines.append(f"| {part} | {MEANING[part]} | {variance} | {float(row['sd']):.3f} | {share} |")
    return [*lines, ""]


def markdown(arms: Sequence[Arm], experiment: str, command: str) -> str:
    resamples = arms[0].split.n_resamples if arms else 0
    lines = [
        f"## Where the epochs-to-converge spread comes from ({experiment})",
        "",
        f"Date: {dt.date.today().isoformat()}. Command: `{command}`",
        "",
        "Two-way crossed random-effects model y = mu + weights + data + weights x data + repeat, each part an "
        "independent draw; its variance estimated by ANOVA expected mean squares (statsmodels `ols` + "
        "`anova_lm` on the balanced design; equal to REML when none is negative, a negative estimate set to 0). "
        f"95% CIs: pigeonhole bootstrap ({resamples} resamples: weights seeds and data seeds each redrawn with "
        "replacement, a seed bringing all its runs; scipy.stats.bootstrap, percentile intervals). Share: the "
        "part over the sum of the parts. `seed` drives the initial weights and dropout, `data_seed` the data "
        "order and sampling (NCF's negatives).",
        "",
    ]
    for arm in arms:
        lines += _arm_section(arm)
    return "\n".join(lines)


def figure(arms: Sequence[Arm]) -> Figure:
    """Two panels (variance, share), a group of bars per part, one bar per arm."""
    fig = Figure(figsize=(10, 4.8))
    axes = fig.subplots(1, 2)
    parts = list(dict.fromkeys(p for arm in arms for p in arm.split.parts))
    width = 0.8 / max(len(arms), 1)
    x = np.arange(len(parts))
    for panel, (key, label) in zip(
        axes, (("variance", "variance (epochs²)"), ("share", "share of the variance")), strict=True
    ):
        for i, arm in enumerate(arms):
            values = getattr(arm.split, key)
            cis = getattr(arm.split, f"{key}_ci")
            mid = np.array([values.get(p, np.nan) for p in parts])
            low = np.array([cis.get(p, (np.nan, np.nan))[0] for p in parts])
            high = np.array([cis.get(p, (np.nan, np.nan))[1] for p in parts])
            err = np.vstack([np.clip(mid - low, 0, None), np.clip(high - mid, 0, None)])
            panel.bar(
                x + (i - (len(arms) - 1) / 2) * width,
                mid,
                width,
                yerr=err,
                capsize=3,
                label=f"{arm.label} ({len(arm.runs)} runs)",
            )
        panel.set_xticks(x, parts)
        panel.set_ylabel(label)
    confidence = round(100 * arms[0].split.confidence) if arms else 95
    handles, labels = axes[0].get_legend_handles_labels()
    # below the panels, where no whisker runs into it
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=max(len(arms), 1),
        title=(
            f"bar: ANOVA estimate; whiskers: {confidence}% pigeonhole bootstrap percentile CI "
            "over weights and data seeds"
        ),
        fontsize="small",
        title_fontsize="small",
    )
    axes[1].set_ylim(0, 1.05)
    fig.suptitle("Where the epochs-to-converge variance comes from")
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    return fig


def write(arms: Sequence[Arm], text: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in FILES]
    parts_table(arms).to_csv(paths[0], index=False)
    runs_table(arms).to_csv(paths[1], index=False)
    paths[2].write_text(text + "\n")
    figure(arms).savefig(paths[3], dpi=110)
    return paths
