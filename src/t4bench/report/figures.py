"""The study's figures as PNG files (matplotlib `Figure` objects: no pyplot state, no display).

Every figure shows runs that did not converge instead of hiding them: the CDFs top out below 1,
the seed plots mark them at the top edge, the bars carry a converged k/n label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from t4bench.report import tables

_DPI = 110


def _slug(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(str(p) for p in parts))


def _label(hw: str, count: int) -> str:
    return f"{hw}×{count}"


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    return path


def _per_model(runs: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    for (model, scale), group in tables.training_runs(runs).groupby(["model", "scale"], sort=True):
        yield str(model), str(scale), group


def time_to_train_bars(table: pd.DataFrame, out: Path) -> list[Path]:
    """Olympic-mean time-to-train per hw×count, one figure per model and scale; the error bar is
    the std over converged runs."""
    paths = []
    for (model, scale), group in table.groupby(["model", "scale"], sort=True):
        fig = Figure(figsize=(max(4.0, 1.0 + 0.8 * len(group)), 3.6))
        ax = fig.add_subplot()
        labels = [_label(h, c) for h, c in zip(group["hw"], group["hw_count"], strict=True)]
        heights = group["ttt_olympic_s"].to_numpy(dtype=float)
        shown = np.where(np.isfinite(heights), heights, 0.0)
        bars = ax.bar(labels, shown, yerr=group["ttt_std_s"].fillna(0.0).to_numpy(), capsize=4, color="#4c72b0")
        errors = group["ttt_std_s"].fillna(0.0)
        for bar, k, n, h, err in zip(bars, group["converged"], group["runs"], heights, errors, strict=True):
            text = f"{k}/{n}" if math.isfinite(h) else f"{k}/{n}\nno olympic mean"
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, bar.get_height() + err),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_ylabel("time to train (s), olympic mean")
        ax.set_title(f"{model} ({scale}): time to train, converged k/n")
        paths.append(_save(fig, out / f"ttt_{_slug(model, scale)}.png"))
    return paths


def epochs_per_count(table: pd.DataFrame, out: Path) -> list[Path]:
    """Epochs to converge (mean ± std) against the GPU count, one line per hw."""
    paths = []
    for (model, scale), group in table.groupby(["model", "scale"], sort=True):
        fig = Figure(figsize=(4.8, 3.4))
        ax = fig.add_subplot()
        for hw, line in group.groupby("hw", sort=True):
            ax.errorbar(
                line["hw_count"],
                line["epochs_mean"],
                yerr=line["epochs_std"].fillna(0.0),
                marker="o",
                capsize=4,
                label=str(hw),
            )
        ax.set_xlabel("GPUs (hw.count)")
        ax.set_ylabel("epochs to converge")
        ax.set_xticks(sorted(group["hw_count"].unique()))
        ax.set_title(f"{model} ({scale}): epochs per GPU count")
        ax.legend(fontsize=8)
        paths.append(_save(fig, out / f"epochs_{_slug(model, scale)}.png"))
    return paths


def _configs(group: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    return [(_label(str(h), int(c)), g) for (h, c), g in group.groupby(["hw", "hw_count"], sort=True)]


def seed_distributions(runs: pd.DataFrame, out: Path) -> list[Path]:
    """Box + strip of time-to-train over seeds per hw×count; runs that did not converge are red
    crosses on the top edge."""
    paths = []
    for model, scale, group in _per_model(runs):
        configs = _configs(group)
        fig = Figure(figsize=(max(4.0, 1.0 + 1.0 * len(configs)), 3.6))
        ax = fig.add_subplot()
        times = [g.loc[g["converged"], "time_to_train_s"].to_numpy(dtype=float) for _, g in configs]
        ax.boxplot(times, tick_labels=[name for name, _ in configs], showfliers=False)
        top = max((t.max() for t in times if len(t)), default=1.0) * 1.08
        rng = np.random.default_rng(0)  # fixed jitter: the same report twice gives the same figure
        label: str | None = "not converged"
        for i, ((_, g), t) in enumerate(zip(configs, times, strict=True), start=1):
            ax.scatter(i + rng.uniform(-0.12, 0.12, len(t)), t, s=14, color="#4c72b0", zorder=3)
            missed = int((~g["converged"]).sum())
            if missed:
                ax.scatter(
                    i + rng.uniform(-0.12, 0.12, missed),
                    [top] * missed,
                    marker="x",
                    color="#c44e52",
                    zorder=3,
                    label=label,
                )
                label = None  # one legend entry
        if label is None:
            ax.legend(fontsize=8)
        ax.set_ylabel("time to train (s)")
        ax.set_title(f"{model} ({scale}): seeds")
        paths.append(_save(fig, out / f"seeds_{_slug(model, scale)}.png"))
    return paths


def time_to_train_cdfs(runs: pd.DataFrame, out: Path) -> list[Path]:
    """Empirical CDF of time-to-train per hw×count over all its runs: a curve that ends below 1
    is the fraction that never converged."""
    paths = []
    for model, scale, group in _per_model(runs):
        fig = Figure(figsize=(4.8, 3.4))
        ax = fig.add_subplot()
        for name, g in _configs(group):
            times = np.sort(g.loc[g["converged"], "time_to_train_s"].to_numpy(dtype=float))
            if not len(times):
                continue
            fraction = np.arange(1, len(times) + 1) / len(g)
            ax.step(
                np.concatenate([[0.0], times]),
                np.concatenate([[0.0], fraction]),
                where="post",
                label=f"{name} ({len(times)}/{len(g)})",
            )
        ax.set_xlabel("time to train (s)")
        ax.set_ylabel("fraction of runs converged")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{model} ({scale}): time-to-train CDF")
        ax.legend(fontsize=8)
        paths.append(_save(fig, out / f"cdf_{_slug(model, scale)}.png"))
    return paths


VALIDATION_RE = re.compile(r"^(?P<study>.+)-validate-(?P<set>.+)$")


def validation_sets(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs of a held-out validation (`python -m t4bench.sweep.holdout` tags their sweep_id
    `<study>-validate-best-t<N>` / `<study>-validate-reference`), with study and set columns."""
    found = runs["sweep_id"].str.extract(VALIDATION_RE)
    picked = runs.assign(study=found["study"], set=found["set"]).dropna(subset=["study"])
    return tables.training_runs(picked)


def tuned_vs_reference(runs: pd.DataFrame, out: Path) -> list[Path]:
    """Epochs to converge of each validation set on the held-out seeds (box + points), per study."""
    paths = []
    for study, group in validation_sets(runs).groupby("study", sort=True):
        sets = sorted(group["set"].unique(), key=lambda s: (s != "reference", s))
        fig = Figure(figsize=(max(4.0, 1.4 * len(sets)), 3.6))
        ax = fig.add_subplot()
        data = [group.loc[group["set"] == s, "epochs_to_converge"].dropna().to_numpy(dtype=float) for s in sets]
        labels = [f"{s}\n{len(d)}/{int((group['set'] == s).sum())} conv." for s, d in zip(sets, data, strict=True)]
        ax.boxplot(data, tick_labels=labels, showfliers=False)
        rng = np.random.default_rng(0)
        for i, d in enumerate(data, start=1):
            ax.scatter(i + rng.uniform(-0.1, 0.1, len(d)), d, s=14, color="#4c72b0", zorder=3)
        ax.set_ylabel("epochs to converge (held-out seeds)")
        ax.set_title(f"{study}: tuned vs reference")
        paths.append(_save(fig, out / f"validation_{_slug(study)}.png"))
    return paths
