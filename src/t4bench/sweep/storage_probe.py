"""Probe the sweeper's Optuna storage before the sweep makes anything (`t4bench.tracking.store_probe`'s
SQLite and SQL-server checks): a known scheme, a reachable server, an SQLite file that is an Optuna
one (or new), a journal file's folder writable. One `T4BenchError` line; writes nothing.

Here in sweep/, where the storage is opened (t4bench.sweep.storage); the command-line preflight
asks it through t4bench.preflight.places (imports flow preflight -> sweep, never back).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from t4bench.errors import T4BenchError
from t4bench.tracking.store_probe import (
    TIMEOUT_S,
    hide_password,
    probe_sql_server,
    probe_sqlite,
    sqlite_path,
    writable_dir_problem,
)

#: tables of an Optuna RDB storage
OPTUNA_TABLES = frozenset({"studies", "trials", "version_info"})


def optuna_storage(storage: str, timeout_s: float = TIMEOUT_S) -> None:
    """The storage string of the sweeper (`journal:<path>`, `<path>.journal`, or an SQLAlchemy URL):
    a known scheme, a reachable server, an SQLite file that is an Optuna one (or new)."""
    key = "hydra.sweeper.storage"
    if storage.startswith("journal:") or storage.endswith(".journal"):
        path = Path(storage.removeprefix("journal:")).expanduser()
        problem = writable_dir_problem(path.resolve().parent)
        if problem:
            raise T4BenchError(f"{key}={storage}: {problem}")
        if path.exists() and not path.is_file():
            raise T4BenchError(f"{key}={storage}: {path} is not a file")
        return
    scheme = urllib.parse.urlsplit(storage).scheme.lower()
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        db = sqlite_path(storage)
        if db is None:
            raise T4BenchError(f"{key}={storage}: give a file, sqlite:///<path> (an in-memory SQLite is lost at exit)")
        probe_sqlite(storage, db, key, OPTUNA_TABLES, "an Optuna storage")
        return
    if base in ("postgresql", "mysql"):
        probe_sql_server(storage, key, timeout_s)
        return
    raise T4BenchError(
        f"{key}={hide_password(storage)}: unknown storage; use journal:<file>, <file>.journal, "
        "sqlite:///<file>, postgresql://user@host/db or mysql://user@host/db"
    )
