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
    assert "time_to_train_s" in run.data.metrics
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


def test_bad_override_fails_the_project_run(tmp_path: Path, tracking_uri: str) -> None:
    proc = mlflow_run(tmp_path, tracking_uri, "-e", "main", "-P", "overrides=model=ncf hw=nosuchhw")
    assert proc.returncode != 0
    assert all(r.info.status != "RUNNING" for r in every_run(tracking_uri))


def test_entry_module_splits_one_parameter_like_a_shell() -> None:
    from t4bench.mlproject import command_for

    command = command_for("main", "model=ncf seed=3 'model.target={hr_at_10: 0.6}'", None)
    assert command[1:] == ["-m", "t4bench", "model=ncf", "seed=3", "model.target={hr_at_10: 0.6}"]
    sweep = command_for("sweep", "model=ncf seed=range(0,3)", None)
    assert sweep[1:] == ["-m", "t4bench", "--multirun", "model=ncf", "seed=range(0,3)"]


def test_without_experiment_name_the_run_lands_in_the_benchmark_experiment(tmp_path: Path, tracking_uri: str) -> None:
    """`mlflow run . -P overrides="model=ncf seed=3"`: MLflow makes its run in Default; the training
    run is in t4bench-ncf, and the project run records the launch as typed (no shell quotes)."""
    overrides = f"model=ncf seed=3 max_epochs=1 progress=off eval_every=0.5 hydra.run.dir={tmp_path / 'run'}"
    proc = mlflow_run(tmp_path, tracking_uri, "-e", "main", "-P", f"overrides={overrides}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    runs = {client.get_experiment(r.info.experiment_id).name: r for r in every_run(tracking_uri)}
    assert set(runs) == {"Default", "t4bench-ncf"}
    trained, launcher = runs["t4bench-ncf"], runs["Default"]
    assert trained.data.params["seed"] == "3" and "time_to_train_s" in trained.data.metrics
    assert launcher.data.tags["t4bench.sweep_role"] == "launcher"
    assert launcher.data.tags["t4bench.launched"] == f"-m t4bench {overrides}"
    assert "'" not in launcher.data.tags["t4bench.launched"]
    assert "t4bench-ncf" in launcher.data.tags["mlflow.note.content"]
    # the UI line of the run: its experiment's runs table in the classic-ML view
    assert f"#/experiments/{trained.info.experiment_id}/runs?workflowType=machine_learning" in proc.stdout
