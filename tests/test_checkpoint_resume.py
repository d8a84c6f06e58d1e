"""kill -9 mid-epoch with checkpoints on, then `resume=<run id>` (issue 17.6): the same MLflow run
continues at the next epoch, nothing is logged twice, and the final metrics equal an uninterrupted
run with the same seed (CPU, deterministic). Real `python -m t4bench` processes on MovieLens."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from conftest import DATA_ROOT, run_cli, start_cli
from mlflow.tracking import MlflowClient

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


def _only_run(store: Path):  # type: ignore[no-untyped-def]
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return client, run


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_kill_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    straight_store, store = tmp_path / "straight", tmp_path / "killed"
    straight_store.mkdir()
    store.mkdir()
    done = run_cli(*RUN, store=straight_store)
    assert done.returncode == 0, done.stderr[-3000:]
    straight_client, straight = _only_run(straight_store)

    proc = start_cli(*RUN, store=store, until="epoch   2")
    try:
        while not (store / "run" / "checkpoints" / "epoch-0002.pt").exists():
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)  # in epoch 3
        proc.wait()
    client, killed = _only_run(store)
    assert client.get_run(killed.info.run_id).info.status == "RUNNING"
    assert _history(client, killed.info.run_id, "eval_quality")[-1][0] == 2

    resumed = run_cli(*RUN, f"resume={killed.info.run_id}", f"hydra.run.dir={store / 'resumed'}", store=store)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    client, run = _only_run(store)  # the same run: no second one
    assert run.info.run_id == killed.info.run_id and run.info.status == "FINISHED"
    assert run.data.tags["t4bench.resumed_from_epoch"] == "2"
    for key in ("eval_quality", "train_loss"):
        # steps 1..3 once each, values equal to the uninterrupted run's
        assert _history(client, run.info.run_id, key) == _history(straight_client, straight.info.run_id, key)
    for key in ("epochs_run", "eval_hr_at_10"):
        assert run.data.metrics[key] == straight.data.metrics[key]
    # time-to-train: the two training stretches, not the time between kill and resume
    assert 0 < run.data.metrics["run_train_s"] < 3 * straight.data.metrics["run_train_s"]
