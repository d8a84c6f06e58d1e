"""Runs left RUNNING by a process that died (issue 17.5): the heartbeat tags, `repair` on real
processes killed with SIGKILL, and what it must leave alone (live processes, runs on other hosts
that still beat, runs without a heartbeat)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import start_cli
from mlflow.tracking import MlflowClient

from t4bench.tracking import liveness as runs
from t4bench.tracking import names
from t4bench.tracking.client import mlflow_client
from t4bench.tracking.tags import run_tags

REPO = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
}

CHILD = textwrap.dedent("""
    import sys, time
    from mlflow.tracking import MlflowClient
    from t4bench.tracking.liveness import Heartbeat
    client = MlflowClient(sys.argv[1])
    found = client.get_experiment_by_name("victims")
    experiment = found.experiment_id if found else client.create_experiment("victims")
    run = client.create_run(experiment, run_name="victim")
    Heartbeat(sys.argv[1], run.info.run_id, interval_s=0.5).start()
    print(run.info.run_id, flush=True)
    time.sleep(600)
""")


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, MlflowClient]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    client.create_experiment("victims", artifact_location=(tmp_path / "artifacts").as_uri())
    return uri, client


def start_victim(uri: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, uri], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    run_id = proc.stdout.readline().strip()
    assert len(run_id) == 32, run_id
    return proc, run_id


def repair_cli(uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t4bench.runs", "repair", "--tracking-uri", uri, *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sigkilled_process_is_repaired(store: tuple[str, MlflowClient]) -> None:
    uri, client = store
    proc, run_id = start_victim(uri)
    try:
        tags = client.get_run(run_id).data.tags
        assert tags[names.PID] == str(proc.pid) and tags[names.HOST] == socket.gethostname()
        first_beat = int(tags[names.HEARTBEAT])
        # alive: repair leaves it
        assert runs.repair(client) == []
        time.sleep(1.6)
        assert int(client.get_run(run_id).data.tags[names.HEARTBEAT]) >= first_beat  # it keeps beating
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert client.get_run(run_id).info.status == "RUNNING"  # nobody could close it
    dry = repair_cli(uri, "--dry-run")
    assert dry.returncode == 0 and f"run {run_id}" in dry.stdout and "would be marked KILLED" in dry.stdout
    assert client.get_run(run_id).info.status == "RUNNING"
    done = repair_cli(uri)
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} (victim, experiment" in done.stdout and f"process {proc.pid}" in done.stdout
    run = client.get_run(run_id)
    assert run.info.status == "KILLED" and run.data.tags["t4bench.outcome"] == "killed"
    # its last sign of life (the liveness tags moved to the closed run's tag file)
    assert run.info.end_time == int(run_tags(client, run)[names.HEARTBEAT]) * 1000
    assert names.HEARTBEAT not in run.data.tags
    assert "1 stale run(s) marked KILLED" in done.stdout
    again = repair_cli(uri)
    assert "0 stale run(s)" in again.stdout


def test_next_heartbeat_repairs_its_experiment(store: tuple[str, MlflowClient]) -> None:
    """The check at the start of every run: a new run's heartbeat closes the dead one."""
    uri, client = store
    proc, dead = start_victim(uri)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    experiment = client.get_experiment_by_name("victims").experiment_id
    live = client.create_run(experiment).info.run_id
    beat = runs.Heartbeat(uri, live, interval_s=60).start()
    try:
        for _ in range(100):
            if client.get_run(dead).info.status != "RUNNING":
                break
            time.sleep(0.1)
        assert client.get_run(dead).info.status == "KILLED"
        assert client.get_run(live).info.status == "RUNNING"
    finally:
        beat.stop()


def _tagged_run(client: MlflowClient, **tags: str) -> str:
    experiment = client.get_experiment_by_name("victims").experiment_id
    run_id = client.create_run(experiment).info.run_id
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    return run_id


def test_what_repair_leaves_alone(store: tuple[str, MlflowClient]) -> None:
    _, client = store
    now = int(time.time())
    me = _tagged_run(
        client,
        **{
            names.HOST: socket.gethostname(),
            names.PID: str(os.getpid()),
            names.PID_START: runs.pid_start_time(os.getpid()) or "",
            names.PID_NAMESPACE: runs.pid_namespace(),
            names.HEARTBEAT: str(now - 3600),  # a live process: the age does not matter
        },
    )
    # same host name, another pid namespace (a container on host networking): judged by its beat
    container = _tagged_run(
        client,
        **{
            names.HOST: socket.gethostname(),
            names.PID: "999999",
            names.PID_NAMESPACE: "pid:[1]",
            names.HEARTBEAT_INTERVAL_S: "30",
            names.HEARTBEAT: str(now - 10),
        },
    )
    elsewhere = _tagged_run(
        client,
        **{names.HOST: "other-host", names.PID: "1", names.HEARTBEAT_INTERVAL_S: "30", names.HEARTBEAT: str(now - 60)},
    )
    untracked = _tagged_run(client)
    assert runs.repair(client) == []
    for run_id in (me, container, elsewhere, untracked):
        assert client.get_run(run_id).info.status == "RUNNING"
        client.set_terminated(run_id)


def test_silent_other_host_and_reused_pid(store: tuple[str, MlflowClient]) -> None:
    _, client = store
    now = int(time.time())
    silent = _tagged_run(
        client,
        **{names.HOST: "other-host", names.PID: "1", names.HEARTBEAT_INTERVAL_S: "30", names.HEARTBEAT: str(now - 600)},
    )
    # this process's pid, but started at another time: the run's process is gone, the pid reused
    reused = _tagged_run(
        client,
        **{
            names.HOST: socket.gethostname(),
            names.PID: str(os.getpid()),
            names.PID_START: "1",
            names.PID_NAMESPACE: runs.pid_namespace(),
            names.HEARTBEAT: str(now),
        },
    )
    verdicts = {v.run_id: v.reason for v in runs.repair(client)}
    assert set(verdicts) == {silent, reused}
    assert "no heartbeat from other-host for" in verdicts[silent]
    assert f"process {os.getpid()}" in verdicts[reused]


def test_sigkilled_t4bench_run_is_repaired(tmp_path: Path) -> None:
    """A real `python -m t4bench` killed with SIGKILL mid-training, then `repair`: KILLED."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    overrides = ("progress=plain", "hw.telemetry.enabled=false", "max_epochs=50", "model.target.hr_at_10=0.99")
    # returned once it trains: the run and its heartbeat exist
    proc = start_cli(*overrides, store=tmp_path, until="init took")
    client = MlflowClient(uri)
    try:
        (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
        assert names.HEARTBEAT in run.data.tags
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert client.get_run(run.info.run_id).info.status == "RUNNING"
    done = repair_cli(uri)
    assert done.returncode == 0 and "1 stale run(s) marked KILLED" in done.stdout
    assert client.get_run(run.info.run_id).info.status == "KILLED"
