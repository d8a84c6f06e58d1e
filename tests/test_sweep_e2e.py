"""End-to-end sweeps on NCF mini (1 epoch per run): seed-sweep summary, pruning, SIGTERM + resume,
two workers on one journal, the MLflow parent/trial/seed layout, optuna-dashboard on the journal,
held-out validation. Real runs, real storages, a real dashboard server, no mocks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import DATA_ROOT, all_runs
from tests.test_sweep_units import postgres_url  # noqa: F401  (fixture: a throwaway PostgreSQL server)

# each test trains (1-3 epoch runs of NCF mini in subprocesses)
pytestmark = pytest.mark.slow

COMMON = ["max_epochs=1", "progress=off", "hydra/sweeper=optuna", "hydra/sweeper/sampler=random",
          "model.optimizer.lr=tag(log,interval(1e-4,1e-2))"]


def _env(tracking_uri: str) -> dict[str, str]:
    return {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri, "T4BENCH_DATA_DIR": str(DATA_ROOT),
            "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _study(sweep_dir: Path, name: str = "ncf-optuna") -> optuna.Study:
    from t4bench.sweep.storage import open_storage

    journal = f"journal:{sweep_dir / 'optuna.journal'}"
    return optuna.load_study(study_name=name, storage=open_storage(journal))


def test_seed_sweep_parent_run_and_summary(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_t4bench("--multirun", "max_epochs=1", "seed=0,1", "progress=off", env={"OMP_NUM_THREADS": "1"})
    assert "olympic_mean" in proc.stdout
    runs = all_runs(mlflow_client, "t4bench-ncf")
    parents = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "parent"]
    assert len(parents) == 1
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["t4bench.seed"] for r in children) == ["0", "1"]
    assert {r.data.tags["t4bench.sweep_id"] for r in children} == {parent.data.tags["t4bench.sweep_id"]}
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["epochs_run_mean"] == 1.0
    assert "epochs_to_converge_converged_fraction" in parent.data.metrics
    assert (tmp_path / "sweep" / "summary.json").exists()


def test_pruning_stops_trials_early_and_marks_them(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a pruner that prunes any quality gap > 0: every lead seed stops after its first epoch of 3
    run_t4bench("--multirun", *COMMON, "max_epochs=3", "hydra.sweeper.n_trials=2", "hydra.sweeper.seeds_per_trial=2",
                "hydra/sweeper/pruner=none", "hydra.sweeper.pruner._target_=optuna.pruners.ThresholdPruner",
                "+hydra.sweeper.pruner.upper=0.0", env={"OMP_NUM_THREADS": "1"})
    study = _study(tmp_path / "sweep")
    assert [t.state for t in study.trials] == [TrialState.PRUNED, TrialState.PRUNED]
    assert all(t.user_attrs["epochs_run"] == 1 for t in study.trials)  # 1 epoch of 3, second seed never ran
    runs = all_runs(mlflow_client, "t4bench-ncf")
    training = [r for r in runs if "t4bench.sweep_role" not in r.data.tags]
    assert len(training) == 2 and {r.data.tags["t4bench.outcome"] for r in training} == {"pruned"}
    assert all(r.data.metrics["epochs_run"] == 1 for r in training)
    trials = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "trial"]
    assert {r.data.tags["t4bench.optuna.state"] for r in trials} == {"PRUNED"}


def test_sigterm_then_rerun_resumes_without_redoing_trials(tracking_uri: str, tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "t4bench", "--multirun", *COMMON, "hydra.sweeper.n_trials=3",
           "hydra/sweeper/pruner=none", f"hydra.sweep.dir={sweep_dir}", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(tracking_uri), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 400
    while time.time() < deadline:
        journal = sweep_dir / "optuna.journal"
        if journal.exists() and any(t.state == TrialState.COMPLETE for t in _study(sweep_dir).trials):
            break
        time.sleep(1)
    time.sleep(4)  # into trial 1
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


@pytest.fixture(scope="module")
def two_worker_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One Optuna sweep, 3 trials x 2 seeds, run by two worker processes on one journal file;
    the tests below read its storage, its MLflow runs and validate it."""
    base = tmp_path_factory.mktemp("two_workers")
    uri = f"sqlite:///{base / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "t4bench", "--multirun", *COMMON, "hydra.sweeper.n_trials=3",
           "hydra.sweeper.seeds_per_trial=2", "hydra.sweeper.n_jobs=2", "hydra/sweeper/pruner=none",
           f"hydra.sweep.dir={base / 'sweep'}", f"hydra.run.dir={base / 'run'}"]
    proc = subprocess.run(cmd, cwd=base, env=_env(uri), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return base / "sweep", uri


def test_two_workers_share_one_journal_exactly_n_trials(two_worker_sweep: tuple[Path, str]) -> None:
    trials = _study(two_worker_sweep[0]).trials
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.system_attrs["t4bench_pid"] for t in trials}) == 2  # both workers ran trials


