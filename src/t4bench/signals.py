"""SIGTERM as an exception, so a run being stopped (a scheduler, a launcher, Ctrl-C's cousin) still
closes its MLflow run as KILLED and leaves no rank behind. Used by a rank, by the process that
starts ranks, and by the sweep's trial loop.

Python runs a signal's handler between two bytecodes of the main thread, which can be inside a
weakref callback or a `__del__` (garbage collection runs them anywhere); an exception raised there
is printed as "Exception ignored in: ..." and dropped, and the run would train on to FINISHED (seen
with a scancel'ed Slurm job, whose SIGTERM landed in a WeakKeyDictionary's callback while its run
started). Such a dropped RunTerminated is caught by `sys.unraisablehook` and the signal sent to the
main thread again, so that it raises where the run is; a block that ends before that still raises.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from t4bench.errors import RunTerminated

#: how long after a dropped RunTerminated the signal comes again (the finalizer is long over)
_AGAIN_S = 0.05


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside: SIGTERM raises `RunTerminated` in the main thread; the previous handler comes back
    on exit. A SIGTERM whose exception Python dropped raises again at once, or at the block's end."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (threaded sweep jobs)
        return
    main = threading.main_thread().ident
    assert main is not None
    raised: list[RunTerminated] = []
    inside = [True]
    lock = threading.Lock()  # no signal sent again once the previous handler is back

    def handler(signum: int, frame: FrameType | None) -> None:
        raised.append(RunTerminated(f"signal {signum}"))
        raise raised[-1]

    def again(signum: int) -> None:
        time.sleep(_AGAIN_S)  # sent at once, it could raise in the hook itself (dropped for good)
        with lock:
            if inside[0]:
                signal.pthread_kill(main, signum)

    def dropped(unraisable: sys.UnraisableHookArgs) -> None:
        if any(unraisable.exc_value is err for err in raised):
            # from a thread, a moment later: sent from here, the handler would run (and be dropped) here
            threading.Thread(target=again, args=(signal.SIGTERM,), daemon=True).start()
        else:
            previous_hook(unraisable)

    previous_hook = sys.unraisablehook
    sys.unraisablehook = dropped
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        try:
            with lock:
                inside[0] = False
        finally:  # also when a signal sent just before raises here
            signal.signal(signal.SIGTERM, previous)
            sys.unraisablehook = previous_hook
    if raised:  # the block ended normally although SIGTERM came: its exception was dropped
        raise RunTerminated(str(raised[0]))


#: the signals that stop a sweep: held while a trial is claimed (see `hold_stop`)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class Held:
    """Stop signals held back by `hold_stop`: the handlers to restore, and what came meanwhile."""

    previous: dict[int, Any]
    came: list[int] = field(default_factory=list)


def hold_stop() -> Held | None:
    """Hold SIGTERM and SIGINT back until `release`: a trial claimed from the study is RUNNING
    there before the code that fails and requeues it on a stop signal has started, so a signal in
    between would leave it RUNNING. Their handlers only note the signal meanwhile; a signal mask
    would not do, as the kernel hands a process's signal to any thread that does not block it
    (MLflow's and Optuna's threads), whose note then runs the main thread's handler anyway. None
    off the main thread (handlers are set only there)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    held = Held({})

    def note(signum: int, frame: FrameType | None) -> None:
        held.came.append(signum)

    for stop in _STOP_SIGNALS:
        held.previous[stop] = signal.signal(stop, note)
    return held


def release(held: Held | None) -> None:
    """Restore the handlers `hold_stop` replaced; a signal that came meanwhile is raised again now,
    and its handler runs at the caller's next bytecode."""
    if held is None:
        return
    for stop, handler in held.previous.items():
        signal.signal(stop, handler)
    if held.came:
        signal.raise_signal(held.came[0])
