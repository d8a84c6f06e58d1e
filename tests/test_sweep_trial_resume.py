"""A sweep worker killed -9 mid-trial; the sweep run again resumes the interrupted trial's seed run
from its last checkpoint, in the same MLflow run, and its results equal an uninterrupted sweep's
(issue 25.6). Real `python -m t4bench --multirun` processes, Optuna journal, MLflow SQLite."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import DATA_ROOT, cli_command
from mlflow.tracking import MlflowClient

SWEEP = (
    "--multirun",
    "hydra/sweeper=optuna",
    "hydra.sweeper.n_trials=1",
    "hydra.sweeper.pruner._target_=null",
    "hydra.sweeper.stale_after=5",
    "model.optimizer.lr=choice(0.002,0.003)",
    "max_epochs=3",
    "model.target.hr_at_10=0.99",
    "checkpoint.every=1",
    "progress=plain",
    "hw.telemetry.enabled=false",
    "tracking.system_metrics_interval_s=0",
)

pytestmark = pytest.mark.skipif(not (DATA_ROOT / "movielens-100k").is_dir(), reason="movielens-100k not prepared")


def seed_runs(folder: Path) -> list:  # type: ignore[type-arg]
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return [r for r in runs if "seed" in r.data.params]


def history(folder: Path, run_id: str, key: str) -> list[tuple[int, float]]:
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


@pytest.mark.slow
def test_killed_trial_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight.mkdir()
    killed.mkdir()
    cmd, env = cli_command(SWEEP, store=straight)
    done = subprocess.run(cmd, cwd=straight, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (whole,) = seed_runs(straight)

    cmd, env = cli_command(SWEEP, store=killed)
    proc = subprocess.Popen(cmd, cwd=killed, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not list((killed / "sweep").glob("*/checkpoints/epoch-0001.pt")):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)  # in epoch 2 of the trial's only seed
        proc.wait()
    (interrupted,) = seed_runs(killed)
    assert interrupted.info.status == "RUNNING"

    again = subprocess.run(cmd, cwd=killed, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    (resumed,) = seed_runs(killed)  # the same seed run, not a second one
    assert resumed.info.run_id == interrupted.info.run_id and resumed.info.status == "FINISHED"
    assert resumed.data.tags["t4bench.resumed_from_epoch"] == "1"
    assert resumed.data.params["model.optimizer.lr"] == whole.data.params["model.optimizer.lr"]
    for key in ("train_loss", "eval_quality"):
        assert history(killed, resumed.info.run_id, key) == history(straight, whole.info.run_id, key)
