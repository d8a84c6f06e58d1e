"""Runs per hour of a seed sweep with N runs at once on one GPU (`hw.runs_per_gpu=N`, docs/sweeps.md).

    python perf/runs_per_hour.py                       # 16 GNMT ding seeds on an H200, N = 1 2 4 8 12, MPS on
    python perf/runs_per_hour.py --mps off --n 1,8     # time-sliced, no MPS
    python perf/runs_per_hour.py --hw cpu --model ncf --scale mini --runs 2 --n 1,2 --mps off \
        --set max_epochs=1                                   # CPU dry run (processes on cores)
    python perf/runs_per_hour.py --n1-runs 8 --work-dir W   # N=1 from 8 seeds; W carried into the next call

An N whose sweep finished leaves W/n<N>/result.json, so the same command run again (W carried) goes
on from the first N not measured: a GPU host with ten-minute calls holds one or two N each.

For each N one `python -m t4bench --multirun` seed sweep of `--runs` seeds (N=1: Hydra's basic
launcher, one at a time, as without packing, over --n1-runs seeds if given: one at a time its rate
is per run, and its epochs are compared on the seeds both ran; N>1: hydra/launcher=packed with hw.runs_per_gpu=N and,
with --mps on, hw.mps=true), each with its own MLflow store under --work-dir. Written: one CSV row
per N (runs and epochs per hour, speed-ups over N=1 (the epochs one is fair when --n1-runs
gives N=1 other seeds), the most GPU memory NVML saw in use, mean GPU busy %,
whether every seed's epochs equal N=1's) and one row per run (--runs-csv): sharing must not change
epochs-to-converge, only the seconds. The per-run memory for the packing check comes from --peak-gib,
else from the most GPU memory NVML saw in use during N=1 (so run N=1 first, as the default list does).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


class GpuSampler(threading.Thread):
    """Most memory used (GiB, summed over GPUs) and mean utilisation (%) over NVML samples, 1/s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.max_used_gib: float | None = None
        self.utils: list[float] = []

    def run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no GPU here (the CPU dry run): the columns stay empty
            return
        while not self.stop.wait(1.0):
            used = sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles) / 2**30
            self.max_used_gib = max(self.max_used_gib or 0.0, used)
            self.utils.append(sum(pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles) / len(handles))
        pynvml.nvmlShutdown()


