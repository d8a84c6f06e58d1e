"""Start-up of a default NCF mini run under two source trees, side by side.

Start-up is the time from launching `python -m t4bench` to the MLPerf `run_start` event in the
run's mlperf.log (its `time_ms` is wall-clock time), so it holds the command-line checks, Hydra,
imports, the runner's checks, the MLflow run and data loading, and nothing of training.

    python scripts/startup_time.py --before /tmp/before --after . [--repeats 3]

Each tree is a checkout root (its src/ and conf/ are used). The runs alternate between the trees
so that load on a shared machine falls on both alike; the table prints each run and the median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = ["-m", "t4bench", "max_epochs=1", "progress=off", "hw.telemetry.enabled=false"]


def startup_s(tree: Path, work: Path) -> float:
    """Seconds from launch to run_start for one run of `tree` in the empty folder `work`."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}",
        "OMP_NUM_THREADS": "1",
    }
    launched = time.time()
    command = [sys.executable, *COMMAND, f"hydra.run.dir={work / 'run'}"]
    proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"{tree}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    for line in (work / "run" / "mlperf.log").read_text().splitlines():
        event = json.loads(line.split(":::MLLOG ", 1)[1])
        if event["key"] == "run_start":
            return float(event["time_ms"]) / 1000 - launched
    sys.exit(f"{tree}: no run_start in {work / 'run' / 'mlperf.log'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout root of the earlier tree")
    parser.add_argument("--after", type=Path, required=True, help="checkout root of the later tree")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"before": [], "after": []}
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory() as work:
                times[name].append(startup_s(tree, Path(work)))
    print(f"{'run':>4}  {'before (s)':>10}  {'after (s)':>10}")
    for i, (before, after) in enumerate(zip(times["before"], times["after"], strict=True), 1):
        print(f"{i:>4}  {before:>10.2f}  {after:>10.2f}")
    median = {name: statistics.median(values) for name, values in times.items()}
    before, after = median["before"], median["after"]
    print(f"{'med':>4}  {before:>10.2f}  {after:>10.2f}   ({after - before:+.2f} s)")


if __name__ == "__main__":
    main()
