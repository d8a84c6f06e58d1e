"""A new SQLite MLflow store opened by several processes at once (t4bench.tracking.store_lock): without the
lock, MLflow's schema creation races ("table _alembic_tmp_... already exists"); measured here with
four bare MlflowClients started together, 11 of 12 failed, and this test failed with the lock
taken out."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from filelock import FileLock

from t4bench.errors import T4BenchError
from t4bench.tracking import store_lock, store_template
from t4bench.tracking.store_probe import MLFLOW_TABLES

# each process imports everything, says so, waits for the go file, then opens the store the way a
# run does and makes a run: all four reach the store within milliseconds, however slow the imports
OPEN_AND_RUN = """
import sys, time
from pathlib import Path
from t4bench.tracking.run import RunTracker
uri, go, name = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
tracker = RunTracker(uri)
experiment = tracker.ensure_experiment("t4bench-race")
tracker.client.create_run(experiment, run_name=name)
print("ok", name, flush=True)
"""
PROCESSES = 4


@pytest.mark.parametrize("cache", ["new", "unwritable"])
def test_processes_opening_one_new_store_together_all_succeed(tmp_path: Path, cache: str) -> None:
    """With a cache that has no template yet (the first opener makes it under the lock, the others
    copy it), and with one that cannot be written (each store made by MLflow's own migrations)."""
    store = tmp_path / "mlflow.db"
    uri, go = f"sqlite:///{store}", tmp_path / "go"
    cache_dir = tmp_path / "cache"
    if cache == "unwritable":
        cache_dir.write_text("a file where the cache folder would be")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), store_template.CACHE_ENV: str(cache_dir)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_RUN, uri, str(go), f"run{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(PROCESSES)
    ]
    for proc in procs:  # every child has imported MLflow and t4bench
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.communicate()[1][-2000:]
    go.touch()
    results = [(*p.communicate(timeout=300), p.returncode) for p in procs]
    for out, err, code in results:
        assert code == 0, err.strip().splitlines()[-1:]
        assert out.startswith("ok")
    with sqlite3.connect(store) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        runs = db.execute("SELECT name FROM runs").fetchall()
    assert tables >= MLFLOW_TABLES
    assert not any(name.startswith("_alembic_tmp") for name in tables)
    assert sorted(name for (name,) in runs) == [f"run{i}" for i in range(PROCESSES)]
    assert store_lock.lock_path(store) == tmp_path / "mlflow.db.lock"
    templates = sorted(p.name for p in cache_dir.iterdir()) if cache_dir.is_dir() else []
    assert templates == ([store_template.template_path().name] if cache == "new" else [])


def _schema(store: Path) -> tuple[dict[str, list[str]], list[tuple[str, ...]]]:
    """Each table's and index's definition, its clauses sorted (MLflow's migrations write a table's
    constraints in an order that varies from one store it makes to the next), and the schema version."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
        version = db.execute("SELECT * FROM alembic_version").fetchall()
    return {name: sorted(line.strip().rstrip(",") for line in sql.splitlines()) for name, sql in rows}, version


def test_a_new_store_copied_from_the_template_is_the_store_mlflow_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv(store_template.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root: ./mlruns of the process that opens a store
    made = tmp_path / "mlflow_made" / "mlflow.db"  # by MLflow's migrations, as without t4bench
    made.parent.mkdir()
    MlflowClient(f"sqlite:///{made}").search_experiments()
    copied = tmp_path / "copied" / "mlflow.db"
    copied.parent.mkdir()
    assert store_template.provision(copied)
    assert store_template.template_path().is_file()
    assert not store_template.provision(copied)  # a store already there is left alone
    assert _schema(copied) == _schema(made)
    client = MlflowClient(f"sqlite:///{copied}")
    default = client.get_experiment("0")  # MLflow adds it on the first open, as the opener sees it
    assert (default.name, default.artifact_location) == ("Default", str(tmp_path / "mlruns" / "0"))
    assert MlflowClient(f"sqlite:///{made}").get_experiment("0").artifact_location == default.artifact_location
    experiment = client.create_experiment("t4bench-ncf")
    run = client.create_run(experiment).info.run_id
    client.log_metric(run, "epochs_to_converge", 3.0)
    assert experiment == "1" and client.get_run(run).data.metrics == {"epochs_to_converge": 3.0}


def test_a_lock_held_too_long_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "mlflow.db"
    monkeypatch.setattr(store_lock, "LOCK_TIMEOUT_S", 0.2)
    holder = FileLock(str(store_lock.lock_path(store)))
    with holder, pytest.raises(T4BenchError) as caught:  # another process creating the store, stuck
        started = time.monotonic()
        store_lock.ready(f"sqlite:///{store}")
    assert time.monotonic() - started < 5
    assert str(caught.value) == (
        f"tracking.uri=sqlite:///{store}: another process has held {store}.lock for 0 s while creating "
        "the store; if none is running, delete the lock file"
    )
    assert not store.exists()  # nothing was created without the lock
