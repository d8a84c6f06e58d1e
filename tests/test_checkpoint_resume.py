"""kill -9 mid-epoch with checkpoints on, then `resume=<run id>` (issue 17.6): the same MLflow run
continues at the next epoch, nothing is logged twice, and the final metrics equal an uninterrupted
run with the same seed (CPU, deterministic). Real `python -m t4bench` processes on MovieLens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()
RUN = (
    "model=ncf",
    "seed=3",
    "max_epochs=3",
    "model.target.hr_at_10=0.99",
    "checkpoint.every=1",
    "progress=plain",
    "hw.telemetry.enabled=false",
)

pytestmark = pytest.mark.skipif(not (DATA_ROOT / "movielens-100k").is_dir(), reason="movielens-100k not prepared")


def _env(uri: str) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": uri,
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }


def _only_run(uri: str):  # type: ignore[no-untyped-def]
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return client, run


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_kill_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    straight_uri = f"sqlite:///{tmp_path / 'straight.db'}"
    subprocess.run(
        [sys.executable, "-m", "t4bench", *RUN, f"hydra.run.dir={tmp_path / 'straight'}"],
        cwd=tmp_path,
        env=_env(straight_uri),
        check=True,
        capture_output=True,
        timeout=600,
    )
    client, straight = _only_run(straight_uri)

    uri = f"sqlite:///{tmp_path / 'killed.db'}"
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "t4bench", *RUN, f"hydra.run.dir={out}"],
        cwd=tmp_path,
        env=_env(uri),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("epoch   2"):
                break
        assert seen and seen[-1].startswith("epoch   2"), "".join(seen)
        while not (out / "checkpoints" / "epoch-0002.pt").exists():
            assert proc.poll() is None, "".join(seen)
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)  # in epoch 3
        proc.wait()
    client, killed = _only_run(uri)
    assert client.get_run(killed.info.run_id).info.status == "RUNNING"
    assert _history(client, killed.info.run_id, "eval_quality")[-1][0] == 2

    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "t4bench",
            *RUN,
            f"resume={killed.info.run_id}",
            f"hydra.run.dir={tmp_path / 'resumed'}",
        ],
        cwd=tmp_path,
        env=_env(uri),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    client, run = _only_run(uri)  # the same run: no second one
    assert run.info.run_id == killed.info.run_id and run.info.status == "FINISHED"
    assert run.data.tags["t4bench.resumed_from_epoch"] == "2"
    for key in ("eval_quality", "train_loss"):
        # steps 1..3 once each, values equal to the uninterrupted run's
        assert _history(client, run.info.run_id, key) == _history(client_of(straight_uri), straight.info.run_id, key)
    for key in ("epochs_run", "eval_hr_at_10"):
        assert run.data.metrics[key] == straight.data.metrics[key]
    # time-to-train: the two training stretches, not the time between kill and resume
    assert 0 < run.data.metrics["time_to_train_s"] < 3 * straight.data.metrics["time_to_train_s"]


def client_of(uri: str) -> MlflowClient:
    return MlflowClient(uri)
