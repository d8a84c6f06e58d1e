"""Optuna storage from one string, shared by the sweeper, the pruning callback and the CLIs.

    <path>.journal or journal:<path>   JournalStorage on a JournalFileBackend (several processes on
                                      one machine; file locks)
    sqlite:///..., postgresql://...   any SQLAlchemy URL (RDBStorage; several machines)

One storage object per string and process, so the in-process pruning callback and the sweeper see
each other's writes without re-reading the journal twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from t4bench.sweep.storage_probe import optuna_storage

_cache: dict[str, Any] = {}
_cache_lock = threading.Lock()


def is_journal(storage: str) -> bool:
    return storage.startswith("journal:") or storage.endswith(".journal")


def journal_path(storage: str) -> Path:
    return Path(storage.removeprefix("journal:")).expanduser()


def normalize(storage: str) -> str:
    """Absolute journal paths (jobs may run from another working directory)."""
    if is_journal(storage):
        return f"journal:{journal_path(storage).resolve()}"
    return storage


def open_storage(storage: str) -> Any:
    """The optuna storage object for `storage` (cached per process)."""
    import optuna

    key = normalize(storage)
    with _cache_lock:
        if key not in _cache:
            # a dead server, an unwritable folder or a file that is not Optuna's: one line, in seconds
            optuna_storage(key)
            if is_journal(key):
                from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

                path = journal_path(key)
                path.parent.mkdir(parents=True, exist_ok=True)
                backend = JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path)))
                _cache[key] = optuna.storages.JournalStorage(backend)
            else:
                _cache[key] = optuna.storages.RDBStorage(key)
        return _cache[key]


@contextlib.contextmanager
def critical_section(storage: str) -> Iterator[None]:
    """Serialise "count trials, then ask one" across the processes sharing a journal file, so
    several workers finish exactly n_trials. For SQL storages (other machines) there is no shared
    file: the sweeper re-checks after asking and gives a surplus trial up instead."""
    key = normalize(storage)
    if not is_journal(key):
        yield
        return
    lock_path = journal_path(key).with_suffix(".t4bench.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
