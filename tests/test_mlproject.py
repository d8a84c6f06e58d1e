"""`mlflow run .` on the MLproject file: several Hydra overrides in one -P, the clone's code, and
the run MLflow Projects creates is the training run (no second, empty run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import DATA_ROOT, REPO


def mlflow_run(tmp_path: Path, uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "T4BENCH_DATA_DIR": str(DATA_ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # the MLproject command must find the clone's src/ itself
    return subprocess.run(
        [sys.executable, "-m", "mlflow", "run", str(REPO), "--env-manager", "local", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def every_run(uri: str) -> list:  # type: ignore[type-arg]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]


def released(uri: str, timeout_s: float = 60) -> None:
    """Wait until the project run `mlflow run` made in Default is deleted (t4bench.mlproject's
    detached process deletes it once `mlflow run` has ended it a second time)."""
    import time

    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    deadline = time.monotonic() + timeout_s
    while client.search_runs(["0"]) and time.monotonic() < deadline:
        time.sleep(0.5)


def assert_no_empty_run(uri: str) -> None:
    """No run of any experiment is an orphan: each holds metrics or artifacts."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    for run in every_run(uri):
        name = client.get_experiment(run.info.experiment_id).name
        assert run.data.metrics or client.list_artifacts(run.info.run_id), (name, run.info.run_name, run.data.tags)


def test_main_entry_trains_into_the_project_run(tmp_path: Path, tracking_uri: str) -> None:
    overrides = f"model=ncf seed=3 max_epochs=1 progress=off hydra.run.dir={tmp_path / 'run'}"
    proc = mlflow_run(
        tmp_path, tracking_uri, "-e", "main", "--experiment-name", "t4bench-ncf", "-P", f"overrides={overrides}"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = every_run(tracking_uri)  # one run: the project's run is the training run
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.project.entryPoint"] == "main"
    assert run.data.params["seed"] == "3" and run.data.tags["t4bench.seed"] == "3"
    assert run.data.params["max_epochs"] == "1"
    assert run.info.run_name == "ncf-mini-cpux1-s3"
    assert "run_train_s" in run.data.metrics and "run_wall_s" in run.data.metrics
    # adopted through tracking.run_id (t4bench.mlproject passes MLFLOW_RUN_ID)
    assert run.data.params["tracking.run_id"] == run.info.run_id

    # the report entry point logs the report into its own project run
    proc = mlflow_run(tmp_path, tracking_uri, "-e", "report", "-P", f"args=--out {tmp_path / 'report'} --model ncf")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report_run = next(r for r in every_run(tracking_uri) if r.info.run_id != run.info.run_id)
    assert report_run.info.status == "FINISHED" and report_run.data.tags["t4bench.report"] == "1"
    from mlflow.tracking import MlflowClient

    logged = {a.path for a in MlflowClient(tracking_uri).list_artifacts(report_run.info.run_id, "report")}
    assert "report/report.md" in logged
    assert len(every_run(tracking_uri)) == 2  # the training run and the report run, nothing else
    assert_no_empty_run(tracking_uri)


def test_bad_override_fails_the_project_run(tmp_path: Path, tracking_uri: str) -> None:
    proc = mlflow_run(tmp_path, tracking_uri, "-e", "main", "-P", "overrides=model=ncf hw=nosuchhw")
    assert proc.returncode != 0 and "must be in the 'active' state" not in proc.stderr
    # without --experiment-name: the empty project run in Default is deleted, nothing is left
    released(tracking_uri)
    assert every_run(tracking_uri) == []
    proc = mlflow_run(
        tmp_path, tracking_uri, "-e", "main", "--experiment-name", "t4bench-ncf", "-P", "overrides=hw=nosuchhw"
    )
    assert proc.returncode != 0
    assert all(r.info.status != "RUNNING" for r in every_run(tracking_uri))


def test_entry_module_splits_one_parameter_like_a_shell() -> None:
    from t4bench.mlproject import command_for, job_for

    command = command_for("main", "model=ncf seed=3 'model.target={hr_at_10: 0.6}'", None)
    assert job_for("main", "model=ncf", None).deletes is None  # no project run: nothing to delete
    assert command[1:] == ["-m", "t4bench", "model=ncf", "seed=3", "model.target={hr_at_10: 0.6}"]
    sweep = command_for("sweep", "model=ncf seed=range(0,3)", None)
    assert sweep[1:] == ["-m", "t4bench", "--multirun", "model=ncf", "seed=range(0,3)"]


def test_without_experiment_name_the_run_lands_in_the_benchmark_experiment(tmp_path: Path, tracking_uri: str) -> None:
    """`mlflow run . -P overrides="model=ncf seed=3"`: MLflow makes its run in Default, which no run
    can leave; the training run is in t4bench-ncf with the project run's source tags, and the
    project's run, empty, is deleted: no orphan in any experiment."""
    overrides = f"model=ncf seed=3 max_epochs=1 progress=off eval_every=0.5 hydra.run.dir={tmp_path / 'run'}"
    proc = mlflow_run(tmp_path, tracking_uri, "-e", "main", "-P", f"overrides={overrides}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    released(tracking_uri)
    client = MlflowClient(tracking_uri)
    runs = {client.get_experiment(r.info.experiment_id).name: r for r in every_run(tracking_uri)}
    assert set(runs) == {"t4bench-ncf"}
    assert_no_empty_run(tracking_uri)
    trained = runs["t4bench-ncf"]
    assert trained.data.params["seed"] == "3" and "epochs_run" in trained.data.metrics
    assert trained.data.tags["mlflow.project.entryPoint"] == "main"
    assert trained.data.tags["mlflow.source.type"] == "PROJECT"
    (deleted,) = client.search_runs(["0"], run_view_type=ViewType.DELETED_ONLY)
    assert deleted.info.status == "FINISHED" and not deleted.data.metrics
    assert deleted.data.tags["mlflow.project.entryPoint"] == "main"
    assert f"made run {deleted.info.run_id} in experiment Default" in proc.stdout
    assert f"Run (ID '{deleted.info.run_id}') succeeded" in proc.stderr
    # the UI line of the run: its experiment's runs table in the classic-ML view
    assert f"#/experiments/{trained.info.experiment_id}/runs?workflowType=machine_learning" in proc.stdout
