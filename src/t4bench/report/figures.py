"""The study's figures (matplotlib `Figure` objects: no pyplot state, no display), one mark per
statistic and each named in the legend:

- a dot is one run (a seed), jittered sideways only; a diamond is the olympic mean (MLPerf's
  score); a box spans the quartiles of the converged runs;
- a run that did not converge has no time or epoch count, so it is never drawn as a point (any
  height would be invented): a row of counts along the top says "2 of 5 not converged" above its
  configuration;
- configurations are named by what differs between them (`max_epochs=3`, `hparams=tuned`; the
  config id after them), as the time-to-train table's `settings` column names them;
- whole or quarter epochs stay dots (never a continuous band or bar).

Builders return (file name, Figure) pairs and say why a figure is left out instead of drawing
an empty one; `save` writes them. Tests read the data back from the Figure objects.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from t4bench.report import configs as config_labels
from t4bench.report import tables
from t4bench.sweep.stats import olympic_mean

_DPI = 110
#: configurations drawn at most per figure (a sweep has dozens: the ones with most runs are drawn)
MAX_CONFIGS = 12
Drawn = tuple[str, Figure]

DOT = "run (one seed)"
OLYMPIC = "olympic mean (MLPerf score)"
BOX = "box: median, quartiles, min–max of converged runs"
#: the row of counts along the top (its texts carry this gid; no legend entry: the text says it)
MISSED = "missed"
_SETS = "held-out"
#: characters per line of a configuration's tick label (its settings wrap at spaces)
_LABEL_WIDTH = 24


def _slug(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(str(p) for p in parts))


def save(drawn: list[Drawn], out: Path) -> list[Path]:
    paths = []
    for name, fig in drawn:
        fig.tight_layout()
        fig.savefig(out / name, dpi=_DPI)
        paths.append(out / name)
    return paths


def _per_model(runs: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    for (model, scale), group in tables.training_runs(runs).groupby(["model", "scale"], sort=True):
        yield str(model), str(scale), group


def _configs(group: pd.DataFrame) -> tuple[list[tuple[str, pd.DataFrame]], str]:
    """(tick label, runs) per configuration, at most MAX_CONFIGS (most runs first), and the x
    axis label that says how many were drawn."""
    keyed = list(group.groupby(["hw", "hw_count", "config"], sort=True))
    keyed.sort(key=lambda kv: -len(kv[1]))
    shown = sorted(keyed[:MAX_CONFIGS], key=lambda kv: kv[0])
    settings = {} if (group["hw"] == _SETS).all() else config_labels.settings(group)
    out = []
    for (hw, count, cid), g in shown:
        if hw == _SETS:  # a held-out validation set: its name is the configuration
            out.append((f"{cid}\n({len(g)} runs)", g))
        else:
            differs = textwrap.fill(settings.get(str(cid)) or f"hparams={g['hparams'].iloc[0] or '?'}", _LABEL_WIDTH)
            out.append((f"{hw}×{count}\n{differs}\n#{cid} ({len(g)} runs)", g))
    xlabel = "configuration (hw×GPUs, settings that differ, config id)"
    if len(keyed) > len(shown):
        xlabel += f": {len(shown)} of {len(keyed)}, those with the most runs"
    return out, xlabel


def _jitter(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(-0.12, 0.12, n)


def _per_run_figure(group: pd.DataFrame, column: str, ylabel: str, title: str, box: bool = True) -> Figure:
    """Dots per converged run of `column`, box over them (3+), olympic mean (not converged =
    slowest), and along the top the count of runs that did not converge (text, never a point).
    Each kind of mark carries a gid (run / olympic / missed) so tests can read them back."""
    configs, xlabel = _configs(group)
    fig = Figure(figsize=(max(4.8, 1.0 + 1.5 * len(configs)), 4.4))
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)  # fixed jitter: the same report twice gives the same figure
    values = [g.loc[g["converged"], column].to_numpy(dtype=float) for _, g in configs]
    # x in data units (under its configuration), y in axes units: the counts' row sits above every
    # point whatever the scale, and is no value on the y axis
    counts_row = blended_transform_factory(ax.transData, ax.transAxes)
    labels = {"dot": DOT, "box": BOX, "olympic": OLYMPIC}
    for i, ((_, g), v) in enumerate(zip(configs, values, strict=True), start=1):
        if box and len(v) >= 3:
            drawn = ax.boxplot([v], positions=[i], widths=0.5, whis=(0, 100), showfliers=False, manage_ticks=False)
            drawn["boxes"][0].set_label(labels.pop("box", "_"))
        ax.scatter(
            i + _jitter(rng, len(v)), v, s=16, color="#4c72b0", zorder=3, label=labels.pop("dot", "_"), gid="run"
        )
        score = olympic_mean([x if ok else np.nan for x, ok in zip(g[column], g["converged"], strict=True)])
        if np.isfinite(score):
            ax.scatter(
                [i], [score], marker="D", s=46, color="black", zorder=4, label=labels.pop("olympic", "_"), gid="olympic"
            )
        missed = int((~g["converged"]).sum())
        if missed:
            ax.text(
                i, 0.97, f"{missed} of {len(g)}\nnot converged", transform=counts_row, ha="center", va="top",
                fontsize=7, color="#c44e52", gid=MISSED,
            )  # fmt: skip
    if any((~g["converged"]).any() for _, g in configs):  # room for the row above the highest point
        low, high = ax.get_ylim()
        ax.set_ylim(low, high + 0.25 * (high - low))
    ax.set_xticks(range(1, len(configs) + 1), [name for name, _ in configs], fontsize=7)
    ax.set_xlim(0.4, len(configs) + 0.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return fig


def time_to_train(runs: pd.DataFrame, reasons: list[str]) -> list[Drawn]:
    """Time to train of every run per configuration, one figure per model and scale."""
    drawn = []
    for model, scale, group in _per_model(runs):
        if not group["converged"].any():
            reasons.append(f"No time-to-train figure for {model} ({scale}): none of its {len(group)} runs converged.")
            continue
        fig = _per_run_figure(group, "time_to_train_s", "time to train (s)", f"{model} ({scale}): time to train")
        drawn.append((f"ttt_{_slug(model, scale)}.png", fig))
    return drawn


def epochs(runs: pd.DataFrame, reasons: list[str]) -> list[Drawn]:
    """Epochs to converge of every run per configuration (evaluations fall on whole or
    fractional epochs: dots, never a band)."""
    drawn = []
    for model, scale, group in _per_model(runs):
        if not group["converged"].any():
            reasons.append(f"No epochs figure for {model} ({scale}): none of its {len(group)} runs converged.")
            continue
        fig = _per_run_figure(
            group, "epochs_to_converge", "epochs to converge", f"{model} ({scale}): epochs to converge"
        )
        drawn.append((f"epochs_{_slug(model, scale)}.png", fig))
    return drawn


def time_to_train_cdfs(runs: pd.DataFrame, reasons: list[str]) -> list[Drawn]:
    """Empirical CDF of time-to-train per configuration over all its runs: a curve that ends
    below 1 is the fraction that never converged."""
    drawn = []
    for model, scale, group in _per_model(runs):
        configs, _ = _configs(group)
        curves = [(name, g) for name, g in configs if g["converged"].any()]
        if not curves:
            reasons.append(f"No CDF for {model} ({scale}): none of its runs converged.")
            continue
        fig = Figure(figsize=(5.6, 3.8))
        ax = fig.add_subplot()
        for name, g in curves[:8]:
            times = np.sort(g.loc[g["converged"], "time_to_train_s"].to_numpy(dtype=float))
            fraction = np.arange(1, len(times) + 1) / len(g)
            ax.step(
                np.concatenate([[0.0], times]),
                np.concatenate([[0.0], fraction]),
                where="post",
                label=f"{name.replace(chr(10), ' ')}: {len(times)} of {len(g)} converged",
            )
        ax.set_xlabel("time to train (s)")
        ax.set_ylabel("fraction of runs converged (empirical CDF)")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{model} ({scale}): time-to-train CDF")
        ax.legend(fontsize=6)
        drawn.append((f"cdf_{_slug(model, scale)}.png", fig))
    return drawn


VALIDATION_RE = re.compile(r"^(?P<study>.+)-validate-(?P<set>.+)$")


def validation_sets(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs of a held-out validation (`python -m t4bench.sweep.holdout` tags their sweep_id
    `<study>-validate-best-t<N>` / `<study>-validate-reference`), with study and set columns."""
    found = runs["sweep_id"].str.extract(VALIDATION_RE)
    picked = runs.assign(study=found["study"], set=found["set"]).dropna(subset=["study"])
    return tables.training_runs(picked)


def tuned_vs_reference(runs: pd.DataFrame, reasons: list[str]) -> list[Drawn]:
    """Epochs to converge of each validation set on the held-out seeds, per study."""
    drawn = []
    for study, group in validation_sets(runs).groupby("study", sort=True):
        if not group["converged"].any():
            reasons.append(f"No validation figure for {study}: none of its runs converged.")
            continue
        # one "configuration" per set, whatever its params: the set is what the study compares
        sets = group.assign(config=group["set"], hw_count=1, hw=_SETS, hparams=group["set"])
        fig = _per_run_figure(
            sets, "epochs_to_converge", "epochs to converge (held-out seeds)", f"{study}: tuned vs reference", box=False
        )
        drawn.append((f"validation_{_slug(study)}.png", fig))
    return drawn