def sweep(args: argparse.Namespace, n: int, runs: int, peak: float | None, work: Path) -> tuple[float, GpuSampler]:
    """Run one seed sweep of `runs` seeds at N runs per GPU; its wall seconds and GPU samples."""
    key = f"{args.model}_{args.scale}"
    overrides = [
        f"model={args.model}", f"scale={args.scale}", f"hw={args.hw}", f"seed=range(0,{runs})",
        "progress=off", f"hydra.sweep.dir={work / 'sweep'}", *args.set,
    ]  # fmt: skip
    if n > 1:
        overrides += ["hydra/launcher=packed", f"hw.runs_per_gpu={n}", f"hw.mps={str(args.mps == 'on').lower()}"]
        if peak is not None:
            overrides.append(f"hw.peak_memory_gib.{key}={peak:.2f}")
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}"}
    env.setdefault("T4BENCH_DATA_DIR", str(REPO / "data"))
    sampler = GpuSampler()
    sampler.start()
    started = time.perf_counter()
    with open(work / "sweep.log", "w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "t4bench", "--multirun", *overrides],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    if done.returncode != 0:
        tail = (work / "sweep.log").read_text().strip().splitlines()[-5:]
        sys.exit(f"N={n}: the sweep exited {done.returncode}: " + " | ".join(tail))
    return wall, sampler


def measured(
    args: argparse.Namespace, n: int, runs: int, peak: float | None, work: Path
) -> tuple[float, float | None, list[float]]:
    """One N's wall seconds, most GPU GiB in use and utilisation samples: measured now, or read back
    from the result.json a finished sweep left in its work dir (a call that ran out of time goes on
    from the N it was at: carry --work-dir into the next one)."""
    done = work / "result.json"
    if done.exists():
        kept = json.loads(done.read_text())
        if kept["runs"] == runs:
            print(f"N={n}: measured in an earlier call ({done})", flush=True)
            return kept["wall_s"], kept["max_used_gib"], kept["utils"]
    if any(work.iterdir()):  # a sweep cut short (or of another size): its runs would count twice
        shutil.rmtree(work)
        work.mkdir()
    wall, gpu = sweep(args, n, runs, peak, work)
    done.write_text(json.dumps({"runs": runs, "wall_s": wall, "max_used_gib": gpu.max_used_gib, "utils": gpu.utils}))
    return wall, gpu.max_used_gib, gpu.utils


def run_rows(work: Path, model: str) -> list[dict[str, Any]]:
    """One dict per finished seed run of the sweep's store."""
    from mlflow.tracking import MlflowClient

    from t4bench.tracking.tags import run_tags

    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(f"t4bench-{model}")
    rows = []
    for run in client.search_runs([experiment.experiment_id], max_results=10_000) if experiment else []:
        tags, metrics = run.data.tags, run.data.metrics
        if "t4bench.seed" not in tags:  # the sweep's parent run
            continue
        rows.append(
            {
                "seed": int(tags["t4bench.seed"]),
                "outcome": tags.get("t4bench.outcome", ""),
                "epochs_to_converge": metrics.get("epochs_to_converge", float("nan")),
                "epochs_run": metrics.get("epochs_run", float("nan")),
                "run_train_s": metrics.get("run_train_s", float("nan")),
                "peak_gpu_memory_gib": metrics.get("peak_gpu_memory_gib"),
                "gpu_share": tags.get("t4bench.gpu_share", ""),
                "mps": run_tags(client, run).get("t4bench.mps", ""),  # in the run's run_tags.json
                "start_ms": run.info.start_time,
                "end_ms": run.info.end_time,
            }
        )
    return sorted(rows, key=lambda r: r["seed"])


def epochs_key(rows: list[dict[str, Any]]) -> dict[int, str]:
    return {r["seed"]: f"{r['epochs_to_converge']:.3f}/{r['epochs_run']:.3f}" for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gnmt")
    parser.add_argument("--scale", default="ding")
    parser.add_argument("--hw", default="h200")
    parser.add_argument("--runs", type=int, default=16, help="seeds per N (bounds each N's time)")
    parser.add_argument("--n1-runs", type=int, default=None, help="seeds for N=1 (one at a time: a rate per run)")
    parser.add_argument(
        "--runs-at", default="", help="seeds for some N, e.g. 2:8,4:8 (small N take longest: a rate needs fewer)"
    )
    parser.add_argument("--n", default="1,2,4,8,12", help="runs per GPU to measure, comma-separated")
    parser.add_argument("--mps", choices=("on", "off"), default="on", help="CUDA MPS for N>1")
    parser.add_argument("--peak-gib", type=float, default=None, help="one run's GiB in use (default: N=1's NVML max)")
    parser.add_argument("--set", action="append", default=[], help="extra override, e.g. --set max_epochs=1")
    parser.add_argument("--work-dir", type=Path, default=None, help="sweeps' stores and logs (default: a temp dir)")
    stamp = datetime.date.today().isoformat()
    parser.add_argument("--csv", type=Path, default=None, help="per-N CSV (default perf/results/...)")
    args = parser.parse_args()
    name = f"runs_per_hour_{args.hw}_{args.model}_{args.scale}_mps-{args.mps}_{stamp}"
    out = args.csv or REPO / "perf" / "results" / f"{name}.csv"
    runs_out = out.with_name(out.stem + "_runs.csv")
    work_root = (args.work_dir or Path(tempfile.mkdtemp(prefix="runs_per_hour-"))).resolve()
    peak, base_rate, base_epoch_rate, base_epochs = args.peak_gib, None, None, None
    base_span_rate: float | None = None
    summary, per_run = [], []
    try:
        runs_at = {int(k): int(v) for k, v in (item.split(":") for item in args.runs_at.split(",") if item)}
    except ValueError:
        parser.error(f"--runs-at {args.runs_at!r}: expected N:RUNS pairs, e.g. 2:8,4:8")
    if args.n1_runs:
        runs_at.setdefault(1, args.n1_runs)
    for n in [int(x) for x in args.n.split(",")]:
        work = work_root / f"n{n}"
        work.mkdir(parents=True, exist_ok=True)
        wall, max_used, utils = measured(args, n, runs_at.get(n, args.runs), peak, work)
        rows = run_rows(work, args.model)
        if n == 1 and peak is None:  # what NVML saw in use with one run at a time (context included)
            peak = max_used
        rate = len(rows) / wall * 3600
        ends = [r["end_ms"] for r in rows if r["end_ms"] is not None]  # none: no run of this N ended
        # epochs trained per hour: a fair rate when N=1 ran fewer seeds (--n1-runs) whose mean
        # epochs-to-converge differs from the full seed set's
        epoch_rate = sum(r["epochs_run"] for r in rows if not math.isnan(r["epochs_run"])) / wall * 3600
        # the same rate over the runs' own span (first start to last end): without the sweep
        # process's start and summary, which a sweep of few runs (N=1's) pays over fewer runs
        span = (max(ends) - min(r["start_ms"] for r in rows)) / 1000 if ends else None
        span_rate = len(rows) / span * 3600 if span else None
        base_span_rate = base_span_rate or (span_rate if n == 1 else None)
        base_rate = base_rate or (rate if n == 1 else None)
        base_epoch_rate = base_epoch_rate or (epoch_rate if n == 1 else None)
        epochs = epochs_key(rows)
        base_epochs = base_epochs if base_epochs is not None else (epochs if n == 1 else None)
        # N=1 may have run fewer seeds (--n1-runs): compare the seeds both ran
        same = base_epochs is not None and all(epochs[s] == base_epochs[s] for s in epochs.keys() & base_epochs)
        summary.append(
            {
                "n": n, "mps": args.mps if n > 1 else "off", "runs": len(rows), "wall_s": round(wall, 1),
                # first run's start to last run's end: the wall less the sweep process's start and summary
                "jobs_span_s": round(span, 1) if span else "",
                "runs_per_hour": round(rate, 1), "speedup_vs_n1": round(rate / base_rate, 2) if base_rate else "",
                "span_runs_per_hour": round(span_rate, 1) if span_rate else "",
                "span_speedup_vs_n1": round(span_rate / base_span_rate, 2) if span_rate and base_span_rate else "",
                "epochs_per_hour": round(epoch_rate, 1),
                "epoch_speedup_vs_n1": round(epoch_rate / base_epoch_rate, 2) if base_epoch_rate else "",
                "max_gpu_memory_used_gib": round(max_used, 1) if max_used is not None else "",
                "mean_gpu_util_pct": round(sum(utils) / len(utils), 1) if utils else "",
                "peak_gib_per_run": round(peak, 2) if peak is not None else "",
                "same_epochs_as_n1": same if base_epochs is not None else "",
                "epochs_per_seed": " ".join(f"{s}:{e}" for s, e in sorted(epochs.items())),
            }
        )  # fmt: skip
        per_run += [{"n": n, **r} for r in rows]
        print(", ".join(f"{k}={v}" for k, v in summary[-1].items() if k != "epochs_per_seed"), flush=True)
    # rows by N, whatever order --n ran them in (a long N last, so a cut-off call loses the least)
    summary.sort(key=lambda r: r["n"])
    per_run.sort(key=lambda r: (r["n"], r["seed"]))
    for path, rows in ((out, summary), (runs_out, per_run)):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print(f"wrote {out} and {runs_out}; stores and logs in {work_root}")


if __name__ == "__main__":
    main()
