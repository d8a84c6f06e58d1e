"""The R740 study's published figures (t4bench.report.published) beside the store's runs: two
sections of the report and one figure in the style of the study's figure 1 (epochs to converge per
model and GPU count, the published values marked).

Measured figures come from the time-to-train table (`tables.time_to_train`: olympic means over
runs that did not share a GPU); every published figure gets a row even without runs, and every
measured row says when the study has no figure for it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from t4bench.report import figures, published, tables
from t4bench.report.document import Section, cell, pm
from t4bench.report.published import Published

TITLE_SPEEDUP = "Beside the R740 study: speed-up"
TITLE_EPOCHS = "Beside the R740 study: epochs to converge"
FIGURE = "study_r740_epochs.png"
NO_RUNS = "no runs"


def _ordered(pair: Iterable[str], study: Published) -> tuple[str, str]:
    """(slower, faster) as the study names them: its slower GPU first, then its faster, then by name."""
    rank = {study.slower: 0, study.faster: 1}
    a, b = sorted(pair, key=lambda hw: (rank.get(hw, 2), hw))
    return a, b


def _pair_note(model: str, count: int, pair: tuple[str, str], study: Published) -> str:
    published = study.speedup.get(model)
    notes = []
    if published is None:
        notes.append("the study publishes no speed-up for this model")
    else:
        if pair != study.hws:
            notes.append(f"the study's figure is {study.faster} over {study.slower}, not this pair")
        if count < published.min_count:
            notes.append(f"the study's figure is for {published.min_count}+ GPUs")
        if published.measure != "time":
            notes.append(f"the study's figure is a {published.measure} ratio")
    return "; ".join(notes)


def speedup_rows(ttt: pd.DataFrame, study: Published) -> pd.DataFrame:
    """One row per configuration measured on two hw profiles (every pair), then one per study
    model with no such pair, then the overall range."""
    rows = []
    measured_models: set[str] = set()
    study_pair: list[float] = []
    for key, group in ttt.groupby(["model", "scale", "data", "hw_count", "config"], sort=True):
        by_hw = {str(r.hw): r for r in group.itertuples(index=False)}
        for pair in itertools.combinations(sorted(by_hw), 2):
            slower, faster = _ordered(pair, study)
            a, b = by_hw[slower], by_hw[faster]
            model, count = str(key[0]), int(key[3])
            speed = a.ttt_olympic_s / b.ttt_olympic_s
            measured_models.add(model)
            if (slower, faster) == study.hws and math.isfinite(speed):
                study_pair.append(speed)
            published = study.speedup.get(model)
            note = _pair_note(model, count, (slower, faster), study)
            if not math.isfinite(speed):
                note = "; ".join(filter(None, ["olympic time undefined on one side (2+ runs not converged)", note]))
            rows.append(
                {
                    "model": model,
                    "scale": key[1],
                    "hw.count": count,
                    "config": key[4],
                    "measured pair": f"{faster} over {slower}",
                    "measured speed-up": cell(speed),
                    "measured throughput ratio": cell(b.throughput / a.throughput),
                    f"study ({study.faster} over {study.slower})": published.text() if published else "–",
                    "note": note or "–",
                }
            )
    for model in sorted(set(study.speedup) - measured_models):
        rows.append(
            {
                "model": model,
                "scale": "reference",
                "hw.count": "–",
                "config": "–",
                "measured pair": "–",
                "measured speed-up": NO_RUNS,
                "measured throughput ratio": NO_RUNS,
                f"study ({study.faster} over {study.slower})": study.speedup[model].text(),
                "note": "no configuration of this model ran on two hw profiles",
            }
        )
    span = f"{min(study_pair):.3g}–{max(study_pair):.3g}×" if study_pair else NO_RUNS
    rows.append(
        {
            "model": "overall",
            "scale": "–",
            "hw.count": "–",
            "config": "–",
            "measured pair": f"{study.faster} over {study.slower}",
            "measured speed-up": span,
            "measured throughput ratio": "–",
            f"study ({study.faster} over {study.slower})": study.overall.text(),
            "note": "range over the rows above of the study's pair"
            if study_pair
            else f"no configuration ran on both {study.slower} and {study.faster}",
        }
    )
    return pd.DataFrame(rows)


def _published_epochs(model: str, hw: str, count: int, study: Published) -> str:
    value = study.epochs.get(model, {}).get(hw, {}).get(count)
    if value is not None:
        return cell(value)
    if hw not in study.hws:
        return f"– (the study ran {study.slower} and {study.faster} only)"
    if model in study.same_epochs:
        other = study.faster if hw == study.slower else study.slower
        return f"about as on {other} at {count} GPUs (no number published)"
    return "– (not published)"


def _scaling(model: str, hw: str, count: int, study: Published) -> str:
    value = study.scaling.get(model, {}).get(hw, {}).get(count)
    return f"study: {value:g}× the time-to-train speed of one {hw}" if value is not None else ""


def epochs_rows(ttt: pd.DataFrame, study: Published) -> pd.DataFrame:
    rows = []
    measured: set[tuple[str, str, int]] = set()
    for r in ttt.itertuples(index=False):
        model, hw, count = str(r.model), str(r.hw), int(r.hw_count)
        measured.add((model, hw, count))
        note = "; ".join(
            filter(
                None,
                ["the study is at reference size" if r.scale != "reference" else "", _scaling(model, hw, count, study)],
            )
        )
        rows.append(
            {
                "model": model,
                "scale": r.scale,
                "hw": hw,
                "hw.count": count,
                "config": r.config,
                "converged": f"{r.converged}/{r.runs}",
                "measured epochs mean ± std": pm(r.epochs_mean, r.epochs_std),
                "study epochs": _published_epochs(model, hw, count, study),
                "note": note or "–",
            }
        )
    for model, by_hw in sorted(study.epochs.items()):
        for hw, counts in sorted(by_hw.items()):
            for count, value in sorted(counts.items()):
                if (model, hw, count) not in measured:
                    rows.append(
                        {
                            "model": model,
                            "scale": "reference",
                            "hw": hw,
                            "hw.count": count,
                            "config": "–",
                            "converged": "–",
                            "measured epochs mean ± std": NO_RUNS,
                            "study epochs": cell(value),
                            "note": _scaling(model, hw, count, study) or "–",
                        }
                    )
    return pd.DataFrame(rows)


def epochs_figure(runs: pd.DataFrame, study: Published) -> Figure:
    """One panel per model (published or measured): epochs to converge against GPU count, a
    dashed line with squares per published hw (gid `published:<hw>`), a dot per converged run
    (gid `measured:<hw>`) and a line through the per-count means."""
    done = tables.training_runs(runs)
    done = done[done["converged"]]
    models = sorted({*study.epochs, *map(str, done["model"])})
    fig = Figure(figsize=(3.6 * len(models), 3.4))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    colors = dict(zip(sorted({*study.hws, *map(str, done["hw"])}), itertools.cycle("bgrcmyk"), strict=False))
    for ax, model in zip(axes, models, strict=True):
        for hw, counts in sorted(study.epochs.get(model, {}).items()):
            xs = sorted(counts)
            ax.plot(
                xs,
                [counts[n] for n in xs],
                "s--",
                mfc="none",
                color=colors[hw],
                label=f"{hw} published",
                gid=f"published:{hw}",
            )
        for hw, group in done[done["model"] == model].groupby("hw", sort=True):
            xs = group["hw_count"].to_numpy(dtype=float)
            ax.scatter(
                xs, group["epochs_to_converge"], s=18, color=colors[str(hw)], label=f"{hw} run", gid=f"measured:{hw}"
            )
            means = group.groupby("hw_count")["epochs_to_converge"].mean()
            ax.plot(means.index.to_numpy(), means.to_numpy(), "-", color=colors[str(hw)], alpha=0.6, label=f"{hw} mean")
        ax.set_title(model)
        ax.set_xlabel("GPUs (hw.count)")
        ax.set_ylabel("epochs to converge")
        ax.set_xticks(np.arange(1, 5))
        ax.legend(fontsize=7)
    fig.suptitle("Epochs to converge: published (R740 study, squares) and measured (dots)", fontsize=9)
    return fig


def sections(ttt: pd.DataFrame, runs: pd.DataFrame, out: Path, study: Published | None = None) -> list[Section]:
    """The two sections (the figure saved into `out`); one line each when no run has a time to train."""
    study = study or published.load()
    source = f"Published figures: {study.source} (conf/study/r740.yaml)."
    if ttt.empty:
        why = "No run trained to a target (time to train): nothing to put beside the study's figures."
        return [Section(TITLE_SPEEDUP, [source, why]), Section(TITLE_EPOCHS, [source, why])]
    figs = figures.save([(FIGURE, epochs_figure(runs, study))], out)
    speed = Section(
        TITLE_SPEEDUP,
        [
            source,
            "Every pair of hw profiles that ran the same configuration at the same GPU count: the ratio of "
            "olympic-mean times to train (slower over faster) and of throughputs, beside the study's range. "
            "Runs that shared a GPU are left out, as in the other time tables.",
        ],
        speedup_rows(ttt, study),
    )
    epochs = Section(
        TITLE_EPOCHS,
        [
            source,
            "Epochs to converge per hw and GPU count (mean ± std over converged runs) beside the study's; "
            f"the study gives numbers for {', '.join(sorted(study.epochs))} and says "
            f"{', '.join(study.same_epochs)} need about the same epochs on both GPUs at equal counts.",
        ],
        epochs_rows(ttt, study),
        figs,
    )
    return [speed, epochs]
