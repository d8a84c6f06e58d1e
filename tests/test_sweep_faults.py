"""Sweeps under faults, end to end on NCF mini (1 epoch per run): a controller stopped by SIGTERM
or kill -9 and run again, two workers on PostgreSQL, one worker killed -9 while the other keeps
going. Real processes, real storages (journal, PostgreSQL), no mocks. Split from test_sweep_e2e.py
(its helpers are shared from there)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from t4bench.tracking.optuna_runs import TRIAL_RUN_ATTR
from tests.conftest import all_runs
from tests.test_sweep_e2e import _env, _study, _sweep_cmd, _trials_so_far
from tests.test_sweep_units import postgres_url  # noqa: F401  (fixture: a throwaway PostgreSQL server)

# each test trains (1-3 epoch runs of NCF mini in subprocesses)
pytestmark = pytest.mark.slow


def test_sigterm_then_rerun_resumes_without_redoing_trials(tracking_uri: str, tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    cmd = _sweep_cmd(
        "hydra.sweeper.n_trials=3", "hydra/sweeper/pruner=none", sweep_dir=sweep_dir, run_dir=tmp_path / "run"
    )
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(tracking_uri), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 400
    while time.time() < deadline:  # into trial 1, trial 0 complete (each trains one NCF epoch: seconds)
        trials = _trials_so_far(sweep_dir)
        # trial 1 under way: its MLflow run recorded on it, so the SIGTERM below lands in training
        # (a SIGTERM at the claim itself is tests/test_trial_kill_points.py's case)
        if any(t.state == TrialState.COMPLETE for t in trials) and any(
            t.number >= 1 and t.state == TrialState.RUNNING and TRIAL_RUN_ATTR in t.user_attrs for t in trials
        ):
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) != 0
    before = _study(sweep_dir).trials
    complete_before = {t.number: t.params for t in before if t.state == TrialState.COMPLETE}
    assert complete_before and all(t.state != TrialState.RUNNING for t in before)
    subprocess.run(cmd, cwd=tmp_path, env=_env(tracking_uri), check=True, capture_output=True, timeout=600)
    after = _study(sweep_dir).trials
    complete = [t for t in after if t.state == TrialState.COMPLETE]
    assert len(complete) == 3  # trial count continued to n_trials
    for number, params in complete_before.items():  # finished trials kept, not redone
        assert after[number].state == TrialState.COMPLETE and after[number].params == params
    failed = [t for t in after if t.state == TrialState.FAIL]
    for t in failed:  # the interrupted trial was queued again with its parameters
        assert any(c.user_attrs.get("t4bench_retry_of") == t.number and c.params == t.params for c in complete)


def test_kill9_then_rerun_closes_the_stale_trials_runs(tracking_uri: str, tmp_path: Path) -> None:
    """kill -9 mid-trial leaves the trial RUNNING in Optuna and its trial and seed runs RUNNING in
    MLflow; the re-run fails the stale trial (its pid is dead), redoes it and marks both runs KILLED."""
    from mlflow.tracking import MlflowClient

    sweep_dir = tmp_path / "sweep"
    cmd = _sweep_cmd(
        "max_epochs=2",
        "hydra.sweeper.n_trials=1",
        "hydra/sweeper/pruner=none",
        sweep_dir=sweep_dir,
        run_dir=tmp_path / "run",
    )
    client = MlflowClient(tracking_uri)
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(tracking_uri), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 400
    while time.time() < deadline and proc.poll() is None:
        training = [r for r in all_runs(client, "t4bench-ncf") if "t4bench.sweep_role" not in r.data.tags]
        if training and "epoch_time_s" in client.get_run(training[0].info.run_id).data.metrics:
            break  # one epoch done, the second one under way
        time.sleep(1)
    proc.kill()
    proc.wait(timeout=60)
    assert [t.state for t in _study(sweep_dir).trials] == [TrialState.RUNNING]
    subprocess.run(cmd, cwd=tmp_path, env=_env(tracking_uri), check=True, capture_output=True, timeout=600)
    trials = _study(sweep_dir).trials
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[1].user_attrs["t4bench_retry_of"] == 0 and trials[1].params == trials[0].params
    runs = all_runs(client, "t4bench-ncf")
    killed_trial = [
        r
        for r in runs
        if r.data.tags.get("t4bench.sweep_role") == "trial" and r.data.tags["t4bench.trial_number"] == "0"
    ]
    assert [r.info.status for r in killed_trial] == ["KILLED"]
    seed_runs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == killed_trial[0].info.run_id]
    assert [(r.info.status, r.data.tags["t4bench.outcome"]) for r in seed_runs] == [("KILLED", "killed")]
    assert not [r for r in runs if r.info.status == "RUNNING"]


def test_two_workers_on_postgresql_finish_exactly_n_trials(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    """The several-machines mode: an SQLAlchemy URL instead of the journal (no shared lock file),
    the pruning callback in each job reporting to the same server."""
    sweep_dir = tmp_path / "sweep"
    cmd = _sweep_cmd(
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.n_jobs=2",
        f"hydra.sweeper.storage='{postgres_url}'",
        sweep_dir=sweep_dir,
        run_dir=tmp_path / "run",
    )
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=_env(f"sqlite:///{tmp_path / 'mlflow.db'}"), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    trials = optuna.load_study(study_name="ncf-optuna", storage=postgres_url).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 3
    # a worker that asked one trial too many fails it as surplus; nothing else may be left over
    assert all(t.user_attrs.get("t4bench_failed", "").startswith("surplus") for t in trials if t not in complete)
    assert all(t.intermediate_values for t in complete)  # the lead seeds reported epoch 1 to PostgreSQL
    assert not (sweep_dir / "optuna.journal").exists()


def test_worker_killed_9_while_another_keeps_going(tracking_uri: str, tmp_path: Path) -> None:
    """Two workers of one study (hydra.sweeper.n_jobs=2, journal storage): worker 1 is killed -9
    in its trial; worker 0 fails that trial (its pid is dead), runs its parameters again and ends
    the study with all n_trials complete, exit 0, saying which worker was lost."""
    from mlflow.tracking import MlflowClient

    sweep_dir = tmp_path / "sweep"
    cmd = _sweep_cmd(
        "hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=2", "hydra/sweeper/pruner=none", sweep_dir=sweep_dir
    )
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(tracking_uri), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    victim = None
    deadline = time.time() + 300
    while victim is None and time.time() < deadline and proc.poll() is None:
        running = [t for t in _trials_so_far(sweep_dir) if t.state == TrialState.RUNNING]
        victim = next((t for t in running if t.user_attrs.get("t4bench_pid") not in (None, proc.pid)), None)
        time.sleep(0.5)
    assert victim is not None, "worker 1 never ran a trial"
    time.sleep(1)  # into its trial's training run
    os.kill(int(victim.user_attrs["t4bench_pid"]), signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    assert f"sweep worker 1 (pid {victim.user_attrs['t4bench_pid']}) killed by SIGKILL" in out
    trials = _study(sweep_dir).trials
    assert [t.number for t in trials if t.state == TrialState.FAIL] == [victim.number]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 3 and not [t for t in trials if t.state == TrialState.RUNNING]
    (redo,) = [t for t in complete if t.user_attrs.get("t4bench_retry_of") == victim.number]
    assert redo.params == victim.params and redo.user_attrs["t4bench_pid"] == proc.pid
    runs = all_runs(MlflowClient(tracking_uri), "t4bench-ncf")
    trial_runs = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "trial"]
    assert {r.data.tags["t4bench.trial_number"]: r.info.status for r in trial_runs}[str(victim.number)] == "KILLED"
    assert not [r for r in runs if r.info.status == "RUNNING"]  # the killed worker's seed run is closed too
