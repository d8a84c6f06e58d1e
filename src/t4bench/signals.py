"""SIGTERM as an exception, so a run being stopped (a scheduler, a launcher, Ctrl-C's cousin) still
closes its MLflow run as KILLED and leaves no rank behind. Used by a rank, by the process that
starts ranks, and by the sweep's trial loop."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from t4bench.errors import RunTerminated


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside: SIGTERM raises `RunTerminated` in the main thread; the previous handler comes back
    on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (threaded sweep jobs)
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise RunTerminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
