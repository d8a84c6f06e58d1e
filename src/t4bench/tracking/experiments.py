"""What a t4bench MLflow experiment says about itself in the UI: its kind and its description.

MLflow 3's UI opens an experiment by its `mlflow.experimentKind` tag: `custom_model_development`
is the classic-ML view (runs table, charts, System metrics); without the tag it guesses, and may
open the GenAI view (traces, evaluations) that has nothing to show for training runs. The
description is the `mlflow.note.content` tag (Markdown, shown above the runs table).

No MLflow import here: plain names and strings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: the experiment tag MLflow's UI reads to choose the experiment's view
KIND_TAG = "mlflow.experimentKind"
#: the classic-ML (model training) kind; the other explicit kinds include genai_development
CLASSIC_ML_KIND = "custom_model_development"
#: the experiment description MLflow's UI shows (Markdown)
DESCRIPTION_TAG = "mlflow.note.content"
#: the prefix of t4bench's training experiments (conf: tracking.experiment = t4bench-<model>)
PREFIX = "t4bench-"


def description(name: str) -> str:
    """The description of experiment `name`: what its runs are and how to compare them."""
    model = name.removeprefix(PREFIX) if name.startswith(PREFIX) else None
    subject = f"`{model}`" if model else "t4bench"
    return (
        f"**t4bench: time-to-train runs of {subject}** (MLPerf Training v0.5 semantics: train to "
        "the target quality or `max_epochs`).\n\n"
        "- One run per training run, named `<model>-<scale>-<hw>x<count>-seed<seed>`. Sweeps are "
        "parent runs (`sweep-...`, params = the sweep's fixed config, tags `t4bench.model/hw/scale`) "
        "with their trial and seed runs nested under them.\n"
        "- Compare: filter `` tags.`t4bench.outcome` = 'converged' ``, group by `t4bench.hw`, "
        "`t4bench.hw_count`, `t4bench.scale`; columns `time_to_train_s`, `epochs_to_converge` "
        "(only on converged runs; `run_train_s`: every run's seconds), `avg_throughput`, "
        "`energy_to_train_kj` (GPU runs).\n"
        "- Charts: `eval_quality`, `train_loss` per evaluation; System metrics tab: CPU and memory "
        "(MLflow's monitor), per GPU `system/gpu_<i>_...` (NVML).\n"
        "- Tables and figures of the study: `python -m t4bench.report` (docs/mlflow_ui.md)."
    )


def tags_for(name: str, text: str | None = None) -> dict[str, str]:
    """The tags a new experiment `name` is created with; `text`: a description other than the
    training experiments' (e.g. for the reports' experiment)."""
    return {KIND_TAG: CLASSIC_ML_KIND, DESCRIPTION_TAG: text or description(name)}


def _unset_kind(value: str | None) -> bool:
    # the UI writes a guess ("..._inferred", "no_inferred_type") for an experiment without a kind;
    # a kind someone chose stays
    return not value or value.endswith("_inferred") or value == "no_inferred_type"


def missing_tags(name: str, tags: Mapping[str, str]) -> dict[str, str]:
    """What an existing experiment lacks of `tags_for(name)` (a description someone wrote stays)."""
    missing = {}
    if _unset_kind(tags.get(KIND_TAG)):
        missing[KIND_TAG] = CLASSIC_ML_KIND
    if not tags.get(DESCRIPTION_TAG):
        missing[DESCRIPTION_TAG] = description(name)
    return missing


#: where `mlflow ui` / `mlflow server` listen by default
DEFAULT_UI = "http://127.0.0.1:5000"
#: the query MLflow 3.17's UI reads (URLSearchParams `workflowType`) to open the classic-ML
#: (model training) side instead of its default GenAI side
CLASSIC_ML_QUERY = "workflowType=machine_learning"


def default_tracking_uri() -> str:
    """Where `python -m t4bench` tracks (conf/config.yaml's tracking.uri): MLFLOW_TRACKING_URI,
    else ./mlflow.db; the default of every command that reads the runs back."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def ui_url(tracking_uri: str, experiment_id: str) -> str:
    """The experiment's runs table in the classic-ML view: on the tracking server itself, or
    for a file store on `mlflow ui`'s default address."""
    base = tracking_uri.rstrip("/") if tracking_uri.startswith(("http://", "https://")) else DEFAULT_UI
    return f"{base}/#/experiments/{experiment_id}/runs?{CLASSIC_ML_QUERY}"


def ui_line(tracking_uri: str, experiment_id: str) -> str:
    """One console line: the URL, and for a file store the command that serves it."""
    url = ui_url(tracking_uri, experiment_id)
    if tracking_uri.startswith(("http://", "https://")):
        return f"t4bench: MLflow UI: {url}"
    return f"t4bench: MLflow UI: {url} (after `mlflow ui --backend-store-uri {tracking_uri}`)"
