"""What taking MLflow out of the training process could save at start-up (a benchmark, not a test).

The default run's whole − train is mostly imports (docs/perf.md, "Start-up of the default run"):
torch and the `torch._dynamo` that every torch optimizer imports, then MLflow and its SQLite store.
Threads do not overlap imports (they hold the interpreter lock); a second process does. This
measures the bound of that lever on the host at hand, with the same work in both arms:

    one process   import torch, build Adam and take 3 steps; open the store, create a run, log
                  the loss, end the run (MLflow in the training process, as t4bench does today)
    two processes the training part in the parent while a child started first opens the store and
                  creates the run; the parent sends the loss, the child logs it and ends the run

Every process gets a fresh SQLite store in its own temporary folder, made as t4bench makes one
(`t4bench.tracking.client.mlflow_client(..., new_store=True)`: a copy of the cached empty store).
The arms alternate, one fresh process each; the table holds medians of wall seconds and checks
that every run ended FINISHED with its loss.

    python perf/tracking_overlap.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAIN = """
import torch
model = torch.nn.Linear(64, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.randn(32, 64)).pow(2).mean().backward()
    optimizer.step()
loss = float(model(torch.randn(32, 64)).pow(2).mean().detach())
"""
OPEN = """
from t4bench.tracking.client import mlflow_client
client = mlflow_client(URI, new_store=True)
run_id = client.create_run(client.create_experiment("overlap")).info.run_id
"""
CLOSE = """
client.log_metric(run_id, "loss", loss)
client.set_terminated(run_id)
"""
ONE = "import sys\nURI = sys.argv[1]\n" + TRAIN + OPEN + CLOSE
HANDOFF = "print(run_id, flush=True)\nloss = float(sys.stdin.readline())\n"
CHILD = "import sys\nURI = sys.argv[1]\n" + OPEN + HANDOFF + CLOSE
TWO = (
    "import subprocess, sys\n"
    f"child = subprocess.Popen([sys.executable, '-c', {CHILD!r}, sys.argv[1]], stdin=subprocess.PIPE,"
    " stdout=subprocess.PIPE, text=True)\n"
    + TRAIN
    + "child.stdout.readline()\nchild.stdin.write(f'{loss}\\n')\nchild.stdin.close()\n"
    + "if child.wait() != 0:\n    raise SystemExit('the tracking process failed')\n"
)
ARMS = {"one process": ONE, "two processes": TWO}


def timed(source: str) -> float:
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "mlflow.db"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", source, f"sqlite:///{store}"], cwd=folder, check=True)
        seconds = time.perf_counter() - started
        with sqlite3.connect(store) as db:  # the same work done: one run, FINISHED, with its loss
            runs = db.execute("SELECT status, run_uuid FROM runs").fetchall()
            logged = db.execute("SELECT COUNT(*) FROM metrics WHERE key = 'loss'").fetchone()[0]
        if [status for status, _ in runs] != ["FINISHED"] or logged != 1:
            raise SystemExit(f"a run did not end FINISHED with its loss: {runs}, {logged} loss rows")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    samples: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for repeat in range(args.repeats):
        order = list(ARMS) if repeat % 2 == 0 else list(reversed(ARMS))
        for arm in order:
            samples[arm].append(timed(ARMS[arm]))
        print(f"repeat {repeat + 1}: " + ", ".join(f"{arm} {samples[arm][-1]:.2f} s" for arm in ARMS), flush=True)
    base = statistics.median(samples["one process"])
    print(f"| arm (median of {args.repeats}, {os.cpu_count()} cores) | wall s | saved s |")
    print("|---|---:|---:|")
    for arm, values in samples.items():
        median = statistics.median(values)
        print(f"| {arm} | {median:.2f} | {base - median:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
