"""Runs and sweeps on Slurm (docs/cluster.md), against ONE real single-host Slurm per pytest run
(tests/slurm_cluster.py; the cases without a cluster are in test_slurm_units.py): a 2-seed NCF sweep
compared with a local one, a scancel'ed job, an Optuna sweep with two workers and a cancelled
job, a job at its time limit, the sweep command killed and stopped then run again, and a 2-rank
srun run."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DATA_ROOT, REPO
from mlflow.tracking import MlflowClient
from slurm_cluster import SlurmCluster, missing, start

from t4bench.sweep import slurm
from t4bench.tracking import names
from t4bench.tracking.tags import run_tags

NCF_MINI = ("model=ncf", "max_epochs=1", "progress=plain", "tracking.system_metrics_interval_s=0")


# --- a real Slurm -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The running cluster, shared by the tests of one pytest run and stopped at its end."""
    why = missing()
    if why:
        pytest.skip(why)
    cluster = start(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


def _env(cluster: SlurmCluster, tmp_path: Path) -> dict[str, str]:
    # the store made before any sweep starts: the tests poll it (_runs) while a sweep starts, and a
    # poll that made it then raced the sweep's store check ("... is a SQLite database but not an
    # MLflow tracking store", its tables half made; seen once in 6 runs of the controller test)
    _client(tmp_path).search_experiments()
    return {
        **cluster.env,
        "PYTHONPATH": str(REPO / "src"),
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }


def _sweep(tmp_path: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "t4bench",
        "--multirun",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.timeout_min=5",
        "hydra.launcher.signal_delay_s=30",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *NCF_MINI,
        *overrides,
    ]


def _run(cluster: SlurmCluster, tmp_path: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """`command` run to its end in tmp_path, against the cluster and the test's store (5 min at most)."""
    return subprocess.run(
        command, env=_env(cluster, tmp_path), cwd=tmp_path, text=True, capture_output=True, timeout=300
    )


def _client(tmp_path: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")


def _runs(tmp_path: Path) -> list:  # type: ignore[type-arg]
    client = _client(tmp_path)
    experiment = client.get_experiment_by_name("t4bench-ncf")
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id])
    return [run for run in runs if run.data.tags.get("t4bench.sweep_role") != "parent" and names.SEED in run.data.tags]


def _hr_history(client: MlflowClient, run_id: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run_id, "eval_hr_at_10")]


