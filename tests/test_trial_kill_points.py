"""A sweep SIGKILLed at each step of a trial's start (t4bench.faults.TRIAL_START_STEPS, through
T4BENCH_KILL_AT: the process kills itself exactly there), then the same command run again, or
`t4bench runs repair`: no MLflow run is left RUNNING. A SIGTERM (T4BENCH_TERM_AT) right after a
trial is claimed leaves nothing RUNNING at all. Real Optuna sweeps of NCF mini (1 epoch)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from t4bench import faults
from tests.test_sweep_e2e import _env, _study, _sweep_cmd

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


def test_a_sigterm_just_after_a_trial_is_claimed_fails_and_requeues_it(tracking_uri: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # the trial is RUNNING in the study from Optuna's ask on; the stop signal is held back from
    # there until the trial runner's guard, which fails the trial and queues its parameters again
    sweep_dir = tmp_path / "sweep"
    cmd = _sweep_cmd("hydra.sweeper.n_trials=1", "hydra/sweeper/pruner=none", sweep_dir=sweep_dir)
    env = {**_env(tracking_uri), faults.TERM_AT_ENV: "trial.claimed"}
    stopped = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=600)
    assert stopped.returncode != 0, stopped.stderr[-2000:]
    trials = _study(sweep_dir).trials
    states = [t.state.name for t in trials]
    assert "RUNNING" not in states, states
    assert states[0] == "FAIL" and trials[0].user_attrs.get("t4bench_failed") == "interrupted", trials[0]
    assert "WAITING" in states, states  # its parameters, queued for the next run of the sweep
    assert _running(tracking_uri) == []
    subprocess.run(cmd, cwd=tmp_path, env=_env(tracking_uri), check=True, capture_output=True, timeout=600)
    after = _study(sweep_dir).trials
    assert [t.state.name for t in after].count("COMPLETE") == 1
    assert after[-1].params == trials[0].params  # the requeued parameters ran, not new ones
    assert _running(tracking_uri) == []