def test_mlflow_layout_parent_trials_seeds_best(two_worker_sweep: tuple[Path, str]) -> None:
    from mlflow.tracking import MlflowClient

    sweep_dir, uri = two_worker_sweep
    study = _study(sweep_dir)
    runs = [r for r in all_runs(MlflowClient(uri), "t4bench-ncf") if r.data.tags.get("t4bench.sweep_id") == "ncf-optuna"]
    role = {r.info.run_id: r.data.tags.get("t4bench.sweep_role") for r in runs}
    parents = [r for r in runs if role[r.info.run_id] == "parent"]
    assert len(parents) == 1  # one parent although two processes ran the sweep
    parent = parents[0]
    trials = [r for r in runs if role[r.info.run_id] == "trial"]
    assert sorted(int(r.data.tags["t4bench.trial_number"]) for r in trials) == [0, 1, 2]
    assert {r.data.tags["mlflow.parentRunId"] for r in trials} == {parent.info.run_id}
    seeds = [r for r in runs if role[r.info.run_id] is None]
    assert len(seeds) == 6
    by_trial = {r.info.run_id: r.data.tags["t4bench.trial_number"] for r in trials}
    for run in seeds:  # each seed run hangs under the run of its own trial
        assert by_trial[run.data.tags["mlflow.parentRunId"]] == run.data.tags["t4bench.trial_number"]
    assert sorted(r.data.tags["t4bench.seed"] for r in seeds) == ["0", "0", "0", "1", "1", "1"]
    best = study.best_trial
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["best_value"] == pytest.approx(best.value)
    assert parent.data.tags["t4bench.best_trial"] == str(best.number)
    assert float(parent.data.tags["t4bench.best.model.optimizer.lr"]) == pytest.approx(best.params["model.optimizer.lr"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_optuna_dashboard_opens_the_journal(two_worker_sweep: tuple[Path, str], tmp_path: Path) -> None:
    port = _free_port()
    journal = two_worker_sweep[0] / "optuna.journal"
    with open(tmp_path / "dashboard.log", "wb") as log:
        server = subprocess.Popen(["optuna-dashboard", str(journal), "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        studies = None
        deadline = time.time() + 60
        while studies is None and time.time() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as resp:
                    studies = json.load(resp)["study_summaries"]
            except OSError:
                time.sleep(0.5)
        assert studies is not None, (tmp_path / "dashboard.log").read_text()[-2000:]
        assert [s["study_name"] for s in studies] == ["ncf-optuna"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}", timeout=10) as resp:
            detail = json.load(resp)
        assert len(detail["trials"]) == 3
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_held_out_validation_reports_both_distributions(two_worker_sweep: tuple[Path, str], tmp_path: Path) -> None:
    sweep_dir, uri = two_worker_sweep
    proc = subprocess.run(
        [sys.executable, "-m", "t4bench.sweep.validate", "--sweep-dir", str(sweep_dir), "--seeds", "7",
         f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path, env=_env(uri), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "held-out validation" in proc.stdout
    result = json.loads((sweep_dir / "validation.json").read_text())
    assert [r["seed"] for r in result["best"]["runs"]] == [7] and [r["seed"] for r in result["reference"]["runs"]] == [7]
    assert result["best_trial"] == _study(sweep_dir).best_trial.number
    from mlflow.tracking import MlflowClient

    runs = all_runs(MlflowClient(uri), "t4bench-ncf")
    parents = {r.data.tags["t4bench.sweep_id"]: r.info.status for r in runs if r.data.tags.get("t4bench.sweep_role") == "parent"}
    # the sweep's own parent is left FINISHED; each set gets its own finished parent
    assert parents == {"ncf-optuna": "FINISHED", f"ncf-optuna-validate-best-t{result['best_trial']}": "FINISHED",
                       "ncf-optuna-validate-reference": "FINISHED"}


def test_two_workers_on_postgresql_finish_exactly_n_trials(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    """The several-machines mode: an SQLAlchemy URL instead of the journal (no shared lock file),
    the pruning callback in each job reporting to the same server."""
    sweep_dir = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "t4bench", "--multirun", *COMMON, "hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=2",
           f"hydra.sweeper.storage='{postgres_url}'", f"hydra.sweep.dir={sweep_dir}", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(f"sqlite:///{tmp_path / 'mlflow.db'}"), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    trials = optuna.load_study(study_name="ncf-optuna", storage=postgres_url).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 3
    # a worker that asked one trial too many fails it as surplus; nothing else may be left over
    assert all(t.user_attrs.get("t4bench_failed", "").startswith("surplus") for t in trials if t not in complete)
    assert all(t.intermediate_values for t in complete)  # the lead seeds reported epoch 1 to PostgreSQL
    assert not (sweep_dir / "optuna.journal").exists()
