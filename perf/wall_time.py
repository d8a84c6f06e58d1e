"""Wall time of `python -m t4bench --cfg job` and of the default run (a benchmark, not a test).

    python perf/wall_time.py [--repeats 5] [--runs 1]

Each command runs in a fresh process in a temporary directory with its own SQLite MLflow store,
so the figures include interpreter start-up, imports and MLflow setup — what a user waits for.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(args: list[str], workdir: Path) -> float:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{workdir / 'mlflow.db'}",
        "T4BENCH_DATA_DIR": os.environ.get("T4BENCH_DATA_DIR", str(REPO / "data")),
    }
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "t4bench", *args, f"hydra.run.dir={workdir / 'out'}"],
        cwd=workdir,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def report(name: str, samples: list[float]) -> None:
    spread = f" (min {min(samples):.2f}, max {max(samples):.2f}, n={len(samples)})" if len(samples) > 1 else ""
    print(f"{name:<28} median {statistics.median(samples):7.2f} s{spread}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5, help="repeats of --cfg job")
    parser.add_argument("--runs", type=int, default=1, help="repeats of the default run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        report("--cfg job", [timed(["--cfg", "job"], workdir) for _ in range(args.repeats)])
        report("default run (NCF mini)", [timed([], workdir) for _ in range(args.runs)])
    print(f"cpu cores: {os.cpu_count()}; load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