def test_seed_sweep_through_slurm_finishes_every_run_with_its_job_id_as_a_local_sweep_would(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    """Two seeds through Slurm, then the same two seeds as a plain local sweep into the same
    experiment: every run FINISHED, told apart by t4bench.sweep_launcher, and each seed's quality
    after every epoch the same to the last bit (CPU training is deterministic per seed; docs/cluster.md
    has the 8-seed comparison to convergence)."""
    done = _run(slurm_cluster, tmp_path, _sweep(tmp_path, "seed=0,1"))
    assert done.returncode == 0, done.stderr[-3000:]
    # the controller says what it submitted and each job's end, job i/n with the sweep's ETA, as a
    # local sweep does after each job, before the summary
    out = done.stdout
    assert re.search(r"^\[t4bench\] 2 job\(s\) submitted to Slurm \((\d+)_0 \.\.\. \1_1\)$", out, re.M), out
    ends = re.findall(
        r"^\[t4bench\] sweep job (\d)/2 done \(\w+\); (sweep ETA \w+|sweep done) \(Slurm job \d+_\d\)$", out, re.M
    )
    assert [n for n, _ in ends] == ["1", "2"] and ends[0][1].startswith("sweep ETA") and ends[1][1] == "sweep done", out
    assert out.index("sweep job 2/2 done") < out.index("[t4bench] report: "), out
    runs = _runs(tmp_path)
    assert sorted(run.data.tags[names.SEED] for run in runs) == ["0", "1"]
    assert {run.info.status for run in runs} == {"FINISHED"}
    client = _client(tmp_path)
    assert {run_tags(client, run)[names.SWEEP_LAUNCHER] for run in runs} == {"submitit_slurm"}
    jobs = {run.data.tags[names.SLURM_JOB_ID] for run in runs}
    accounted = slurm_cluster.run("sacct", "-n", "-X", "-P", "-o", "JobID,JobName").stdout.split()
    # every run's job is in Slurm's accounting, named after its seed
    names_of = dict(line.split("|", 1) for line in accounted)
    assert jobs <= set(names_of), (jobs, names_of)
    assert {names_of[run.data.tags[names.SLURM_JOB_ID]] for run in runs} == {f"t4bench-ncf:seed={s}" for s in "01"}
    assert list((tmp_path / "sweep" / ".submitit").rglob("*_log.out")), "job logs under the sweep dir"

    local = [a for a in _sweep(tmp_path, "seed=0,1") if not a.startswith("hydra.launcher")]
    local = [a.replace("hydra/launcher=submitit_slurm", "hydra/launcher=basic") for a in local]
    local = [a.replace(str(tmp_path / "sweep"), str(tmp_path / "local")) for a in local]
    done = _run(slurm_cluster, tmp_path, local)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\[t4bench\] sweep job 1/2 done \(\w+\); sweep ETA \w+$", done.stdout, re.M), done.stdout
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    by_launcher: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for run in _runs(tmp_path):
        assert run.info.status == "FINISHED"
        seeds = by_launcher.setdefault(run_tags(client, run)[names.SWEEP_LAUNCHER], {})
        seeds[run.data.tags[names.SEED]] = _hr_history(client, run.info.run_id)
    assert set(by_launcher) == {"submitit_slurm", "basic"}
    assert len(by_launcher["basic"]["0"]) == 1 and by_launcher["basic"]["0"] != by_launcher["basic"]["1"]
    assert by_launcher["submitit_slurm"] == by_launcher["basic"]


def test_scancel_of_a_running_job_ends_the_sweep_in_one_line_with_a_killed_run(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    sweep = subprocess.Popen(
        [*_sweep(tmp_path, "seed=5"), "max_epochs=50"],
        env=_env(slurm_cluster, tmp_path),
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not _runs(tmp_path) and time.monotonic() < deadline and sweep.poll() is None:
            time.sleep(1)
        runs = _runs(tmp_path)
        assert runs, "the job's MLflow run never started"
        time.sleep(3)  # into training
        slurm_cluster.run("scancel", runs[0].data.tags[names.SLURM_JOB_ID])
        _, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 2, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("t4bench: error:")]
    assert len(errors) == 1 and "CANCELLED" in errors[0] and "run the same command again" in errors[0], stderr
    assert "Traceback" not in stderr
    (run,) = _runs(tmp_path)
    assert run.info.status == "KILLED"


def test_two_ranks_started_by_srun_train_one_run_over_gloo(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    """What a multi-node job step does on each node, on one: srun starts the ranks, t4bench reads
    rank, world size and rendezvous from SLURM_* (no torchrun)."""
    srun = ["srun", "--ntasks=2", "--nodes=1", "--cpus-per-task=1"]
    done = _run(slurm_cluster, tmp_path, [*srun, sys.executable, "-m", "t4bench", *NCF_MINI])
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = _runs(tmp_path)
    assert run.info.status == "FINISHED"
    tags = run_tags(_client(tmp_path), run)
    assert (tags[names.LAUNCHER], tags[names.WORLD_SIZE], tags[names.DIST_BACKEND]) == ("slurm", "2", "ddp/gloo")
    assert tags[names.SLURM_JOB_ID].isdigit() and tags[names.SWEEP_LAUNCHER] == slurm.NO_SWEEP


def _all_runs(tmp_path: Path) -> list:  # type: ignore[type-arg]
    """Every training run (no sweep parents or trial runs), any launcher."""
    return [run for run in _runs(tmp_path) if names.SWEEP_ROLE not in run.data.tags]


def _wait_for(what: str, ready, proc: subprocess.Popen[str], timeout: float = 180):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = ready()
        if found:
            return found
        assert proc.poll() is None, f"the sweep ended before {what}: {proc.communicate()[1][-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"no {what} in {timeout:.0f} s")


def _optuna(tmp_path: Path, *overrides: str) -> list[str]:
    cmd = _sweep(tmp_path, "hydra/sweeper=optuna", "hydra/sweeper/sampler=random", "hydra/sweeper/pruner=none")
    return [*cmd, "model.optimizer.lr=tag(log,interval(1e-4,1e-2))", *overrides]


def _trials(tmp_path: Path) -> list:  # type: ignore[type-arg]
    import optuna

    from t4bench.sweep.storage import open_storage

    journal = f"journal:{tmp_path / 'sweep' / 'optuna.journal'}"
    return optuna.load_study(study_name="ncf-optuna", storage=open_storage(journal)).trials


def test_optuna_workers_send_trials_as_jobs_and_a_cancelled_job_fails_its_trial(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    """hydra.sweeper.n_jobs=2 on Slurm: both workers stay on the submitting machine and each sends
    its trials' seeds as Slurm jobs. One job is scancel'ed: its run KILLED, its trial FAIL (the
    line in t4bench_error), and the sweep goes on to n_trials COMPLETE."""
    cmd = _optuna(tmp_path, "max_epochs=2", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2")
    sweep = subprocess.Popen(
        cmd, env=_env(slurm_cluster, tmp_path), cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        first = _wait_for("a running seed run", lambda: _all_runs(tmp_path), sweep)[0]
        time.sleep(2)  # into training
        cancelled = first.data.tags[names.SLURM_JOB_ID]
        slurm_cluster.run("scancel", cancelled)
        _, stderr = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, stderr[-3000:]
    runs = _all_runs(tmp_path)
    status = {run.data.tags[names.SLURM_JOB_ID]: run.info.status for run in runs}
    assert status.pop(cancelled) == "KILLED" and list(status.values()) == ["FINISHED", "FINISHED"], status
    trials = _trials(tmp_path)
    assert sorted(t.state.name for t in trials) == ["COMPLETE", "COMPLETE", "FAIL"]
    (failed,) = [t for t in trials if t.state.name == "FAIL"]
    assert "CANCELLED" in failed.user_attrs["t4bench_error"]
    # both worker processes (one started by the other, here) claimed trials; every seed a job
    assert len({t.user_attrs["t4bench_pid"] for t in trials}) == 2, [t.user_attrs for t in trials]
    assert len(status) == 2 and cancelled not in status
    assert (tmp_path / "sweep" / "worker-1.log").exists()  # the second worker: a process here, not a job


def test_a_job_at_its_time_limit_fails_its_run_and_its_trial(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    """A run that cannot end before its job's time limit (target out of reach): submitit's USR2
    comes signal_delay_s before the limit, or up to 60 s earlier (here 20-80 s after the start);
    the run closes FAILED, the trial FAIL with the time limit named, and the sweep stops at
    max_failures in one line, no hang."""
    cmd = [
        a for a in _optuna(tmp_path, "max_epochs=500", "model.target.hr_at_10=0.99") if "launcher.timeout_min" not in a
    ]
    cmd = [a for a in cmd if "signal_delay_s" not in a]
    cmd += ["hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=40"]
    cmd += ["hydra.sweeper.n_trials=1", "hydra.sweeper.max_failures=1"]
    done = _run(slurm_cluster, tmp_path, cmd)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("t4bench: error:")]
    assert len(errors) == 1 and "max_failures=1" in errors[0] and "Traceback" not in done.stderr, done.stderr
    (run,) = _all_runs(tmp_path)
    assert run.info.status == "FAILED"
    (trial,) = _trials(tmp_path)
    assert trial.state.name == "FAIL" and "time limit" in trial.user_attrs["t4bench_error"], trial.user_attrs


def test_controller_killed_then_stopped_then_rerun_reuses_completed_jobs(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    """The sweep command stopped mid-sweep and run again, twice: after SIGKILL its jobs run on and
    the next run waits for them; SIGTERM of that one cancels the job still in Slurm (one line);
    the third run reuses the completed jobs and trains only the cancelled seed."""
    cmd = [*_sweep(tmp_path, "seed=0,1,2"), "hydra.launcher.array_parallelism=1"]
    env = _env(slurm_cluster, tmp_path)

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(cmd, env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def finished(seed: str) -> bool:
        return any(r.data.tags[names.SEED] == seed and r.info.status == "FINISHED" for r in _all_runs(tmp_path))

    def running(seed: str) -> bool:
        return any(r.data.tags[names.SEED] == seed and r.info.status == "RUNNING" for r in _all_runs(tmp_path))

    # the second run's output in files, unbuffered: its "waiting for" line says its SIGTERM handler
    # is in place (a SIGTERM while it still imports, on a loaded host, would kill it outright)
    out_file, err_file = tmp_path / "second.out", tmp_path / "second.err"

    def waiting() -> bool:
        return "waiting for" in out_file.read_text()

    first = start()
    second = None
    try:
        _wait_for("seed 0 finished", lambda: finished("0"), first)
        first.kill()  # SIGKILL: its array (one task at a time) runs on: seed 1, then seed 2
        first.wait()
        with out_file.open("w") as out, err_file.open("w") as err:
            # waits for the orphaned jobs; stopped while seed 2 trains
            second = subprocess.Popen(
                cmd, env={**env, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path, text=True, stdout=out, stderr=err
            )
        _wait_for("the second run waiting", waiting, second)
        _wait_for("seed 1 finished and seed 2 started", lambda: finished("1") and running("2"), second)
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=120)
        out2, err2 = out_file.read_text(), err_file.read_text()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert second.returncode == 128 + signal.SIGTERM, err2[-3000:]
    # it waited for the orphaned jobs still in Slurm: seed 2's (running at the SIGTERM), and seed 1's
    # unless that one finished while this run started up
    waited = re.search(r"waiting for (\d) job\(s\) of an earlier run of this sweep still in Slurm \(([^)]*)\)", out2)
    tasks = [job.split("_")[1] for job in waited[2].split(", ")] if waited else []
    assert waited and int(waited[1]) == len(tasks) and tasks in (["1", "2"], ["2"]), out2
    stopped = [line for line in err2.splitlines() if line.startswith("t4bench: stopped")]
    assert len(stopped) == 1 and "1 Slurm job(s) still queued or running cancelled" in stopped[0], err2
    assert "Traceback" not in err2
    third = subprocess.run(cmd, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=300)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "2 of 3 jobs completed in an earlier run" in third.stdout, third.stdout[-3000:]
    by_seed: dict[str, list[str]] = {}
    for run in _all_runs(tmp_path):
        by_seed.setdefault(run.data.tags[names.SEED], []).append(run.info.status)
    # seeds 0 and 1 trained once; seed 2 once KILLED (cancelled with its controller), then again
    assert {seed: sorted(s) for seed, s in by_seed.items()} == {
        "0": ["FINISHED"],
        "1": ["FINISHED"],
        "2": ["FINISHED", "KILLED"],
    }
