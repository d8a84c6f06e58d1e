"""Log a report folder as the artifacts of a "report" MLflow run, so the tables and figures sit
in the same store (and UI) as the runs they summarise. The run is never left RUNNING."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mlflow.tracking import MlflowClient

from t4bench.report.query import REPORT_TAG
from t4bench.tracking import experiments, names, run_names

REPORT_EXPERIMENT = "t4bench-reports"
REPORT_DESCRIPTION = (
    "Reports made by `python -m t4bench.report`: each run holds one report folder (report.md, "
    "report.html, PNG figures) under its artifacts `report/`, and its params record the filters "
    "that chose the training runs."
)


def log_report(
    client: MlflowClient, out: Path, tags: Mapping[str, str], params: Mapping[str, str], run_id: str | None = None
) -> str:
    """The report run's id; its artifacts are the folder's files under `report/`.

    With `run_id` (the run `mlflow run . -e report` made) the report goes into that run, which its
    owner ends; otherwise a new run in `t4bench-reports`, ended here."""
    if run_id is not None:
        client.set_tag(run_id, REPORT_TAG, "1")
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
        client.log_artifacts(run_id, str(out), "report")
        return run_id
    exp = client.get_experiment_by_name(REPORT_EXPERIMENT)
    exp_id = (
        exp.experiment_id
        if exp is not None
        else client.create_experiment(
            REPORT_EXPERIMENT, tags=experiments.tags_for(REPORT_EXPERIMENT, REPORT_DESCRIPTION)
        )
    )
    name = run_names.report(out.resolve().name)  # fits the Run Name column
    run = client.create_run(exp_id, run_name=name, tags={REPORT_TAG: "1", **tags})
    status = names.FAILED
    try:
        for key, value in params.items():
            client.log_param(run.info.run_id, key, value[:6000])
        client.log_artifacts(run.info.run_id, str(out), "report")
        status = names.FINISHED
    finally:
        client.set_terminated(run.info.run_id, status=status)
    return run.info.run_id
