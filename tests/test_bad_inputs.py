"""Bad input of every kind, each a real process or a real file (issue 17): one line
`t4bench: error: ...` on stderr, exit status 2, no traceback, and no MLflow run left RUNNING.

Config values and the tracking store fail before any run exists (about a second after Hydra);
damaged data fails in the loader with the file and record named, its run closed as FAILED.
The loaders' cases beyond one per kind run in-process on real files (test_bad_data.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import can_unshare_mounts
from stalling_mlflow import stalling_mlflow

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()
ML100K_HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def run_cli(
    tmp_path: Path,
    *overrides: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    prefix: tuple[str, ...] = (),
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    command = [
        *prefix,
        sys.executable,
        "-m",
        "t4bench",
        "progress=plain",
        "hw.telemetry.enabled=false",
        f"hydra.run.dir={tmp_path / 'outputs'}",
        *overrides,
    ]
    return subprocess.run(command, cwd=cwd or tmp_path, env=full_env, capture_output=True, text=True, timeout=timeout)


def error_line(proc: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """The one `t4bench: error:` line of a failed run (asserting the rest of the contract)."""
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("t4bench: error:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert proc.returncode == status, (proc.returncode, proc.stderr[-3000:])
    return lines[0]


def run_statuses(db: Path) -> list[str]:
    """Statuses of every run in an MLflow SQLite store (none when it was never created)."""
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "runs" not in tables:
            return []
        return [status for (status,) in conn.execute("SELECT status FROM runs")]


# ------------------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("hw.count=0", "hw.count=0: must be an integer >= 1"),
        ("hw.count=abc", "hw.count=abc: must be an integer >= 1"),
        ("seed=abc", "seed=abc: must be an integer >= 0"),
        ("model.optimizer.lr=-1", "model.optimizer.lr=-1: must be a finite number > 0"),
        ("model.batch_size=0", "model.batch_size=0: must be an integer >= 1"),
        ("max_epochs=0", "max_epochs=0: must be an integer >= 1"),
        ("hw.count=64", "CPU ranks on this host"),
        ("model.target.hr_at_10=2", "model.target.hr_at_10=2: must be a finite number > 0 and <= 1"),
    ],
)
def test_bad_config_value(tmp_path: Path, override: str, expected: str) -> None:
    proc = run_cli(tmp_path, override)
    line = error_line(proc)
    assert expected in line, line
    assert run_statuses(tmp_path / "mlflow.db") == []  # refused before any run existed


# ------------------------------------------------------------------------------------ tracking


def test_dead_tracking_server_fails_fast(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = run_cli(tmp_path, env={"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}, timeout=120)
    elapsed = time.monotonic() - started
    line = error_line(proc)
    assert "tracking.uri=http://127.0.0.1:9: no MLflow server answers" in line
    assert elapsed < 15, elapsed
    assert "marked KILLED" not in proc.stderr  # no run existed, none is claimed


def test_garbage_tracking_db(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"this is not a database\n" * 100)
    line = error_line(run_cli(tmp_path))
    assert f"{db}: not a usable SQLite database" in line
    assert db.read_bytes() == b"this is not a database\n" * 100  # nothing overwritten


@pytest.mark.skipif(not can_unshare_mounts(), reason="needs `unshare -m` (a private mount namespace)")
def test_read_only_working_directory(tmp_path: Path) -> None:
    """Run from a read-only mount (as root, permission bits alone do not stop writes)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    script = (
        f"mount --bind -o ro {folder} {folder} && cd {folder} && "
        f"exec {sys.executable} -m t4bench progress=plain hw.telemetry.enabled=false"
    )
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    line = error_line(proc)
    assert "not writable" in line and str(folder) in line, line
    assert list(folder.iterdir()) == []


# ------------------------------------------------------------------------------------ data


def test_non_numeric_id_names_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "movielens-100k").mkdir(parents=True)
    ratings = data / "movielens-100k" / "ml-100k.inter"
    ratings.write_text(ML100K_HEADER + "1\t10\t3\t100\n2\t11\t4\t101\n2\tabc\t4\t102\n")
    proc = run_cli(tmp_path, "max_epochs=1", env={"T4BENCH_DATA_DIR": str(data)})
    line = error_line(proc)
    assert f"{ratings}:4: item_id:token='abc' is not an integer id" in line
    assert run_statuses(tmp_path / "mlflow.db") == ["FAILED"]
    # the run made is named with its folder (its job log and MLPerf log), which stays
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert line.endswith(f" (MLflow run {run.info.run_id}, folder {tmp_path / 'outputs'})"), line
    assert (tmp_path / "outputs" / "t4bench.log").is_file()


