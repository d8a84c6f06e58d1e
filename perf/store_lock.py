"""How long N processes that open one existing SQLite MLflow store at once wait in
`t4bench.tracking.store_lock.ready` (a benchmark, not a test).

A packed sweep's first N runs each open the store once, under its file lock. If MLflow's first
open also imports its SQL store module (sqlalchemy, alembic) inside the lock, the opens run one
after another: the GNMT N=8 sweep of 2026-12-05 started its first eight runs ~3 s apart. This
prints each process's seconds in `ready()`, both as the processes come (`cold`) and with that
module imported before `ready()` is called (`preloaded`), side by side on the same store:

    python perf/store_lock.py [--procs 8]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import sys, time
import mlflow.tracking  # imported by t4bench long before a run opens its store
if sys.argv[2] == "preloaded":
    import mlflow.store.tracking.sqlalchemy_store
from t4bench.tracking.store_lock import ready
started = time.perf_counter()
ready(sys.argv[1])
print(f"{time.perf_counter() - started:.3f}")
"""


def waits(uri: str, mode: str, procs: int) -> list[float]:
    """Seconds in ready() of `procs` processes started together."""
    running = [
        subprocess.Popen([sys.executable, "-c", PROBE, uri, mode], stdout=subprocess.PIPE, text=True)
        for _ in range(procs)
    ]
    return sorted(float(p.communicate()[0].strip().splitlines()[-1]) for p in running)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        subprocess.run([sys.executable, "-c", PROBE, uri, "cold"], check=True, capture_output=True)  # create it
        for mode in ("cold", "preloaded"):
            seconds = waits(uri, mode, args.procs)
            shown = " ".join(f"{s:.2f}" for s in seconds)
            median = statistics.median(seconds)
            print(f"{mode:>9}: {args.procs} processes, seconds in ready(): {shown}; median {median:.2f}")


if __name__ == "__main__":
    main()
