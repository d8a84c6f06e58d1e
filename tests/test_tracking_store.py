"""A new SQLite MLflow store opened by several processes at once (t4bench.runs.store): without
the lock, MLflow's schema creation races ("table _alembic_tmp_... already exists"); measured here
with four bare MlflowClients started together, 11 of 12 failed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from t4bench.preflight.storage import MLFLOW_TABLES

# each process waits for the same instant, then opens the store the way a run does and makes a run
OPEN_AND_RUN = """
import sys, time
from t4bench.tracking import RunTracker
uri, start, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
while time.time() < start:
    time.sleep(0.001)
tracker = RunTracker(uri)
experiment = tracker.ensure_experiment("t4bench-race")
tracker.client.create_run(experiment, run_name=name)
print("ok", name)
"""
PROCESSES = 4


def test_processes_opening_one_new_store_together_all_succeed(tmp_path: Path) -> None:
    # one fresh store: without the lock, each of 3 such rounds failed here
    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    start = time.time() + 8  # every interpreter has imported MLflow by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_RUN, uri, str(start), f"run{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
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
    # the lock lives in the temp dir: nothing but the store (and MLflow's own files) beside it
    assert not list(store.parent.glob("*.lock"))
