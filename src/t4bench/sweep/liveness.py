"""Liveness of RUNNING trials: which worker owns a trial, its heartbeat, and failing the trials of
workers that are gone so that their parameters run again.

Why not Optuna's own heartbeat (`RDBStorage(heartbeat_interval=..., grace_period=...)` with
`optuna.storages.fail_stale_trials`): Optuna 5 implements it for RDB storages only (the default
storage here is a journal file) and records beats only for trials run by `study.optimize` (trials
here are run by ask/tell). So each trial carries user attributes, written through the public
`Trial.set_user_attr`:

    t4bench_host, t4bench_pid   the worker process that asked for it
    t4bench_heartbeat           time.time() of its last beat, every heartbeat_interval seconds

A RUNNING trial of another process is stale when its pid is dead on this host, or when it has not
beaten for `stale_after` seconds (any host). A stale trial is told FAIL and its parameters are
enqueued again (user attribute t4bench_retry_of=<number>), so the interrupted trial is redone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

HOST_ATTR = "t4bench_host"
PID_ATTR = "t4bench_pid"
HEARTBEAT_ATTR = "t4bench_heartbeat"
#: on a re-enqueued trial: the number of the trial it redoes, and why that one failed
RETRY_ATTR = "t4bench_retry_of"
RETRY_REASON_ATTR = "t4bench_retry_reason"
#: on a trial failed for a reason that is not its parameters' fault (interrupted, surplus)
FAILED_ATTR = "t4bench_failed"
STALE_REASON = "stale: worker gone"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child not yet reaped is a zombie: dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def claim(trial: Any) -> None:
    """Mark a freshly asked trial as this process's (before any other worker can judge it)."""
    trial.set_user_attr(HOST_ATTR, socket.gethostname())
    trial.set_user_attr(PID_ATTR, os.getpid())
    trial.set_user_attr(HEARTBEAT_ATTR, time.time())


class Heartbeat:
    """`with Heartbeat(trial, 20.0):` beats every 20 s while the trial's jobs run."""

    def __init__(self, trial: Any, interval: float) -> None:
        self.trial, self.interval = trial, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="t4bench-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            # finished meanwhile, storage hiccup: the next beat tries again
            with contextlib.suppress(Exception):
                self.trial.set_user_attr(HEARTBEAT_ATTR, time.time())

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def is_stale(trial: Any, stale_after: float, now: float | None = None) -> bool:
    """A RUNNING FrozenTrial whose worker is gone (dead pid on this host, or silent too long)."""
    now = time.time() if now is None else now
    attrs = trial.user_attrs
    host, pid = attrs.get(HOST_ATTR), attrs.get(PID_ATTR)
    here = host == socket.gethostname()
    if here and pid == os.getpid():
        return False
    started = trial.datetime_start.timestamp() if trial.datetime_start else now
    beat = float(attrs[HEARTBEAT_ATTR]) if attrs.get(HEARTBEAT_ATTR) is not None else started
    dead = here and pid is not None and not pid_alive(int(pid))
    return dead or now - beat > stale_after


def requeue(study: Any, trial: Any, reason: str) -> None:
    """Enqueue a failed trial's parameters again (the next `ask` of any worker gets them)."""
    if trial.params:
        study.enqueue_trial(dict(trial.params), user_attrs={RETRY_ATTR: trial.number, RETRY_REASON_ATTR: reason})


def fail_stale_trials(study: Any, stale_after: float) -> list[Any]:
    """Fail the stale RUNNING trials and enqueue their parameters again; returns the trials this
    process failed (FrozenTrials), so the caller can close their MLflow runs."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not is_stale(trial, stale_after):
            continue
        try:
            frozen = study.tell(trial.number, state=TrialState.FAIL)
        except (ValueError, UpdateFinishedTrialError):  # another worker failed it first
            continue
        requeue(study, frozen, STALE_REASON)
        failed.append(frozen)
        log.warning(
            "trial %d: worker (pid %s on %s) is gone; failed it and queued its parameters again",
            frozen.number,
            frozen.user_attrs.get(PID_ATTR),
            frozen.user_attrs.get(HOST_ATTR),
        )
    return failed


def excused_failures(trials: list[Any]) -> int:
    """Failed trials that were not their parameters' fault (a worker died, a signal, a surplus
    ask): they do not count towards max_failures."""
    excused = {t.number for t in trials if FAILED_ATTR in t.user_attrs}
    excused |= {int(t.user_attrs[RETRY_ATTR]) for t in trials if RETRY_ATTR in t.user_attrs}
    return len(excused)
