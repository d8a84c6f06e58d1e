"""Runs whose process is gone: a heartbeat while a run lives, and `repair` for those left RUNNING.

A run's process cannot close its MLflow run when it is killed with SIGKILL, runs out of memory or
loses its machine. While a run trains, `Heartbeat` tags it with its host, pid (and the pid's start
time, so a reused pid is not taken for the run's) and `t4bench.heartbeat` = unix time, refreshed
every `interval_s` from a daemon thread. `repair` marks a RUNNING run KILLED (outcome `killed`)
when its process is gone: on this host, the pid is dead or belongs to another process; on another
host, no heartbeat for `STALE_INTERVALS` intervals. Every heartbeat's first beat also repairs its
own experiment, so a stale run is closed at the start of the next one.

A process can die between creating a run and tagging it, so the tags that say who owns a run
(`owner_tags`) go into the very call that creates a sweep's parent and trial runs. A training run
is created first and tagged by its heartbeat a moment later: one with no heartbeat is judged by
what it belongs to (its parent run, closed as gone: its in-process children go with it) and by its
age (`NO_BEAT_LIMIT_S` after its start). Runs without t4bench tags (other tools') are left alone.

The command line (`python -m t4bench.runs repair`) is `t4bench.tracking.runs_command`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from t4bench.tracking import names, search
from t4bench.tracking.client import mlflow_client

DEFAULT_INTERVAL_S = 30.0
#: a run on another host is stale after this many missed heartbeats (slow stores, clock skew)
STALE_INTERVALS = 5
#: a t4bench training run still without a heartbeat this long after its start never got one (its
#: process died between creating it and starting the heartbeat); generous, since a launcher may
#: create the run minutes before its ranks start training
NO_BEAT_LIMIT_S = 600.0

log = logging.getLogger(__name__)


def pid_start_time(pid: int) -> str | None:
    """The process's start time from /proc (None off Linux or when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the ")" of the command name: state is field 3, starttime field 22 of stat(5)
    return fields[19] if len(fields) > 19 else None


def pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def process_alive(pid: int, start_time: str | None = None) -> bool:
    """Whether `pid` still runs the process that tagged the run (a zombie is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True  # no /proc (not Linux): the signal check is all there is
    if fields and fields[0] in ("Z", "X"):
        return False
    return start_time is None or len(fields) <= 19 or fields[19] == start_time


def owner_tags(interval_s: float = DEFAULT_INTERVAL_S, pid: int | None = None) -> dict[str, str]:
    """The tags that make a RUNNING run this process's (host, pid, the pid's start time and
    namespace) with a first heartbeat now: given to `create_run` itself, a run can never exist
    without them, however the process dies. `pid`: the training process, when a tracking process
    on the same host writes for it (t4bench.tracking.process); this one by default."""
    pid = os.getpid() if pid is None else pid
    return {
        names.HOST: socket.gethostname(),
        names.PID: str(pid),
        names.PID_START: pid_start_time(pid) or "",
        names.PID_NAMESPACE: pid_namespace(),
        names.HEARTBEAT_INTERVAL_S: f"{interval_s:g}",
        names.HEARTBEAT: str(int(time.time())),
    }


class Heartbeat:
    """Tags `run_id` with host/pid at start and the time every `interval_s` until `stop()`.
    `owned`: the run was created with `owner_tags` (or took them over), so only the beats remain.
    `owner_pid`: the training process whose run this is, when it is not this process (a tracking
    process beats for it: its fault point then fires in the training process, before the call)."""

    def __init__(
        self,
        tracking_uri: str,
        run_id: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        repair_on_start: bool = True,
        owned: bool = False,
        owner_pid: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.owner_pid = owner_pid
        self.interval_s = interval_s
        self.repair_on_start = repair_on_start
        self.owned = owned
        self._client = mlflow_client(tracking_uri)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        if not self.owned:
            from t4bench import faults

            if self.owner_pid is None:
                faults.kill_point("training.run_created")  # the run exists, nothing says whose it is
            take_over(self._client, self.run_id, self.interval_s, self.owner_pid)
        self._thread = threading.Thread(target=self._loop, name="t4bench-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _beat(self) -> None:
        self._client.set_tag(self.run_id, names.HEARTBEAT, str(int(time.time())))

    def _loop(self) -> None:
        if self.repair_on_start:
            try:  # in the thread: the run's start never waits for it
                experiment = self._client.get_run(self.run_id).info.experiment_id
                for verdict in repair(self._client, [experiment], exclude={self.run_id}):
                    print(f"t4bench: {verdict.describe()}", file=sys.stderr, flush=True)
            except Exception as err:  # a failed clean-up must not fail the run it started with
                log.warning("t4bench: stale-run check skipped: %s", err)
        failures = 0
        while not self._stopped.wait(self.interval_s):
            try:
                self._beat()
                failures = 0
            except Exception as err:  # the store is down for a moment: the next beat may work
                failures += 1
                if failures == 1:
                    log.warning("t4bench: heartbeat of run %s not written: %s", self.run_id, err)


def take_over(client: Any, run_id: str, interval_s: float = DEFAULT_INTERVAL_S, pid: int | None = None) -> None:
    """Make an existing run this process's, or `pid`'s (one batch: all owner tags or none)."""
    from mlflow.entities import RunTag

    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in owner_tags(interval_s, pid).items()])


@dataclass(frozen=True)
class Verdict:
    run_id: str
    run_name: str
    experiment_id: str
    reason: str
    last_beat: int

    def describe(self) -> str:
        return f"run {self.run_id} ({self.run_name}, experiment {self.experiment_id}) marked KILLED: {self.reason}"


def stale_reason(tags: dict[str, str], now: float, host: str, stale_intervals: int = STALE_INTERVALS) -> str | None:
    """Why a RUNNING run with these tags has no live process (None: alive, or no heartbeat tag)."""
    beat = tags.get(names.HEARTBEAT)
    if beat is None or not beat.isdigit():
        return None
    pid = tags.get(names.PID, "")
    same_namespace = tags.get(names.PID_NAMESPACE, "") == pid_namespace()
    if tags.get(names.HOST) == host and same_namespace and pid.isdigit():
        if process_alive(int(pid), tags.get(names.PID_START) or None):
            return None
        return f"its process {pid} on {host} is gone"
    interval = float(tags.get(names.HEARTBEAT_INTERVAL_S) or DEFAULT_INTERVAL_S)
    silent = now - int(beat)
    if silent > stale_intervals * interval:
        return f"no heartbeat from {tags.get(names.HOST, '?')} for {silent:.0f} s (every {interval:g} s expected)"
    return None


def _no_beat_reason(run: Any, now: float, closed: set[str]) -> str | None:
    """Why a RUNNING t4bench run that never beat is gone (None: it may still start beating)."""
    tags = run.data.tags
    parent = tags.get(names.MLFLOW_PARENT_RUN_ID)
    if parent in closed:  # its parent's process is gone, and it ran in that process
        return f"its parent run {parent} is gone and it never sent a heartbeat"
    if names.MODEL not in tags or names.SWEEP_ROLE in tags:  # not a t4bench training run
        return None
    age = now - (run.info.start_time or 0) / 1000
    if age > NO_BEAT_LIMIT_S:
        return f"no heartbeat {age:.0f} s after its start (its process died before the first)"
    return None


def repair(
    client: Any,
    experiment_ids: Sequence[str] | None = None,
    *,
    exclude: set[str] | frozenset[str] = frozenset(),
    dry_run: bool = False,
    stale_intervals: int = STALE_INTERVALS,
) -> list[Verdict]:
    """Mark RUNNING runs whose process is gone KILLED (outcome killed); returns what it found:
    those whose heartbeat says so, then those that never beat (`_no_beat_reason`)."""
    if experiment_ids is None:
        experiment_ids = [e.experiment_id for e in client.search_experiments()]
    if not experiment_ids:
        return []
    host, now = socket.gethostname(), time.time()
    found: list[Verdict] = []
    silent = []
    for run in search.all_runs(client, experiment_ids, f"attributes.status = '{names.RUNNING}'"):
        if run.info.run_id in exclude:
            continue
        if names.HEARTBEAT not in run.data.tags:
            silent.append(run)
            continue
        reason = stale_reason(run.data.tags, now, host, stale_intervals)
        if reason is not None:
            found.append(_close(client, run, reason, int(run.data.tags[names.HEARTBEAT]), dry_run))
    closed = {v.run_id for v in found}
    while silent:  # children first judged after their parents: a trial's seed after the trial
        judged = [(run, _no_beat_reason(run, now, closed)) for run in silent]
        newly = [(run, reason) for run, reason in judged if reason is not None]
        if not newly:
            break
        for run, reason in newly:
            start = int((run.info.start_time or 0) / 1000)
            found.append(_close(client, run, reason, start, dry_run))
            closed.add(run.info.run_id)
        silent = [run for run, reason in judged if reason is None]
    return found


def _close(client: Any, run: Any, reason: str, last_beat: int, dry_run: bool) -> Verdict:
    verdict = Verdict(run.info.run_id, run.info.run_name or "", run.info.experiment_id, reason, last_beat)
    if not dry_run:
        client.set_tag(run.info.run_id, names.OUTCOME, names.OUTCOME_KILLED)
        client.set_tag(run.info.run_id, names.REPAIRED, reason)
        # the run ended at its last sign of life, not when the repair noticed
        client.set_terminated(run.info.run_id, status=names.KILLED, end_time=last_beat * 1000)
        _fold(client, run.info.run_id)
    return verdict


def _fold(client: Any, run_id: str) -> None:
    """The liveness tags off the closed run, into its tag file (the run's end would have done it)."""
    from t4bench.tracking.tags import fold_tags

    try:
        fold_tags(client, run_id)
    except Exception as err:  # the run is closed: its tag budget is a nicety
        log.warning("t4bench: tags of run %s not folded: %s", run_id, err)
