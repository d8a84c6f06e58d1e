"""Starting the ranks of a TensorFlow run (`hw.count=N`, no outer launcher), without torch's
elastic launcher (a TensorFlow run never imports torch).

- CPU: N worker processes (`python -m t4bench.tf.worker`), each with TF_CONFIG naming the cluster
  (N localhost gRPC ports) and its index, plus RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE
  (what `run_env` reads). When one fails the others are stopped and the error names it.
- GPU: no processes at all: MirroredStrategy drives the host's GPUs from this one process, so
  `fn` runs here as rank 0 of N.

Same signature and result as `t4bench.pytorch.launch.spawn`: run `fn(*args)` on every rank, return rank
0's result; `fn` must be importable by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from t4bench.errors import RanksFailed
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec

#: the t4bench.launcher tag of ranks started here
LAUNCHER_NAME = "t4bench.tf.launch (TF_CONFIG)"
#: seconds between polls of the worker processes
_POLL_S = 0.5
#: seconds a stopped worker gets to exit before it is killed
_GRACE_S = 10.0


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def rank_environ(rank: int, world: int, ports: list[int] | None) -> dict[str, str]:
    variables = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world)}
    if ports is not None:
        cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
        variables["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": rank}})
    return variables


@contextlib.contextmanager
def _as_rank_zero(world: int) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in rank_environ(0, world, None)}
    os.environ.update(rank_environ(0, world, None))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def spawn(cfg: RunSpec, env: RunEnvironment, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    if env.device_kind == "cuda":
        with _as_rank_zero(env.world_size):
            return fn(*args)
    workdir = Path(tempfile.mkdtemp(prefix="t4bench-tf-"))
    try:
        return _run_workers(env.world_size, fn, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_workers(world: int, fn: Callable[..., Any], args: tuple[Any, ...], workdir: Path) -> Any:
    job = workdir / "job.pkl"
    job.write_bytes(pickle.dumps((fn, args)))
    ports = _free_ports(world)
    procs: list[subprocess.Popen[bytes]] = []
    logs = [workdir / f"rank{rank}.stderr" for rank in range(world)]
    try:
        for rank in range(world):
            with logs[rank].open("wb") as stderr:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "t4bench.tf.worker", str(job), str(workdir / f"result{rank}.pkl")],
                        env={**os.environ, **rank_environ(rank, world, ports)},
                        stderr=stderr,
                    )
                )
        failed = _wait(procs)
        if failed:
            raise RanksFailed(
                f"{len(failed)} of the launched TensorFlow ranks failed: "
                + "; ".join(f"rank {rank} (exit code {code}): {_last_line(logs[rank])}" for rank, code in failed)
            )
        return pickle.loads((workdir / "result0.pkl").read_bytes())
    finally:
        _stop(procs)


def _wait(procs: list[subprocess.Popen[bytes]]) -> list[tuple[int, int]]:
    """Wait for every worker; as soon as one fails, stop the rest (they would wait in a collective
    until its timeout). Returns the failed ranks with their exit codes."""
    while True:
        codes = [proc.poll() for proc in procs]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed or all(code == 0 for code in codes):
            return failed
        time.sleep(_POLL_S)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        proc.terminate()
    deadline = time.monotonic() + _GRACE_S
    for proc in running:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _last_line(log: Path) -> str:
    """The worker's error: its `t4bench: error:` line if it printed one, else its last line."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.exists() else []
    errors = [line for line in lines if line.startswith("t4bench: error:")]
    return (errors or lines or ["no output"])[-1]
