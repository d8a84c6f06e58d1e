"""One process at a time creates a new SQLite MLflow store.

MLflow creates a SQLite store's tables, and runs its Alembic migrations, the first time a process
opens it. Two processes doing that at once on one new file fail half-way ("table
_alembic_tmp_tags already exists", "Online migration expected to match one row ..."): two runs or
two sweeps started together in a fresh directory, or the parallel workers of a packed sweep.
`ready(uri)` opens the store under an inter-process file lock (filelock) the first time this
process uses the URI, so the first opener creates the schema and the others then find it made.

The lock file lives in the temp directory, named after the store's absolute path, not beside the
store: nothing new appears in the user's folder. SQLite stores are local files, so a host-local
lock covers every process that can open one safely. Server stores (PostgreSQL, MySQL, HTTP)
migrate on their own side and are left alone.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from filelock import FileLock

from t4bench.preflight.storage import sqlite_path

#: how long a process waits for another one to finish creating the store
LOCK_TIMEOUT_S = 120.0
_READY: set[str] = set()


def lock_path(store: Path) -> Path:
    digest = hashlib.sha256(str(store.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"t4bench-mlflow-store-{digest}.lock"


def ready(uri: str) -> None:
    """Open the SQLite store at `uri` once under the lock (creating or migrating it); any other
    URI, or one this process opened already, returns at once."""
    store = sqlite_path(uri)
    if store is None or uri in _READY:
        return
    from mlflow.tracking import MlflowClient

    with FileLock(str(lock_path(store)), timeout=LOCK_TIMEOUT_S):
        # the first request makes MLflow build its store object, which creates/migrates the schema
        MlflowClient(uri).search_experiments(max_results=1)
    _READY.add(uri)
