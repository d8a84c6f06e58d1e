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
from types import FrameType

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
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def hold_stop() -> set[int | signal.Signals] | None:
    """Hold SIGTERM and SIGINT back (the kernel keeps them pending) until `release`: a trial claimed
    from the study is RUNNING there before the code that fails and requeues it on a stop signal has
    started, so a signal in between would leave it RUNNING. Returns the mask to give `release`;
    None off the main thread (signals reach only the main thread's handlers) or without
    pthread_sigmask."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)


def release(held: set[int | signal.Signals] | None) -> None:
    """Restore the mask `hold_stop` returned: a signal that came meanwhile is delivered now, and its
    handler raises at the caller's next bytecode."""
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
