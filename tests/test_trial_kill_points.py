"""A sweep SIGKILLed at each step of a trial's start (t4bench.faults.TRIAL_START_STEPS, through
T4BENCH_KILL_AT: the process kills itself exactly there), then the same command run again, or
`t4bench runs repair`: no MLflow run is left RUNNING. Real Optuna sweeps of NCF mini (1 epoch)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from t4bench import faults
from tests.test_sweep_e2e import _env, _sweep_cmd

pytestmark = pytest.mark.slow


def _running(uri: str) -> list[str]:
    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_name for r in client.search_runs(ids, "attributes.status = 'RUNNING'")]


#: every step closed by `runs repair` (cheap: no training), and the re-run (a whole sweep again) at
#: the steps where the re-run's own path differs: the parent made but no trial, and a trial's run
#: made before the study records it
CASES = [
    *((step, "repair") for step in faults.TRIAL_START_STEPS),
    ("parent.created", "rerun"),
    ("trial.run_created", "rerun"),
]


@pytest.mark.parametrize(("step", "then"), CASES)
def test_no_run_left_running_after_a_kill_at_any_step(step: str, then: str, tracking_uri: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cmd = _sweep_cmd("hydra.sweeper.n_trials=1", "hydra/sweeper/pruner=none", sweep_dir=tmp_path / "sweep")
    killed = subprocess.run(
        cmd, cwd=tmp_path, env={**_env(tracking_uri), faults.KILL_AT_ENV: step}, capture_output=True, timeout=600
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    if step != "trial.claimed":  # the parent exists from the first step on; a run was made at this one
        assert _running(tracking_uri), "the kill left nothing RUNNING: the step was not reached"
    if then == "rerun":
        subprocess.run(cmd, cwd=tmp_path, env=_env(tracking_uri), check=True, capture_output=True, timeout=600)
    else:
        repair = [sys.executable, "-m", "t4bench.cli", "runs", "repair", "--tracking-uri", tracking_uri]
        subprocess.run(repair, cwd=tmp_path, env=_env(tracking_uri), check=True, capture_output=True, timeout=300)
    assert _running(tracking_uri) == []
