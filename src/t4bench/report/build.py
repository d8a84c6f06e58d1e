"""Selection → Document: the tables formatted for reading, the figures drawn into the folder, and
the notes that keep the report honest (what was counted, what was missing, what was skipped)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from t4bench.report import figures, tables
from t4bench.report.document import Document, Section, cell, pm
from t4bench.report.query import PRICE_PARAM, RunFilter, Selection


@dataclass
class Options:
    baseline: str = "t4"
    prices: dict[str, float] = field(default_factory=dict)
    optuna_storage: str | None = None
    study: str | None = None


def _ttt_display(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in table.itertuples(index=False):
        rows.append(
            {
                "model": r.model,
                "scale": r.scale,
                "hw": r.hw,
                "hw.count": r.hw_count,
                "runs": r.runs,
                "converged": f"{r.converged}/{r.runs}",
                "not converged": r.other_outcomes or "–",
                "time to train olympic (s)": cell(r.ttt_olympic_s, 4),
                "time to train mean ± std (s)": pm(r.ttt_mean_s, r.ttt_std_s, 4),
                "epochs olympic": cell(r.epochs_olympic),
                "epochs mean ± std": pm(r.epochs_mean, r.epochs_std),
                "throughput": f"{cell(r.throughput, 4)} {r.throughput_unit}",
                "energy to train (kJ)": cell(r.energy_kj, 4) + (f" ({r.energy_runs} runs)" if r.energy_runs else ""),
                "$/GPU-hour": cell(r.price_per_gpu_hour),
                "cost to train ($)": cell(r.cost, 3),
            }
        )
    return pd.DataFrame(rows)


def _ratio_display(frame: pd.DataFrame, columns: Mapping[str, str]) -> pd.DataFrame:
    kept = [c for c in frame.columns if c not in columns and c != "data"]
    shown = frame[kept].rename(columns={"hw_count": "hw.count"})
    for source, title in columns.items():
        shown[title] = [cell(v) for v in frame[source]]
    return shown


def _throughput_display(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": r.model,
                "scale": r.scale,
                "hw": r.hw,
                "hw.count": r.hw_count,
                "runs": r.runs,
                "throughput mean ± std": f"{pm(r.throughput_mean, r.throughput_std, 4)} {r.throughput_unit}",
            }
            for r in frame.itertuples(index=False)
        ]
    )


def _runs_section(sel: Selection, flt: RunFilter, tracking_uri: str, validation_runs: int) -> Section:
    runs = sel.runs
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(runs["outcome"].replace("", "unknown").value_counts().items()))
    paragraphs = [
        f"Tracking store `{tracking_uri}`, experiments {', '.join(sorted(set(runs['experiment'])))}; filter: "
        f"{flt.describe()}.",
        f"{len(runs)} training runs ({outcomes}); from {runs['start_time'].min():%Y-%m-%d %H:%M} to "
        f"{runs['start_time'].max():%Y-%m-%d %H:%M} UTC.",
    ]
    if sel.running:
        paragraphs.append(f"{sel.running} runs still RUNNING were not counted (no outcome yet).")
    if validation_runs:
        paragraphs.append(f"{validation_runs} runs of held-out validations are counted in their own section only.")
    return Section("Runs", paragraphs)


def _ttt_section(table: pd.DataFrame, opts: Options, out: Path) -> Section:
    missing_price = sorted(set(table.loc[table["price_per_gpu_hour"].isna(), "hw"]))
    paragraphs = [
        "Time to train counts from MLPerf `run_start` to the evaluation that reached the target. The olympic "
        "mean (MLPerf's score) drops the fastest and the slowest run; a run that did not converge counts as "
        "the slowest, so with two or more of them the olympic mean is undefined (–). Mean ± std (sample) are "
        "over converged runs only; every run is counted in `runs`.",
        "Energy to train is the GPU energy (NVML) over the timed span, mean over converged runs that measured "
        "it (CPU runs have none). Cost to train = olympic time × GPUs × price per GPU-hour.",
    ]
    if missing_price:
        paragraphs.append(
            f"No price for {', '.join(missing_price)}: give one with `--price HW=USD_PER_GPU_HOUR` "
            f"(or the hw profile's `{PRICE_PARAM}`)."
        )
    if opts.prices:
        paragraphs.append(
            "Prices set on the command line: "
            + ", ".join(f"{k} ${v}/GPU-hour" for k, v in sorted(opts.prices.items()))
            + "."
        )
    figs = figures.time_to_train_bars(table, out)
    return Section("Time to train", paragraphs, _ttt_display(table), figs)


def build(sel: Selection, flt: RunFilter, opts: Options, out: Path, tracking_uri: str) -> tuple[Document, list[str]]:
    """The document, and notes for the console (skipped parts)."""
    doc = Document("t4bench report")
    notes: list[str] = []
    # held-out validation runs mix tuned and reference hyperparameters: their own section only
    validation = figures.validation_sets(sel.runs)
    runs = sel.runs.drop(index=validation.index)
    doc.sections.append(_runs_section(sel, flt, tracking_uri, len(validation)))
    ttt = tables.time_to_train(runs, opts.prices)
    if not ttt.empty:
        doc.sections.append(_ttt_section(ttt, opts, out))
        speed = tables.speedup(ttt, opts.baseline)
        if not speed.empty:
            doc.sections.append(
                Section(
                    f"Speed-up against {opts.baseline}",
                    [
                        "Same model, scale and GPU count; ratio of olympic-mean times to train (above 1: faster than "
                        f"{opts.baseline}); energy and cost ratios below 1 are cheaper than {opts.baseline}."
                    ],
                    _ratio_display(
                        speed, {"speedup": "speed-up", "energy_ratio": "energy ratio", "cost_ratio": "cost ratio"}
                    ),
                )
            )
        else:
            notes.append(f"no speed-up table: no configuration has both {opts.baseline} and another hw")
        scale = tables.scaling(ttt)
        doc.sections.append(
            Section(
                "Scaling with GPU count",
                [
                    "Against 1 GPU of the same hw: speed-up T1/Tn, efficiency T1/(n·Tn), and the epochs to converge "
                    "relative to 1 GPU (a bigger global batch can need more epochs)."
                ],
                _ratio_display(
                    scale, {"speedup_vs_1": "speed-up", "efficiency": "efficiency", "epochs_vs_1": "epochs vs 1 GPU"}
                )
                if not scale.empty
                else None,
                figures.epochs_per_count(ttt, out),
            )
        )
        if scale.empty:
            doc.sections[-1].paragraphs.append("No configuration ran at both 1 and more GPUs: no scaling ratios.")
        doc.sections.append(
            Section(
                "Seeds",
                [
                    "Time to train of every converged seed (points) over its box; red crosses at the top are runs that "
                    "did not converge. The CDF of a configuration ends at its converged fraction."
                ],
                None,
                figures.seed_distributions(runs, out) + figures.time_to_train_cdfs(runs, out),
            )
        )
    elif len(runs):
        notes.append("no time-to-train table: only synthetic (throughput) runs match")
    thr = tables.throughput(runs)
    if not thr.empty:
        doc.sections.append(
            Section(
                "Throughput (synthetic data)",
                [
                    "`input=synthetic` runs: reference-size models on generated tensors; throughput only, "
                    "no time to train."
                ],
                _throughput_display(thr),
            )
        )
    if not validation.empty:
        doc.sections.append(_validation_section(validation, out))
    if opts.optuna_storage:
        doc.sections.append(_optuna_section(opts, out, notes))
    return doc, notes


def _validation_section(validation: pd.DataFrame, out: Path) -> Section:
    rows = []
    for (study, name), group in validation.groupby(["study", "set"], sort=True):
        epochs = group["epochs_to_converge"]
        rows.append(
            {
                "study": study,
                "set": name,
                "seeds": len(group),
                "converged": f"{int(group['converged'].sum())}/{len(group)}",
                "epochs mean ± std": pm(float(epochs.mean()), float(epochs.std(ddof=1))),
            }
        )
    return Section(
        "Tuned vs reference (held-out seeds)",
        [
            "Runs of `python -m t4bench.sweep.holdout`: the best trial's and the reference hyperparameters re-run on "
            "seeds the sweep never used (tuning seeds never judge the tuning)."
        ],
        pd.DataFrame(rows),
        figures.tuned_vs_reference(validation, out),
    )


def _optuna_section(opts: Options, out: Path, notes: list[str]) -> Section:
    from t4bench.report.optuna_figures import load_study, study_figures, study_summary

    assert opts.optuna_storage is not None
    study = load_study(opts.optuna_storage, opts.study)
    paths, fig_notes = study_figures(study, out)
    notes.extend(fig_notes)
    summary = study_summary(study)
    best = summary.pop("best_params", None)
    text = [", ".join(f"{k} {cell(v)}" for k, v in summary.items())]
    if best:
        text.append("Best parameters: " + ", ".join(f"`{k}={cell(v, 4)}`" for k, v in best.items()))
    return Section(f"Optuna study {study.study_name}", text + fig_notes, None, paths)
