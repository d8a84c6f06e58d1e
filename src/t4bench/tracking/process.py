"""A run's MLflow tracking in a process of its own, so that the training process never imports MLflow.

Importing MLflow and its SQLite store, making the store and creating, filling and closing the run
cost a default run about 2.5 s of its start-up and exit on one core (docs/perf.md). A `python -m
t4bench` command that may be one run starts `python -m t4bench.tracking.worker` first thing
(`prestart`): it imports MLflow on another core while this process composes the config and imports
torch. The run's rank 0 then takes it (`tracker`) and talks to it through a pipe in plain values:
`RemoteTracker` has the surface of `t4bench.tracking.run.RunTracker`, and the worker holds a real
one. Metrics, tags and telemetry points are sent without waiting (the worker writes them in order
while training goes on); opening the run, artifacts and closing it wait for the answer, so the run
is closed (and its UI line printed) before this process prints its summary.

A command that turns out not to be one run (a sweep's parent, `--cfg`, an error) `discard`s the
worker, which then exits; so does a worker whose training process is gone (end of its pipe). The
worker ignores SIGINT and SIGTERM: a Ctrl-C or a scheduler's stop reaches the whole process group,
and the training process still has to close its run through the worker. `T4BENCH_TRACKING_PROCESS=0`
keeps tracking in the training process (as in-process callers of `t4bench.__main__.main` have it).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from t4bench.errors import T4BenchError

if TYPE_CHECKING:
    from t4bench.tracking.run_config import RunConfig
    from t4bench.tracking.run_facts import RunOpening, RunPlace

#: `T4BENCH_TRACKING_PROCESS=0` (or false/off): MLflow in the training process
ENV = "T4BENCH_TRACKING_PROCESS"
#: command-line switches after which a command is not one run (Hydra's own)
_NOT_ONE_RUN = {"-m", "--multirun", "-c", "--cfg", "-i", "--info", "-h", "--help", "--hydra-help", "-sc"}
#: telemetry's (name, value, unix ms, step) points, as `t4bench.telemetry.Sink` takes them
Points = Sequence[tuple[str, float, int, int]]


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Tracker(Protocol):
    """What a rank records its run through: `RunTracker` here, or `RemoteTracker` for a worker."""

    @property
    def run_id(self) -> str | None:
        """The run's id once `begin` made it (a remote tracker waits for it here)."""
        ...

    @property
    def enabled(self) -> bool: ...

    @property
    def run_pending(self) -> bool:
        """A stop came before a tracking process had made the run: it may still make it, and
        closes it with `end`'s status then (`run_id` is None meanwhile)."""
        ...

    def begin(self, cfg: RunConfig, env: RunPlace, tags: Mapping[str, str]) -> None:
        """Create (or adopt) the run and log its config and tags."""

    def stopping(self) -> None:
        """A stop signal came: from now on, wait only briefly for a run still being made."""

    def set_tags(self, tags: Mapping[str, Any]) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None: ...

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None: ...

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None: ...

    def end(self, status: str) -> None: ...

    def heartbeat(self) -> Stoppable: ...

    def telemetry_sink(self) -> Callable[[Points], None]: ...


class Worker:
    """The tracking process and its two pipe ends; every call is thread-safe (telemetry's sampler
    sends from its own thread)."""

    def __init__(self) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "t4bench.tracking.worker", str(to_worker_r), str(from_worker_w)],
            pass_fds=(to_worker_r, from_worker_w),
            stdin=subprocess.DEVNULL,
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._out = Connection(to_worker_w, readable=False)
        self._in = Connection(from_worker_r, writable=False)
        # requests are written whole under one lock (telemetry's sampler sends from its thread);
        # answers are read under another, so that a wait for one never holds a send back
        self._send_lock = threading.Lock()
        self._answer_lock = threading.RLock()  # `call` holds it across `ask` and `answer`
        #: answers asked for (`ask`) and not read yet, oldest first
        self._owed = 0

    def send(self, op: str, *args: Any) -> None:
        """`op` without waiting; a failure is the worker's one warning line on stderr."""
        with self._send_lock:
            self._write(op, args, False)

    def ask(self, op: str, *args: Any) -> None:
        """`op`, whose answer `answer` reads later."""
        with self._send_lock:
            self._write(op, args, True)
            self._owed += 1

    def answer(self, timeout_s: float | None = None) -> tuple[bool, Any]:
        """(True, the oldest owed answer), or its error raised here; (False, None) when it has not
        come within `timeout_s` (None: wait for it). A stop signal while waiting leaves it owed."""
        with self._answer_lock:
            assert self._owed, "no answer owed"
            # poll first: a signal's exception raised while waiting then never cuts a message in two
            try:
                if not self._in.poll(timeout_s):
                    return False, None
                status, value = self._in.recv()
            except (EOFError, OSError):
                raise T4BenchError(self._gone()) from None
            self._owed -= 1
        if status == "t4bench":
            raise T4BenchError(value)
        if status == "error":
            raise RuntimeError(f"tracking process: {value}")
        return True, value

    def call(self, op: str, *args: Any) -> Any:
        """`op`, once every earlier one is done; its answer, or its error raised here."""
        with self._answer_lock:  # answers come back in the order they were asked for
            while self._owed:  # answers asked for earlier come first; their errors were nobody's
                with contextlib.suppress(T4BenchError, RuntimeError):
                    self.answer()
            self.ask(op, *args)
            return self.answer()[1]

    def close(self, timeout_s: float = 30.0) -> None:
        """Let the worker finish what it was sent and exit (killed after `timeout_s`)."""
        for end in (self._out, self._in):
            end.close()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()  # reaped: no zombie, and its copies of our stdout/stderr are closed

    def _write(self, op: str, args: tuple[Any, ...], answer: bool) -> None:
        try:
            self._out.send((op, args, answer))
        except OSError:
            raise T4BenchError(self._gone()) from None

    def _gone(self) -> str:
        code = self.process.poll()
        return f"the tracking process (pid {self.process.pid}) ended" + (f" with exit code {code}" if code else "")