def test_error_in_the_app_before_any_run_leaves_no_run_folder(tmp_path: Path) -> None:
    """An error found after Hydra made the run folder but before an MLflow run exists (here the
    checkpoint to resume from): the folder, holding only Hydra's record, is removed with the
    parents it leaves empty; nothing else in the working directory is touched."""
    (tmp_path / "outputs" / "ncf").mkdir(parents=True)
    (tmp_path / "outputs" / "ncf" / "earlier.txt").write_text("a user's file")
    proc = run_cli(tmp_path, "max_epochs=1", f"resume={tmp_path / 'absent.pt'}", "hydra.run.dir=outputs/ncf/r/1")
    assert error_line(proc) == f"t4bench: error: resume={tmp_path / 'absent.pt'}: no such checkpoint file or folder"
    assert sorted(p.relative_to(tmp_path / "outputs").as_posix() for p in (tmp_path / "outputs").rglob("*")) == [
        "ncf",
        "ncf/earlier.txt",
    ]


def test_header_only_ratings_refused_before_any_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "movielens-100k").mkdir(parents=True)
    ratings = data / "movielens-100k" / "ml-100k.inter"
    ratings.write_text(ML100K_HEADER)
    line = error_line(run_cli(tmp_path, "max_epochs=1", env={"T4BENCH_DATA_DIR": str(data)}))
    assert f"{ratings}: header only, no ratings" in line
    assert run_statuses(tmp_path / "mlflow.db") == []


def test_coco_without_annotations(tmp_path: Path) -> None:
    source = DATA_ROOT / "fashion-coco"
    if not (source / "annotations" / "instances_val.json").is_file():
        pytest.skip("fashion-coco not prepared (python -m t4bench.data.prepare fashion-coco)")
    root = tmp_path / "data" / "fashion-coco"
    (root / "annotations").mkdir(parents=True)
    for split in ("train", "val"):
        (root / split).symlink_to(source / split)
    shutil.copy(source / "annotations" / "instances_val.json", root / "annotations")
    (root / "annotations" / "instances_train.json").write_text('{"images": [], "categories": []}')
    proc = run_cli(tmp_path, "model=ssd", "max_epochs=1", env={"T4BENCH_DATA_DIR": str(tmp_path / "data")})
    line = error_line(proc)
    assert "instances_train.json: no 'annotations' list" in line, line
    assert "RUNNING" not in run_statuses(tmp_path / "mlflow.db")


def test_prepare_with_damaged_source(tmp_path: Path) -> None:
    source = tmp_path / "fashion"
    source.mkdir()
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        (source / name).write_bytes(b"\x1f\x8b\x08\x00truncated")
    env = {
        **os.environ,
        "T4BENCH_FASHION_MNIST_DIR": str(source),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "t4bench.data.prepare", "--data-root", str(tmp_path / "data"), "fashion-mnist-folder"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = error_line(proc)
    assert f"prepare fashion-mnist-folder: {source / 'train-images-idx3-ubyte.gz'}: unreadable gzip" in line
    assert not (tmp_path / "data" / "fashion-mnist-folder").exists()


def test_sigterm_before_any_run_claims_none(tmp_path: Path) -> None:
    """SIGTERM while the tracking server stalls creating the run: no run is claimed KILLED, and
    the stop is prompt (nothing, a tracking process included, keeps the output pipes open)."""
    with stalling_mlflow() as server:
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "MLFLOW_TRACKING_URI": server.uri,
            "T4BENCH_DATA_DIR": str(DATA_ROOT),
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "t4bench",
                "progress=plain",
                "hw.telemetry.enabled=false",
                f"hydra.run.dir={tmp_path}",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.posts.wait(120), "t4bench never asked the server to create its experiment"
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "t4bench: stopped by signal 15; no MLflow run had been created" in stderr
    assert "marked KILLED" not in stderr
