"""Selection → Document: the tables formatted for reading, the figures drawn into the folder, and
the notes that keep the report honest (what was counted, what was missing, what was skipped)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from t4bench.report import figures, presets, tables
from t4bench.report import study as r740
from t4bench.report.document import Document, Section, cell, pm
from t4bench.report.query import PRICE_PARAM, RunFilter, Selection

_THROUGHPUT = "Throughput (synthetic data)"
_VALIDATION = "Tuned vs reference (held-out seeds)"


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
                "config": r.config,
                "settings": r.settings,
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


def shown_uri(uri: str) -> str:
    """The store as a report may print it: a file store's path relative to the working directory,
    else its file name only (no absolute path of this machine in any output)."""
    if not uri.startswith("sqlite:///"):
        return uri
    path = Path(uri.removeprefix("sqlite:///"))
    try:
        return f"sqlite:///{path.resolve().relative_to(Path.cwd().resolve()).as_posix()}"
    except ValueError:
        return f"sqlite:///…/{path.name}"


def _runs_section(sel: Selection, flt: RunFilter, tracking_uri: str, validation_runs: int) -> Section:
    runs = sel.runs
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(runs["outcome"].replace("", "unknown").value_counts().items()))
    n_configs = len(tables.training_runs(runs).drop_duplicates(tables.GROUP))
    paragraphs = [
        f"Tracking store `{shown_uri(tracking_uri)}`, experiments {', '.join(sorted(set(runs['experiment'])))}; "
        f"filter: {flt.describe()}.",
        f"{len(runs)} training runs ({outcomes}); from {runs['start_time'].min():%Y-%m-%d %H:%M} to "
        f"{runs['start_time'].max():%Y-%m-%d %H:%M} UTC.",
        f"{n_configs} configurations: runs are grouped by model, scale, hw, GPU count and `config`, a hash of "
        "every setting but the seed (t4bench.report.configs), so the seeds of one setting form a row and each "
        "sweep trial its own; `settings` names the preset and the params that differ between configurations.",
    ]
    shared = int((runs["gpu_share"] > 1).sum())
    if shared:
        paragraphs.append(
            f"{shared} runs shared a GPU with other runs (t4bench.gpu_share > 1): their seconds are not their own, "
            "so they are left out of time to train, speed-up and the preset comparison."
        )
    if sel.running:
        paragraphs.append(f"{sel.running} runs still RUNNING were not counted (no outcome yet).")
    if validation_runs:
        paragraphs.append(f"{validation_runs} runs of held-out validations are counted in their own section only.")
    return Section("Runs", paragraphs)


def _ttt_section(table: pd.DataFrame, opts: Options, figs: list[Path]) -> Section:
    missing_price = sorted(set(table.loc[table["price_per_gpu_hour"].isna(), "hw"]))
    paragraphs = [
        "Time to train counts from MLPerf `run_start` to the evaluation that reached the target. The olympic "
        "mean (MLPerf's score) drops the fastest and the slowest run; a run that did not converge counts as "
        "the slowest, so with two or more of them the olympic mean is undefined (–). Mean ± std (sample) are "
        "over converged runs only; every run is counted in `runs`, and those that did not converge by outcome "
        "in `not converged` (they have no time to train, so no value stands for them). In the figure a dot is "
        "a run, the diamond the olympic mean, the box the median, quartiles and min–max of the converged runs "
        "(3+); the row along the top counts the runs of each configuration that did not converge. "
        "Configurations are named by the settings that differ between them (`settings`).",
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
    return Section("Time to train", paragraphs, _ttt_display(table), figs)


def _speedup_section(ttt: pd.DataFrame, opts: Options) -> Section:
    title = f"Speed-up against {opts.baseline}"
    speed = tables.speedup(ttt, opts.baseline)
    if speed.empty:
        profiles = sorted(set(ttt["hw"]))
        why = (
            f"Speed-up needs two hardware profiles; these runs have one ({profiles[0]})."
            if len(profiles) < 2
            else f"No configuration ran on both {opts.baseline} and another hw (found {', '.join(profiles)}; "
            "`--baseline` picks the reference)."
        )
        return Section(title, [why])
    return Section(
        title,
        [
            "Same model, scale, GPU count and settings; ratio of olympic-mean times to train (above 1: faster than "
            f"{opts.baseline}); energy and cost ratios below 1 are cheaper than {opts.baseline}."
        ],
        _ratio_display(speed, {"speedup": "speed-up", "energy_ratio": "energy ratio", "cost_ratio": "cost ratio"}),
    )


def _ci(prefix: str, row: pd.Series) -> str:
    return f"{cell(row[f'{prefix}_value'])} [{cell(row[f'{prefix}_ci_low'])}, {cell(row[f'{prefix}_ci_high'])}]"


def _presets_section(runs: pd.DataFrame, figs: list[Path]) -> Section:
    table, why = presets.compare(runs)
    title = "Presets compared"
    if table.empty:
        return Section(title, [why], None, figs)
    shown = pd.DataFrame(
        [
            {
                "model": r["model"],
                "scale": r["scale"],
                "hw": r["hw"],
                "hw.count": r["hw_count"],
                "preset (config)": f"{r['settings'] or r['preset']} ({r['config']})",
                "reference config": r["reference_config"],
                "converged preset": r["converged"],
                "converged reference": r["reference_converged"],
                "epochs mean preset": cell(r["mean"]),
                "epochs mean reference": cell(r["reference_mean"]),
                "mean ratio [95 % CI]": _ci("mean_ratio", r),
                "std ratio [95 % CI]": _ci("std_ratio", r),
                "Mann–Whitney p": cell(r["mann_whitney_p"], 2),
            }
            for _, r in table.iterrows()
        ]
    )
    return Section(
        title,
        [
            "Runs of a `hparams=` preset against the `reference` runs of the same model, scale, hw and GPU count: "
            "converged runs of each, and preset/reference ratios of the mean and the std of epochs to converge "
            f"with bootstrap 95 % CIs (scipy, BCa, {presets.N_RESAMPLES} resamples; below 1 the preset needs fewer "
            "epochs / varies less). A run that did not converge counts with the epochs it ran (a lower bound). "
            "The epochs figure shows each run of every configuration."
        ],
        shown,
        figs,
    )


def build(sel: Selection, flt: RunFilter, opts: Options, out: Path, tracking_uri: str) -> tuple[Document, list[str]]:
    """The document, and notes for the console (skipped parts)."""
    doc = Document("t4bench report")
    notes: list[str] = []
    # held-out validation runs mix tuned and reference hyperparameters: their own section only
    validation = figures.validation_sets(sel.runs)
    runs = sel.runs.drop(index=validation.index)
    doc.sections.append(_runs_section(sel, flt, tracking_uri, len(validation)))
    timed = tables.timed_runs(runs)
    ttt = tables.time_to_train(timed, opts.prices)
    if not ttt.empty:
        why: list[str] = []
        section = _ttt_section(ttt, opts, figures.save(figures.time_to_train(timed, why), out))
        section.paragraphs += why
        doc.sections.append(section)
        doc.sections.append(_speedup_section(ttt, opts))
        doc.sections += r740.sections(ttt, timed, out)  # the R740 study's published figures beside these
        scale = tables.scaling(ttt)
        doc.sections.append(
            Section(
                "Scaling with GPU count",
                [
                    "Against 1 GPU of the same hw and settings: speed-up T1/Tn, efficiency T1/(n·Tn), and the epochs "
                    "to converge relative to 1 GPU (a bigger global batch can need more epochs)."
                    if not scale.empty
                    else "Scaling needs runs of one configuration at 1 and at more GPUs; these have none."
                ],
                _ratio_display(
                    scale, {"speedup_vs_1": "speed-up", "efficiency": "efficiency", "epochs_vs_1": "epochs vs 1 GPU"}
                )
                if not scale.empty
                else None,
            )
        )
        why = []
        doc.sections.append(_presets_section(timed, figures.save(figures.epochs(timed, why), out)))
        doc.sections[-1].paragraphs += why
        why = []
        cdfs = figures.save(figures.time_to_train_cdfs(timed, why), out)
        doc.sections.append(
            Section(
                "Converged fraction over time",
                [
                    "Empirical CDF of time to train per configuration: the fraction of its runs that had converged "
                    "by a given time; a curve that ends below 1 is the fraction that never converged.",
                    *why,
                ],
                None,
                cdfs,
            )
        )
    elif len(runs):
        doc.sections.append(Section("Time to train", ["Only synthetic (throughput) runs match: no time to train."]))
        doc.sections += r740.sections(ttt, timed, out)
    thr = tables.throughput(runs)
    if not thr.empty:
        doc.sections.append(
            Section(
                _THROUGHPUT,
                [
                    "`input=synthetic` runs: reference-size models on generated tensors; throughput only, "
                    "no time to train."
                ],
                _throughput_display(thr),
            )
        )
    else:
        doc.sections.append(Section(_THROUGHPUT, ["No `input=synthetic` run matches: no throughput-only table."]))
    if not validation.empty:
        doc.sections.append(_validation_section(validation, out))
    else:
        doc.sections.append(
            Section(
                _VALIDATION, ["No held-out validation runs (`t4bench validate`, sweep id `<study>-validate-<set>`)."]
            )
        )
    if opts.optuna_storage:
        doc.sections.append(_optuna_section(opts, out, notes))
    else:
        doc.sections.append(Section("Optuna study", ["No `--optuna-storage` given: no study history or importances."]))
    return doc, notes


def _validation_section(validation: pd.DataFrame, out: Path) -> Section:
    why: list[str] = []
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
        _VALIDATION,
        [
            "Runs of `python -m t4bench.sweep.holdout`: the best trial's and the reference hyperparameters re-run on "
            "seeds the sweep never used (tuning seeds never judge the tuning)."
        ],
        pd.DataFrame(rows),
        figures.save(figures.tuned_vs_reference(validation, why), out),
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