_prestarted: Worker | None = None


def wanted(argv: Sequence[str], rank: int, environ: Mapping[str, str]) -> bool:
    """Whether `python -m t4bench ARGV` may be one run that this process tracks (no sweep, no
    `--cfg`/`--help`, not a non-zero `rank` of an outer launcher, not turned off)."""
    if environ.get(ENV, "1").lower() in ("0", "false", "off", "no"):
        return False
    return rank == 0 and not any(arg in _NOT_ONE_RUN for arg in argv)


def prestart(argv: Sequence[str], rank: int) -> None:
    """Start the tracking process now, when this command may be one run (`wanted`); `rank`: this
    process's under an outer launcher (`t4bench.run_env.launched_rank`)."""
    global _prestarted
    if _prestarted is None and wanted(argv, rank, os.environ):
        _prestarted = Worker()


def discard() -> None:
    """This process records no run of its own: the prestarted worker exits."""
    global _prestarted
    if _prestarted is not None:
        _prestarted.close()
        _prestarted = None


def tracker(tracking_uri: str, run_id: str | None) -> Tracker:
    """Rank 0's tracker: the prestarted worker's, or MLflow in this process."""
    global _prestarted
    worker, _prestarted = _prestarted, None
    if worker is not None and tracking_uri:
        return RemoteTracker(worker, tracking_uri, run_id)
    if worker is not None:
        worker.close()
    from t4bench.tracking.run import RunTracker

    return RunTracker(tracking_uri, run_id)


class RemoteTracker:
    """`RunTracker`'s surface, served by a worker (the arguments travel as plain values)."""

    #: how long after a stop signal a run the worker is still making (a stalled server) is waited
    #: for: a scheduler's grace between SIGTERM and SIGKILL (Slurm's KillWait: 30 s) covers it
    STOP_WAIT_S = 5.0
    #: how long the worker then has to close such a run before it is killed: a stop is prompt, and
    #: the worker's inherited stdout/stderr would keep a pipe the user reads (`| tee`) open
    LAST_WORDS_S = 1.0

    def __init__(self, worker: Worker, tracking_uri: str, run_id: str | None) -> None:
        self.worker, self.tracking_uri = worker, tracking_uri
        self._run_id, self._begun, self._asked = run_id, False, False
        #: until when `run_id` waits for the run (None: until it is made; `stopping` sets it)
        self._deadline: float | None = None
        # the store is opened (a new one made) while this process goes on; a relative URI means
        # the same file there
        worker.send("open", tracking_uri, run_id, os.getcwd())

    @property
    def enabled(self) -> bool:
        return True

    def begin(self, cfg: RunConfig, env: RunPlace, tags: Mapping[str, str]) -> None:
        """Sent, not waited for: the worker makes the run while this process builds data and
        model. A value the run cannot take (`run_facts.opening`) raises here, before any run."""
        from t4bench.tracking.run_facts import opening

        self.begin_with(opening(cfg, env, tags))

    def begin_with(self, values: RunOpening) -> None:
        """`begin` from the run's plain values."""
        self.worker.send("start", values)
        self._run_id, self._begun, self._asked = None, True, False

    def stopping(self) -> None:
        if self._deadline is None:
            self._deadline = time.monotonic() + self.STOP_WAIT_S

    @property
    def run_pending(self) -> bool:
        return self._begun and self._deadline is not None

    @property
    def run_id(self) -> str | None:
        """The run's id; the first read after `begin` waits for the worker to have made it, and
        raises (once) what kept it from doing so. After `stopping`, None while it is still made."""
        if self._begun:
            if not self._asked:
                self.worker.ask("run_id")
                self._asked = True
            try:
                wait_s = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
                came, value = self.worker.answer(wait_s)
            except (T4BenchError, RuntimeError):
                self._begun = False  # raised once; the run is None from now on
                raise
            if came:
                self._begun, self._run_id = False, str(value)
        return self._run_id

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.worker.send("set_tags", {str(k): str(v) for k, v in tags.items()})

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        now = int(time.time() * 1000)  # when it was measured, not when the worker writes it
        self.worker.send("log_metrics", {str(k): float(v) for k, v in metrics.items()}, step, now)

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        self.log_metrics(metrics, step=epoch)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self.worker.call("log_artifact", str(Path(path).resolve()), artifact_path)

    def end(self, status: str) -> None:
        if self._begun:  # stopped while the worker still makes the run: it closes it if it can
            self.worker.send("end", status)
            self.worker.close(self.LAST_WORDS_S)
            return
        try:
            self.worker.call("end", status)
        finally:
            self.worker.close()

    def heartbeat(self) -> Stoppable:
        from t4bench import faults

        faults.kill_point("training.run_created")  # in the training process: the run is its own
        self.worker.send("heartbeat", os.getpid())
        return _RemoteHeartbeat(self.worker)

    def telemetry_sink(self) -> Callable[[Points], None]:
        def sink(points: Points) -> None:
            self.worker.send("telemetry", [tuple(point) for point in points])

        return sink


class _RemoteHeartbeat:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def stop(self) -> None:
        self.worker.send("heartbeat_stop")
