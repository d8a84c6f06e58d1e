"""A SQLite MLflow store that another process is still creating (two runs started on a fresh file)
holds some of MLflow's tables but not all: the store check waits for it rather than calling it
"not an MLflow tracking store" (seen once in six Slurm controller-test runs)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from t4bench.errors import T4BenchError
from t4bench.tracking import store_probe as storage


def _create(db: Path, *tables: str) -> None:
    with sqlite3.connect(db) as conn:
        for table in tables:
            conn.execute(f"CREATE TABLE {table} (id INTEGER)")


def test_a_store_being_created_is_waited_for(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    _create(db, "experiments")
    finisher = threading.Timer(1.0, _create, (db, "runs", "alembic_version"))
    finisher.start()
    started = time.monotonic()
    storage.tracking(f"sqlite:///{db}")  # no error: complete by the time it decides
    finisher.join()
    assert time.monotonic() - started >= 0.9


def test_a_store_left_half_made_is_refused_after_the_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "CREATING_WAIT_S", 0.5)
    db = tmp_path / "mlflow.db"
    _create(db, "experiments")
    with pytest.raises(T4BenchError, match=r"is a SQLite database but not an MLflow tracking store"):
        storage.tracking(f"sqlite:///{db}")


def test_a_foreign_database_is_refused_at_once(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    _create(db, "customers")
    started = time.monotonic()
    with pytest.raises(T4BenchError, match=r"tables: customers"):
        storage.tracking(f"sqlite:///{db}")
    assert time.monotonic() - started < storage.CREATING_WAIT_S
