"""`python -m t4bench.tracking.worker READ_FD WRITE_FD`: the tracking process of one run
(`t4bench.tracking.process`). It imports MLflow at once, then serves the training process's
requests in order from the pipe on a real `RunTracker`, and exits after the run's end or when the
pipe closes (its training process is gone: the run is left as that process left it, for the
heartbeat's `repair`, as it would be without a tracking process)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from t4bench.errors import T4BenchError


class Served:
    """The run the training process tracks through this process: one request, one method."""

    def __init__(self) -> None:
        from t4bench.tracking.run import RunTracker

        self.tracker: RunTracker | None = None
        #: why `start` made no run (raised to the training process when it asks for the run's id)
        self.start_error: Exception | None = None
        self.beating: Any = None
        self.sink: Any = None

    def open(self, tracking_uri: str, run_id: str | None, cwd: str) -> None:
        from t4bench.tracking.run import RunTracker

        os.chdir(cwd)
        self.tracker = RunTracker(tracking_uri, run_id)

    def start(self, values: Any) -> None:
        try:
            self._tracker().open(values)
        except Exception as err:
            self.start_error = err
            if self.tracker is not None:  # no run to write to: what follows is a no-op, not a warning
                self.tracker.run_id = None

    def run_id(self) -> str:
        if self.start_error is not None:
            raise self.start_error
        return str(self._tracker().run_id or "")

    def set_tags(self, tags: dict[str, str]) -> None:
        self._tracker().set_tags(tags)

    def log_metrics(self, metrics: dict[str, float], step: int, stamp_ms: int) -> None:
        self._tracker().log_stamped(metrics, step, stamp_ms)

    def log_artifact(self, path: str, artifact_path: str | None) -> None:
        self._tracker().log_artifact(Path(path), artifact_path)

    def heartbeat(self, owner_pid: int) -> None:
        from t4bench.tracking import liveness

        tracker = self.tracker
        if tracker is None or not tracker.run_id or tracker.tracking_uri is None:
            return  # no run was made: the training process hears why when it asks for its id
        self.beating = liveness.Heartbeat(tracker.tracking_uri, tracker.run_id, owner_pid=owner_pid).start()

    def heartbeat_stop(self) -> None:
        if self.beating is not None:
            self.beating.stop()
            self.beating = None

    def telemetry(self, points: list[tuple[str, float, int, int]]) -> None:
        if self.tracker is None or not self.tracker.run_id:
            return
        if self.sink is None:
            self.sink = self.tracker.telemetry_sink()
        self.sink(points)

    def end(self, status: str) -> None:
        self.heartbeat_stop()
        self._tracker().end(status)

    def _tracker(self) -> Any:
        if self.tracker is None:
            raise T4BenchError("tracking process: no store opened")
        return self.tracker


def serve(requests: Connection, answers: Connection) -> None:
    served = Served()
    while True:
        try:
            op, args, answer = requests.recv()
        except (EOFError, OSError):  # the training process is gone, or let this one go
            served.heartbeat_stop()
            return
        reply: tuple[str, Any]
        try:
            reply = ("ok", getattr(served, op)(*args))
        except T4BenchError as err:
            reply = ("t4bench", str(err))
        except Exception as err:
            reply = ("error", f"{type(err).__name__}: {err}")
        if answer:
            # OSError: the training process stopped waiting and is gone; what it sent is still done
            with contextlib.suppress(OSError):
                answers.send(reply)
        elif reply[0] != "ok":  # nobody waits for it: one line, and the run goes on
            print(f"t4bench: warning: tracking {op} failed: {reply[1]}".splitlines()[0], file=sys.stderr, flush=True)
        if op == "end" and reply[0] == "ok":
            return


def main(argv: list[str]) -> None:
    # a Ctrl-C or a scheduler's SIGTERM reaches the whole process group: the training process
    # handles it and still closes its run through this one
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    requests = Connection(int(argv[0]), writable=False)
    answers = Connection(int(argv[1]), readable=False)
    # what every tracked run needs, imported now: the training process is importing torch meanwhile
    import mlflow.tracking

    with contextlib.suppress(ImportError):  # the SQLite store's module (a server URI skips it)
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    serve(requests, answers)
    sys.stdout.flush()
    sys.stderr.flush()
    # MLflow's threads (system metrics) are stopped; its module teardown would only delay the
    # training process, which waits for this exit
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
