"""One process at a time creates a new SQLite MLflow store.

MLflow creates a SQLite store's tables, and runs its Alembic migrations, the first time a process
opens it. Two processes doing that at once on one new file fail half-way ("table
_alembic_tmp_tags already exists", "Online migration expected to match one row ..."): two runs or
two sweeps started together in a fresh directory, or the parallel workers of a packed sweep.
`ready(uri)` opens the store under an inter-process file lock (filelock) the first time this
process uses that file, so the first opener creates the schema and the others then find it made.

The lock file sits beside the store (`<store>.lock`, left there: removing it would race), so every
process that can open the store shares it whatever its temp directory (Slurm jobs, containers and
other users have their own); the preflight has already checked that the folder is writable. Server
stores (PostgreSQL, MySQL, HTTP) migrate on their own side and are left alone.

An existing file is judged read-only first (`t4bench.tracking.store_probe.tracking`): MLflow writes
its schema into any SQLite file it opens, so another application's database, an empty or a
truncated file is refused in one line and left as it was, whichever code path got here.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout

from t4bench.errors import T4BenchError
from t4bench.tracking import store_template
from t4bench.tracking.store_probe import sqlite_path, tracking

#: how long a process waits for another one to finish creating the store
LOCK_TIMEOUT_S = 120.0
#: the store files (resolved) this process has opened under the lock
_READY: set[Path] = set()


def lock_path(store: Path) -> Path:
    return store.with_name(store.name + ".lock")


def ready(uri: str) -> None:
    """Open the SQLite store at `uri` once under the lock (creating or migrating it); any other
    URI, or a store file this process opened already, returns at once."""
    path = sqlite_path(uri)
    if path is None:
        return
    store = path.resolve()
    if store in _READY:
        return
    tracking(uri)  # outside the lock: an empty file waits for the lock's holder, its creator
    # imported outside the lock: MLflow's first open imports it (sqlalchemy, alembic: ~1 s), and
    # inside the lock a packed sweep's first runs started one after another, ~3 s apart
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401

    # MLflow's own client, not tracking.client's: that one calls this function
    from mlflow.tracking import MlflowClient

    lock = lock_path(store)
    try:
        with FileLock(str(lock), timeout=LOCK_TIMEOUT_S):
            # a new store starts as a copy of the empty schema (made once per MLflow version); the
            # first request makes MLflow build its store object, which creates/migrates what is missing
            store_template.provision(store)
            MlflowClient(uri).search_experiments(max_results=1)
    except Timeout:
        raise T4BenchError(
            f"tracking.uri={uri}: another process has held {lock} for {LOCK_TIMEOUT_S:.0f} s while creating the "
            "store; if none is running, delete the lock file"
        ) from None
    _READY.add(store)
