"""A sweep's Optuna figures: optimization history and parameter importances, drawn by
`optuna.visualization.matplotlib` (it draws through pyplot, so the Agg backend is chosen first:
a report must never need a display)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from t4bench.report.errors import ReportError


class StudyError(ReportError):
    """The study cannot be read."""


def load_study(storage: str, study_name: str | None) -> Any:
    import optuna

    from t4bench.sweep.storage import open_storage

    try:
        store = open_storage(storage)
        names = optuna.get_all_study_names(store)
    except Exception as err:  # any storage error (bad URL, unreadable journal) is bad input here
        raise StudyError(f"--optuna-storage {storage!r} cannot be opened: {err}") from None
    if study_name is None:
        if len(names) != 1:
            raise StudyError(f"--optuna-storage {storage!r} holds studies {names}: name one with --study")
        study_name = names[0]
    if study_name not in names:
        raise StudyError(f"--study {study_name!r} is not in {storage!r} (it holds {names})")
    return optuna.load_study(study_name=study_name, storage=store)


def _save_axes(axes: Any, path: Path) -> Path:
    fig = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
    fig.set_size_inches(6.4, 4.0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def study_figures(study: Any, out: Path) -> tuple[list[Path], list[str]]:
    """PNG paths, and notes on what could not be drawn (e.g. importances need 2+ complete trials)."""
    import optuna
    from optuna.visualization import matplotlib as optuna_plots

    paths: list[Path] = []
    notes: list[str] = []
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    slug = study.study_name.replace("/", "_")
    if complete:
        paths.append(_save_axes(optuna_plots.plot_optimization_history(study), out / f"optuna_history_{slug}.png"))
    else:
        notes.append(f"study {study.study_name}: no complete trial, no optimization history")
    if len(complete) >= 2 and complete[0].params:
        try:
            axes = optuna_plots.plot_param_importances(study)
            paths.append(_save_axes(axes, out / f"optuna_importances_{slug}.png"))
        except (ValueError, RuntimeError) as err:  # e.g. every trial has the same parameters
            notes.append(f"study {study.study_name}: no parameter importances ({err})")
    else:
        notes.append(f"study {study.study_name}: parameter importances need 2+ complete trials with parameters")
    return paths, notes


def study_summary(study: Any) -> dict[str, Any]:
    import optuna

    states: dict[str, int] = {}
    for trial in study.trials:
        states[trial.state.name.lower()] = states.get(trial.state.name.lower(), 0) + 1
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    summary: dict[str, Any] = {"study": study.study_name, "trials": len(study.trials), **states}
    if complete:
        best = study.best_trial
        summary.update({"best_trial": best.number, "best_value": best.value, "best_params": best.params})
    return summary
