"""More faults with real processes (issue 25.7): an LR that blows the loss up ends `diverged`;
`n_trials=0` on an existing sweep reports it and changes nothing; a tracking store whose disk is
full is one line before any run exists. (A truncated checkpoint and the checkpoint of another
model: tests/test_resume_safety.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import can_unshare_mounts
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()
QUIET = ("progress=plain", "hw.telemetry.enabled=false", "tracking.system_metrics_interval_s=0")

pytestmark = pytest.mark.skipif(not (DATA_ROOT / "movielens-100k").is_dir(), reason="movielens-100k not prepared")


def env_for(db: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{db}",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }


def t4bench(tmp_path: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [arg for arg in args if arg.startswith("--")]  # Hydra's flags before the overrides
    command = [sys.executable, "-m", "t4bench", *flags, *QUIET, *(arg for arg in args if arg not in flags)]
    return subprocess.run(command, cwd=tmp_path, env=env_for(db), capture_output=True, text=True, timeout=600)


def all_runs(db: Path) -> list:  # type: ignore[type-arg]
    client = MlflowClient(f"sqlite:///{db}")
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_huge_lr_ends_diverged(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    proc = t4bench(tmp_path, db, "model.optimizer.lr=1e6", "max_epochs=2", f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "diverged: train loss" in proc.stdout + proc.stderr
    (run,) = all_runs(db)
    assert run.info.status == "FINISHED" and run.data.tags["t4bench.outcome"] == "diverged"


@pytest.mark.slow
def test_zero_trials_on_an_existing_sweep_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    sweep = ["--multirun", "hydra/sweeper=optuna", "model.optimizer.lr=interval(0.001,0.002)", "max_epochs=1"]
    sweep.append(f"hydra.sweep.dir={tmp_path / 'sweep'}")
    first = t4bench(tmp_path, db, *sweep, "hydra.sweeper.n_trials=1")
    assert first.returncode == 0, first.stderr[-3000:]
    runs = {r.info.run_id: (r.info.status, r.data.metrics.get("epochs_run")) for r in all_runs(db)}
    journal = (tmp_path / "sweep" / "optuna.journal").read_bytes()
    again = t4bench(tmp_path, db, *sweep, "hydra.sweeper.n_trials=0")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 complete, 0 pruned, 0 failed, 0 running" in again.stdout + again.stderr
    assert {r.info.run_id: (r.info.status, r.data.metrics.get("epochs_run")) for r in all_runs(db)} == runs
    assert (tmp_path / "sweep" / "optuna.journal").read_bytes().startswith(journal)
    refused = t4bench(tmp_path, db, *sweep, "hydra.sweeper.n_trials=-1")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "t4bench: error: hydra.sweeper.n_trials=-1: must be an integer >= 0"
    )


@pytest.mark.skipif(not can_unshare_mounts(), reason="needs root and `unshare -m` for a private tmpfs")
def test_tracking_store_on_a_full_disk(tmp_path: Path) -> None:
    """The store on a 2 MB tmpfs, filled up: one line, exit 2, the store as it was."""
    full = tmp_path / "full"
    full.mkdir()
    MlflowClient(f"sqlite:///{tmp_path / 'seed.db'}").create_experiment("t4bench-ncf")
    db = full / "mlflow.db"
    command = " ".join([sys.executable, "-m", "t4bench", *QUIET, f"hydra.run.dir={tmp_path / 'out'}"])
    script = (
        f"mount -t tmpfs -o size=2m tmpfs {full} && cp {tmp_path / 'seed.db'} {db} && "
        f"(dd if=/dev/zero of={full / 'filler'} bs=64k 2>/dev/null; true) && "
        f"sha256sum {db} && {command}; echo rc=$?; sha256sum {db}"
    )
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        cwd=tmp_path,
        env=env_for(db),
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("t4bench: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors[0].startswith(f"t4bench: error: tracking.uri=sqlite:///{db}: only 0.0 MB free"), errors[0]
    lines = proc.stdout.splitlines()
    assert "rc=2" in lines and lines[0].split()[0] == lines[-1].split()[0]  # the store unchanged
    assert not (tmp_path / "out").exists()
