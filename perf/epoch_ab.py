"""Time per epoch of real-data runs under several perf settings, each arm a whole `python -m t4bench`
run in a fresh process, the arms' order rotated every repeat (a benchmark: figures printed, never
asserted):

    python perf/epoch_ab.py model=gnmt scale=ding hw=h100 --epochs 4 --repeats 2 \\
        --arm default:perf=default --arm profile: --csv out.csv

An arm is NAME:OVERRIDES (space-separated Hydra overrides, none for the profile as composed); the
first arm is the baseline. Per run the per-epoch `train_time_s` metric is read back from its own
SQLite MLflow store; epoch 1 is left out of the figure (it holds the first use of every batch shape:
kernel choice, allocator growth), so each run gives the median of epochs 2..E. Printed per arm: the
median over repeats, its ratio to the baseline's (above 1: faster than the baseline) and the last
epoch's training loss (a run whose loss is not finite is refused: its seconds are no training speed;
the same seed and batches give close losses). Runs use `seed=--seed` and `max_epochs=E`: choose E
below the model's epochs to converge (GNMT and Transformer ding: 10 or more), as a run that stops
early is refused.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_arm(name: str, overrides: list[str], arm: list[str], epochs: int, seed: int, workdir: Path) -> dict[str, Any]:
    """One whole run of arm `name`; its per-epoch training seconds and last training loss. Exits
    in one line when the run fails, stops before `epochs` or ends with a non-finite loss (its
    seconds would not be a training speed)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    env.setdefault("T4BENCH_DATA_DIR", str(REPO / "data"))
    command = [
        sys.executable, "-m", "t4bench", *overrides, *arm, f"seed={seed}", f"max_epochs={epochs}",
        "progress=off",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    client = MlflowClient(uri)
    (run,) = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    history = sorted(client.get_metric_history(run.info.run_id, "train_time_s"), key=lambda m: m.step)
    losses = sorted(client.get_metric_history(run.info.run_id, "train_loss"), key=lambda m: m.step)
    if len(history) != epochs:
        sys.exit(f"{name}: {len(history)} epochs, not {epochs} (converged early: lower --epochs)")
    loss = losses[-1].value if losses else float("nan")
    if not math.isfinite(loss):
        sys.exit(f"{name}: last training loss {loss}: no training speed from a run that diverged")
    return {"epoch_s": [m.value for m in history], "loss": loss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME:OVERRIDES (first: the baseline)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None, help="one row per run")
    parser.add_argument("overrides", nargs="*", help="the runs' common overrides, e.g. model=gnmt scale=ding")
    args = parser.parse_args()
    arms = [(name, text.split()) for name, _, text in (a.partition(":") for a in args.arm)]
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (epoch 1 is left out of the figure)")
    rows: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        order = arms[repeat % len(arms) :] + arms[: repeat % len(arms)]  # rotated: a drift weighs on all
        for name, arm in order:
            with tempfile.TemporaryDirectory(prefix="epoch_ab-") as tmp:
                result = run_arm(name, args.overrides, arm, args.epochs, args.seed, Path(tmp))
            later = result["epoch_s"][1:]
            rows.append(
                {
                    "arm": name, "repeat": repeat, "overrides": " ".join(arm), "epochs": len(result["epoch_s"]),
                    "median_epoch_s": statistics.median(later),
                    "epoch_s": " ".join(f"{s:.3f}" for s in result["epoch_s"]), "last_loss": result["loss"],
                }
            )  # fmt: skip
            print(f"repeat {repeat} {name}: epochs {rows[-1]['epoch_s']} s, loss {result['loss']:.4f}", flush=True)
    base = statistics.median(r["median_epoch_s"] for r in rows if r["arm"] == arms[0][0])
    print(f"{'arm':<12} {'epoch s (median, epochs 2..)':>30} {'x baseline':>11} {'last loss':>10}")
    for name, _ in arms:
        mine = [r for r in rows if r["arm"] == name]
        median = statistics.median(r["median_epoch_s"] for r in mine)
        loss = statistics.median(r["last_loss"] for r in mine)
        print(f"{name:<12} {median:>30.3f} {base / median:>11.3f} {loss:>10.4f}")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
