"""A run's MLflow tracking in a process of its own (t4bench.tracking.process): real `python -m
t4bench` runs, a real worker process and a real SQLite store; the training process must not import
MLflow, the run must hold what an in-process tracker writes, and a stop or a kill of the training
process must leave the run as before (closed KILLED; RUNNING until `runs repair`) with no worker left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import run_cli, start_cli

from t4bench.errors import T4BenchError
from t4bench.tracking import names, process

NCF = ("model=ncf", "progress=plain")
MLFLOW_IMPORT = re.compile(r"\|\s+mlflow(\.|$)", re.M)


def _only_run(store: Path):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 1, runs
    return client, runs[0]


def _workers_of(pid: int) -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process(pid).children(recursive=True)
        if "t4bench.tracking.worker" in " ".join(child.cmdline())
    ]


def _gone(proc: psutil.Process, within_s: float = 20.0) -> bool:
    try:
        proc.wait(timeout=within_s)
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.mark.parametrize("in_process", [False, True], ids=["tracking-process", "T4BENCH_TRACKING_PROCESS=0"])
def test_a_run_is_tracked_alike_with_and_without_its_tracking_process(tmp_path: Path, in_process: bool) -> None:
    from t4bench.tracking.tags import run_tags

    env = {process.ENV: "0"} if in_process else {}
    proc = run_cli(*NCF, "max_epochs=1", store=tmp_path, env=env, python_options=["-X", "importtime"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the switch is what decides where MLflow is imported
    assert bool(MLFLOW_IMPORT.search(proc.stderr)) is in_process
    client, run = _only_run(tmp_path)
    assert run.info.status == names.FINISHED
    assert run.data.tags[names.OUTCOME] == names.OUTCOME_NOT_CONVERGED
    assert [m.step for m in client.get_metric_history(run.info.run_id, names.TRAIN_LOSS)] == [1]
    assert names.RUN_WALL_S in run.data.metrics and names.TIME_TO_TRAIN_S not in run.data.metrics
    assert run.data.params["model.name"] == "ncf" and len(run.data.params) > 50
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {names.RESOLVED_CONFIG_FILE, names.MLPERF_LOG_FILE, names.RUN_TAGS_FILE} <= artifacts
    tags = run_tags(client, run)
    # the heartbeat names the training process, not the tracking process that writes it
    assert tags[names.HOST] and tags[names.HEARTBEAT]
    assert tags[names.SYSTEM_METRICS].startswith(("on:", "off:"))
    # the UI line (printed where the run is closed) comes before the run's summary
    ui, summary = proc.stdout.find("MLflow UI:"), proc.stdout.find("outcome")
    assert 0 <= ui < summary, proc.stdout[-2000:]


def test_the_heartbeat_names_the_training_process(tmp_path: Path) -> None:
    from t4bench.tracking.tags import run_tags

    proc = start_cli(*NCF, "max_epochs=2", store=tmp_path, until="epoch")
    workers = _workers_of(proc.pid)
    assert len(workers) == 1, "one tracking process per run"
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    client, run = _only_run(tmp_path)
    assert run_tags(client, run)[names.PID] == str(proc.pid)
    assert _gone(workers[0])


def test_a_sigterm_to_the_process_group_closes_the_run_killed_and_ends_the_worker(tmp_path: Path) -> None:
    proc = start_cli(*NCF, "max_epochs=50", store=tmp_path, until="epoch", env={}, stderr=subprocess.PIPE)
    workers = _workers_of(proc.pid)
    assert len(workers) == 1
    os.kill(proc.pid, signal.SIGTERM)
    workers[0].send_signal(signal.SIGTERM)  # as a scheduler's stop of the whole group reaches it too
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    _, run = _only_run(tmp_path)
    assert run.info.status == names.KILLED
    assert run.data.tags[names.OUTCOME] == names.OUTCOME_KILLED
    assert _gone(workers[0])


def test_a_killed_training_process_leaves_its_run_to_repair_and_its_worker_exits(tmp_path: Path) -> None:
    proc = start_cli(*NCF, "max_epochs=50", store=tmp_path, until="epoch")
    workers = _workers_of(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _gone(workers[0]), "the worker outlived its training process"
    _, run = _only_run(tmp_path)
    assert run.info.status == names.RUNNING  # as without a tracking process: the kill left it so
    repaired = run_cli("repair", store=tmp_path, module="t4bench.runs")
    assert repaired.returncode == 0, repaired.stderr
    assert f"run {run.info.run_id}" in repaired.stdout + repaired.stderr
    _, run = _only_run(tmp_path)
    assert run.info.status == names.KILLED


def test_no_worker_for_a_command_that_is_not_one_run() -> None:
    assert process.wanted(["model=ncf"], 0, {})
    assert not process.wanted(["--multirun", "seed=1,2"], 0, {})
    assert not process.wanted(["model=ncf", "--cfg", "job"], 0, {})
    assert not process.wanted(["model=ncf"], 1, {})  # a non-zero rank of torchrun or srun
    assert not process.wanted(["model=ncf"], 0, {process.ENV: "0"})


def test_a_command_that_is_not_one_run_discards_its_worker() -> None:
    """`hydra.mode=MULTIRUN` (or a sweep preset) is a sweep that `wanted` cannot see on the
    command line: its parent discards the prestarted worker once the config says so."""
    process.prestart(["model=ncf", "hydra.mode=MULTIRUN"], 0)
    worker = process._prestarted
    assert worker is not None
    process.discard()
    assert process._prestarted is None
    assert worker.process.wait(timeout=30) == 0


def test_a_sweep_set_by_the_config_runs_with_its_worker_discarded(tmp_path: Path) -> None:
    proc = run_cli(*NCF, "max_epochs=1", "seed=1,2", "hydra.mode=MULTIRUN", store=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    seed_runs = [r for r in runs if "seed" in r.data.params]  # the sweep's parent run has none
    assert sorted(r.data.params["seed"] for r in seed_runs) == ["1", "2"]
    assert {r.info.status for r in runs} == {names.FINISHED}


def test_errors_come_back_from_the_worker_as_one_line() -> None:
    worker = process.Worker()
    try:
        with pytest.raises(T4BenchError, match="no store opened"):
            worker.call("run_id")
        with pytest.raises(RuntimeError, match="AttributeError"):
            worker.call("no_such_request")
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)
        with pytest.raises(T4BenchError, match=f"tracking process \\(pid {worker.process.pid}\\) ended"):
            worker.call("end", names.FINISHED)
    finally:
        worker.close(timeout_s=5)


def test_the_worker_ignores_a_ctrl_c_of_the_group() -> None:
    worker = process.Worker()
    try:
        time.sleep(0.5)  # its signal handlers are set before it imports MLflow
        os.kill(worker.process.pid, signal.SIGINT)
        with pytest.raises(T4BenchError, match="no store opened"):
            worker.call("run_id")  # still serving
    finally:
        worker.close(timeout_s=30)
    assert worker.process.returncode == 0


def test_a_run_the_worker_cannot_make_is_raised_once_when_its_id_is_needed(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    """The worker makes the run while the training process builds data and model; what kept it
    from making it is raised where the id is first needed (before the timed span), once, and the
    heartbeat and telemetry sent meanwhile add no line of their own."""
    from t4bench.tracking.run_facts import RunOpening

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    missing = "f" * 32  # adopting a run that does not exist
    tracker = process.RemoteTracker(process.Worker(), uri, missing)
    tracker.begin_with(RunOpening("t4bench-ncf", "ncf", {"seed": "1"}, {}, None))
    tracker.heartbeat().stop()
    tracker.telemetry_sink()([("system/gpu_0_power_watts", 1.0, 0, 0)])
    tracker.log_metrics({"train_loss": 1.0}, step=1)
    with pytest.raises(RuntimeError, match=missing):
        _ = tracker.run_id
    assert tracker.run_id is None  # raised once: the error paths that read it again go on
    tracker.worker.close()
    assert tracker.worker.process.returncode == 0
    assert "warning" not in capfd.readouterr().err


def test_an_answer_nobody_read_does_not_answer_the_next_call() -> None:
    worker = process.Worker()
    try:
        worker.ask("run_id")  # its answer (an error: no store) is owed, and never read
        with pytest.raises(RuntimeError, match="AttributeError"):
            worker.call("no_such_request")  # this call's own answer, not the owed one
    finally:
        worker.close(timeout_s=30)
    assert worker.process.returncode == 0


def test_a_stop_waits_only_briefly_for_a_run_a_stalled_store_still_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a stop signal the run's id is waited for `STOP_WAIT_S` once, not for ever; `end` then
    leaves the worker `LAST_WORDS_S` to close a run it made late, and kills it after."""
    from stalling_mlflow import stalling_mlflow

    from t4bench.tracking.run_facts import RunOpening

    monkeypatch.setattr(process.RemoteTracker, "STOP_WAIT_S", 1.0)
    with stalling_mlflow() as server:
        tracker = process.RemoteTracker(process.Worker(), server.uri, None)
        tracker.begin_with(RunOpening("t4bench-ncf", "ncf", {"seed": "1"}, {}, None))
        assert server.posts.wait(60), "the worker never asked the server to create the experiment"
        tracker.stopping()
        started = time.monotonic()
        assert tracker.run_id is None and tracker.run_pending
        assert tracker.run_id is None  # the deadline is spent: no second wait
        waited_s = time.monotonic() - started
        tracker.end(names.KILLED)
        assert tracker.worker.process.poll() is not None  # killed, not left holding the output pipes
    assert 0.9 <= waited_s < 10.0  # the held POST would have kept it 30 s
