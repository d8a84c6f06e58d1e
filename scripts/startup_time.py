"""Start-up of a default NCF mini run under two source trees, side by side.

Start-up ends at the MLPerf `run_start` event in the run's mlperf.log: it holds the command-line
checks, Hydra, imports, the runner's checks, the MLflow run and data loading, nothing of training.
Two figures per run: wall seconds from launch to the event (its `time_ms` is wall-clock time), and
the CPU seconds the process had used when the event appeared (read from /proc, polled every
20 ms), which a machine shared with other work disturbs far less than the wall time. The run is
stopped (SIGTERM) once the event is seen.

    python scripts/startup_time.py --before /tmp/before --after . [--repeats 3]

Each tree is a checkout root (its src/ and conf/ are used). The runs alternate between the trees
so that load on a shared machine falls on both alike; the table prints each run and the medians.
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = ["-m", "t4bench", "max_epochs=1", "progress=off", "hw.telemetry.enabled=false"]
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _run_start_ms(log: Path) -> float | None:
    if not log.is_file():
        return None
    for line in log.read_text().splitlines():
        if ":::MLLOG " in line and '"run_start"' in line:
            return float(json.loads(line.split(":::MLLOG ", 1)[1])["time_ms"])
    return None


def startup(tree: Path, work: Path) -> tuple[float, float]:
    """(wall s, CPU s) from launch to run_start for one run of `tree` in the empty folder `work`."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}",
        "OMP_NUM_THREADS": "1",
    }
    log = work / "run" / "mlperf.log"
    launched = time.time()
    command = [sys.executable, *COMMAND, f"hydra.run.dir={work / 'run'}"]
    proc = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cpu = 0.0
    try:
        while (started := _run_start_ms(log)) is None:
            if proc.poll() is not None:
                sys.exit(f"{tree}: exit {proc.returncode} before run_start: {proc.stderr.read()[-2000:]}")
            cpu = _cpu_s(proc.pid)
            time.sleep(0.02)
        return started / 1000 - launched, cpu
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout root of the earlier tree")
    parser.add_argument("--after", type=Path, required=True, help="checkout root of the later tree")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory() as work:
                times[name].append(startup(tree, Path(work)))
    print(f"{'run':>4}  {'before wall':>11}  {'after wall':>10}  {'before CPU':>10}  {'after CPU':>9}   (seconds)")
    for i, ((bw, bc), (aw, ac)) in enumerate(zip(times["before"], times["after"], strict=True), 1):
        print(f"{i:>4}  {bw:>11.2f}  {aw:>10.2f}  {bc:>10.2f}  {ac:>9.2f}")
    med = {name: [statistics.median(v[k] for v in values) for k in (0, 1)] for name, values in times.items()}
    (bw, bc), (aw, ac) = med["before"], med["after"]
    print(f"{'med':>4}  {bw:>11.2f}  {aw:>10.2f}  {bc:>10.2f}  {ac:>9.2f}")
    print(f"after - before: wall {aw - bw:+.2f} s, CPU {ac - bc:+.2f} s (medians)")


if __name__ == "__main__":
    main()
