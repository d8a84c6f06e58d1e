"""Resume never damages a run (issue 25.5), with real `python -m t4bench` processes on MovieLens:
a FINISHED run is trained further only when asked for (resume_finished=true); a setting that may
not change is refused in one line naming it; max_epochs may change and is recorded as a tag, the
params keep what the run started with; a failed attempt puts the finished run's status and outcome
back; a truncated checkpoint and a checkpoint of another model are one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from t4bench.tracking.tags import run_tags

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()
RUN = ("model=ncf", "seed=1", "model.target.hr_at_10=0.99", "checkpoint.every=1", "progress=plain")
RUN += ("hw.telemetry.enabled=false", "tracking.system_metrics_interval_s=0")

pytestmark = pytest.mark.skipif(not (DATA_ROOT / "movielens-100k").is_dir(), reason="movielens-100k not prepared")


def t4bench(tmp_path: Path, *args: str, base: tuple[str, ...] = RUN) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "t4bench", *base, *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("t4bench: error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return errors[0]


def test_resume_of_a_finished_run(tmp_path: Path) -> None:
    first = t4bench(tmp_path, "max_epochs=1", f"hydra.run.dir={tmp_path / 'first'}")
    assert first.returncode == 0, first.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    run_id = run.info.run_id
    assert run.info.status == "FINISHED" and run.data.tags["t4bench.outcome"] == "not_converged"

    def unchanged() -> None:
        now = client.get_run(run_id)
        assert now.info.status == "FINISHED" and now.data.tags["t4bench.outcome"] == "not_converged"
        assert now.data.params == run.data.params
        assert {k: repr(v) for k, v in now.data.metrics.items()} == {k: repr(v) for k, v in run.data.metrics.items()}
        assert len(client.search_runs([run.info.experiment_id])) == 1

    # not asked for: refused, the run untouched
    line = one_line(t4bench(tmp_path, "max_epochs=2", f"resume={run_id}"))
    assert f"run {run_id} is FINISHED (outcome not_converged); give resume_finished=true" in line
    unchanged()
    # a setting that may not change: named, the run untouched
    line = one_line(
        t4bench(tmp_path, "max_epochs=2", "model.optimizer.lr=0.5", "resume_finished=true", f"resume={run_id}")
    )
    assert "may not change when resuming: model.optimizer.lr=0.5 (the run has 0.001" in line, line
    unchanged()
    # a truncated checkpoint: one line, the run untouched
    (folder,) = {Path(run_tags(client, run)["t4bench.checkpoint_dir"])}
    newest = sorted(folder.glob("*.pt"))[-1]
    good = newest.read_bytes()
    newest.write_bytes(good[: len(good) // 2])
    line = one_line(t4bench(tmp_path, "max_epochs=2", "resume_finished=true", f"resume={run_id}"))
    assert "unreadable checkpoint, truncated or not one" in line
    unchanged()
    newest.write_bytes(good)
    # a checkpoint of another model: one line
    other = ("model=resnet50", "seed=1", "checkpoint.every=1", "progress=plain", "hw.telemetry.enabled=false")
    line = one_line(t4bench(tmp_path, "max_epochs=2", "resume_finished=true", f"resume={newest}", base=other))
    assert "was written by a run with model.name=ncf" in line, line
    unchanged()
    assert not (tmp_path / "outputs").exists()  # refused before a run: no Hydra run folder left either
    # a failed attempt on the finished run: its status and outcome stay
    failed = t4bench(
        tmp_path,
        "max_epochs=3",
        "resume_finished=true",
        f"resume={run_id}",
        "+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch",
        "+callbacks.fail.epoch=2",
    )
    assert failed.returncode != 0
    after = client.get_run(run_id)
    assert after.info.status == "FINISHED" and after.data.tags["t4bench.outcome"] == "not_converged"
    assert run_tags(client, after)["t4bench.resume_failed"] == "true"
    # asked for, with a longer max_epochs: trained further in the same run; params as started
    longer = t4bench(tmp_path, "max_epochs=3", "resume_finished=true", f"resume={run_id}")
    assert longer.returncode == 0, longer.stderr[-3000:]
    done = client.get_run(run_id)
    assert done.info.status == "FINISHED" and done.data.params["max_epochs"] == "1"
    assert run_tags(client, done)["t4bench.resume_changed.max_epochs"] == "3"
    assert done.data.metrics["epochs_run"] == 3
    assert len(client.search_runs([run.info.experiment_id])) == 1


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


@pytest.mark.slow
def test_two_ranks_resume_each_from_its_own_rng_state(tmp_path: Path) -> None:
    """hw.count=2: one epoch, then resumed to two, equals two straight epochs; rank 1 wrote and
    restored its own generators (epoch-0001.rank1.rng.pt)."""
    ranks = ("hw=cpu", "hw.count=2", "model.batch_size=4096", "max_epochs=2")
    straight_dir, split_dir = tmp_path / "straight", tmp_path / "split"
    straight_dir.mkdir()
    split_dir.mkdir()
    done = t4bench(straight_dir, *ranks, f"hydra.run.dir={straight_dir / 'out'}")
    assert done.returncode == 0, done.stderr[-3000:]
    first = t4bench(split_dir, *ranks, "max_epochs=1", f"hydra.run.dir={split_dir / 'out'}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert (split_dir / "out" / "checkpoints" / "epoch-0001.rank1.rng.pt").is_file()
    client = MlflowClient(f"sqlite:///{split_dir / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    again = t4bench(
        split_dir, *ranks, "resume_finished=true", f"resume={run.info.run_id}", f"hydra.run.dir={split_dir / 'again'}"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "no RNG state saved" not in again.stdout + again.stderr
    straight = MlflowClient(f"sqlite:///{straight_dir / 'mlflow.db'}")
    (whole,) = straight.search_runs([e.experiment_id for e in straight.search_experiments()])
    for key in ("train_loss", "eval_quality"):
        assert _history(client, run.info.run_id, key) == _history(straight, whole.info.run_id, key)


def test_rank_rng_file_round_trip(tmp_path: Path) -> None:
    """A rank's own generators written beside the checkpoint come back exactly (the two-rank run
    above cannot show it on the CPU: there both ranks draw alike); older files are pruned."""
    import random

    import numpy as np
    import torch

    from t4bench.pytorch import checkpoint

    for epoch in (1, 2, 3):
        random.seed(epoch)
        np.random.seed(epoch)
        torch.manual_seed(epoch)
        checkpoint.save_rank_rng(tmp_path, epoch, rank=1, keep=2)
    saved = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    torch.manual_seed(99)
    checkpoint.restore_rng(checkpoint.read(checkpoint.rank_rng_path(tmp_path, 3, 1))["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-0002.rank1.rng.pt", "epoch-0003.rank1.rng.pt"]
    assert checkpoint.saved_epochs(tmp_path) == []  # not taken for checkpoints
