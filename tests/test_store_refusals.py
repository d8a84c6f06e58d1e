"""Every command that takes a tracking store, given one that is not an MLflow store: refused in one
line `t4bench: error: ...`, exit 2, and the file (or folder) left exactly as it was, nothing made
beside it. MLflow writes its schema into any SQLite file it opens, so the store must be judged
read-only before MLflow ever sees it. Real processes, real files, a real (truncated) MLflow store."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from t4bench.tracking.client import mlflow_client

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()
DEAD_SERVER = "http://127.0.0.1:9"  # the discard port: nothing listens there
MINI = ("model=ncf", "scale=mini", "max_epochs=1")


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as db:  # another application's database
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO customers (name) VALUES ('ada')")


def _truncated(path: Path, whole: bytes) -> None:
    path.write_bytes(whole[: len(whole) // 2])  # a copy that stopped half-way


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a real MLflow SQLite store holding one run."""
    db = tmp_path_factory.mktemp("real") / "mlflow.db"
    client = mlflow_client(f"sqlite:///{db}", new_store=True)
    client.create_run(client.create_experiment("t4bench-ncf"))
    return db.read_bytes()


def _make(kind: str, store: Path, whole: bytes) -> str:
    """The bad store of `kind` under `store`/, as a tracking URI."""
    db = store / "mlflow.db"
    makers: dict[str, Callable[[], None]] = {
        "foreign": lambda: _foreign(db),
        "truncated": lambda: _truncated(db, whole),
        "empty": db.touch,
        "directory": db.mkdir,
    }
    makers[kind]()
    return f"sqlite:///{db}"


def _snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder` with its content's hash (folders as such)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


def _study(work: Path) -> Path:
    """A finished sweep's study journal, as `t4bench validate` reads it (its recorded overrides)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    journal = work / "sweep" / "optuna.journal"
    journal.parent.mkdir(parents=True)
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    study = optuna.create_study(study_name="ncf_refusal", storage=storage)
    for key, value in {
        "t4bench_seeds": [0],
        "t4bench_task_overrides": list(MINI),
        "t4bench_hydra_overrides": [],
    }.items():
        study.set_user_attr(key, value)
    return journal.parent


def _command(name: str, uri: str, work: Path) -> list[str]:
    hydra_dirs = [f"hydra.run.dir={work / 'run'}", f"hydra.sweep.dir={work / 'multirun'}"]
    return {
        "report": ["report", "--tracking-uri", uri, "--out", str(work / "report")],
        "runs repair": ["runs", "repair", "--tracking-uri", uri],
        "run": ["run", *MINI, *hydra_dirs],
        "sweep": ["sweep", *MINI, "seed=0,1", *hydra_dirs],
        "validate": ["validate", "--sweep-dir", str(work / "sweep"), "--seeds", "100", hydra_dirs[1]],
    }[name]


def _run(name: str, uri: str, work: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": uri,  # run, sweep and validate read it; report and runs get --tracking-uri too
    }
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "t4bench.cli", *_command(name, uri, work)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, time.monotonic() - started


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("t4bench: error: "), (
        proc.returncode,
        proc.stderr[-3000:],
    )
    return lines[0]


QUICK = ["report", "runs repair"]
#: these compose the Hydra config first (seconds each)
HYDRA = [pytest.param(name, marks=pytest.mark.slow) for name in ("run", "sweep", "validate")]
EXPECTED = {
    "foreign": "is a SQLite database but not an MLflow tracking store (tables: customers)",
    "truncated": "not a usable SQLite database (truncated",
    "empty": "is an empty file, not an MLflow tracking store",
    "directory": "is not a file",
}


@pytest.mark.parametrize("command", [*QUICK, *HYDRA])
@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_file_that_is_no_mlflow_store_is_refused_and_left_as_it_was(
    command: str, kind: str, tmp_path: Path, real_store: bytes
) -> None:
    store, work = tmp_path / "store", tmp_path / "work"
    store.mkdir()
    work.mkdir()
    if command == "validate":
        _study(work)
    uri = _make(kind, store, real_store)
    before = _snapshot(store)
    proc, _ = _run(command, uri, work)
    assert EXPECTED[kind] in _one_error_line(proc)
    assert _snapshot(store) == before  # the same bytes, no lock or journal file made beside it
    assert not (work / "report").exists() and not (work / "run").exists() and not (work / "multirun").exists()


@pytest.mark.parametrize("command", [*QUICK, *HYDRA])
def test_an_unreachable_server_is_one_line_within_30_s(command: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    if command == "validate":
        _study(work)
    proc, elapsed = _run(command, DEAD_SERVER, work)
    assert f"tracking.uri={DEAD_SERVER}: no MLflow server answers" in _one_error_line(proc)
    assert elapsed < 30, elapsed


def test_a_missing_store_is_not_made_by_a_report(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    proc, _ = _run("report", f"sqlite:///{db}", tmp_path)
    assert "no tracking store at" in _one_error_line(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
