"""A new SQLite MLflow store starts as a copy of an empty one, made once per MLflow version.

MLflow builds a new SQLite store by creating its tables and then running every Alembic migration
since its first release: 2–6 s of CPU on a small host, paid by every default run in a fresh folder
and by every test that makes its own store, while copying the finished schema takes milliseconds.
The template is that schema as MLflow itself made it, minus the one path-dependent row: the
Default experiment (id 0), whose artifact location MLflow derives from the folder it was created
in. MLflow adds that row back on the copy's first open, as it does for any store that lacks it.

The template lives in `$T4BENCH_CACHE_DIR` (default `$XDG_CACHE_HOME/t4bench`, else
`~/.cache/t4bench`), named by the MLflow version whose migrations made it. It is written to a
temporary name and renamed into place, so processes that make it at once each finish with a whole
file. Where the cache cannot be written or read, MLflow creates the store the usual way: the
template only saves time. The caller holds the store's creation lock (`t4bench.tracking.store_lock`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

CACHE_ENV = "T4BENCH_CACHE_DIR"


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "t4bench"


def template_path() -> Path:
    return cache_dir() / f"mlflow-{importlib.metadata.version('mlflow')}-empty-store.db"


def provision(store: Path) -> bool:
    """Put a copy of the empty-store template at `store` when no store is there yet; True when
    copied. An existing file (even an empty one, which the store probe judges) is left alone."""
    if store.exists():
        return False
    staged = store.with_name(f".{store.name}.{os.getpid()}.tmp")
    try:
        template = _template()
        shutil.copyfile(template, staged)
        os.replace(staged, store)  # one rename: a reader never sees a half-copied store
    except (OSError, ImportError, sqlite3.Error):  # no cache, or no installed MLflow metadata: MLflow makes it
        with contextlib.suppress(OSError):
            staged.unlink(missing_ok=True)
        return False
    return True


def _template() -> Path:
    template = template_path()
    if template.is_file():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=".build-", suffix=".db", dir=template.parent)
    os.close(handle)
    building = Path(name)
    try:
        building.unlink()  # MLflow creates its tables only in a file it finds missing or empty
        _build(building)
        os.replace(building, template)
    finally:
        building.unlink(missing_ok=True)
    return template


def _build(path: Path) -> None:
    """The schema as MLflow makes it (its tables, then its migrations), without the Default experiment."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = SqlAlchemyStore(f"sqlite:///{path}", str(path.parent / "mlruns"))
    store.engine.dispose()  # every connection closed before the file is copied
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM experiments WHERE experiment_id = 0")
