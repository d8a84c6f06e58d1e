"""What a loader leaves out of training is counted, logged and said once (issue 25.4): NCF users
with a single rating (leave-one-out holds it out for the test, so none of theirs trains). A real
`python -m t4bench` process on a small generated MovieLens file."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from t4bench.data import movielens

REPO = Path(__file__).resolve().parents[1]
HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def ratings(folder: Path, users: int = 40, single: int = 3) -> Path:
    """`users` users rating 12 of 59 items each, the last `single` of them one item only."""
    rng = random.Random(0)
    rows, stamp = [], 0
    for user in range(1, users + 1):
        for item in rng.sample(range(1, 60), 1 if user > users - single else 12):
            stamp += 1
            rows.append(f"{user}\t{item}\t4\t{stamp}\n")
    path = folder / "movielens-100k" / "ml-100k.inter"
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + "".join(rows))
    return path


def test_loader_counts_single_rating_users(tmp_path: Path) -> None:
    path = ratings(tmp_path)
    data = movielens.load("movielens-100k", path.parent)
    assert data.single_rating_users == 3 and data.num_users == 40
    assert len(data.train_users) == 37 * 11  # each other user's latest rating is held out


def test_run_says_it_once_and_logs_it(tmp_path: Path) -> None:
    ratings(tmp_path / "data")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": uri,
        "T4BENCH_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "t4bench", "max_epochs=1", "progress=plain", "hw.telemetry.enabled=false"]
    command += ["tracking.system_metrics_interval_s=0", f"hydra.run.dir={tmp_path / 'out'}"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("data: ")]
    assert said == [
        "data: 3 of 40 users have a single rating: it is their held-out test item, so they add nothing to training"
    ]
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.metrics["data_single_rating_users"] == 3
