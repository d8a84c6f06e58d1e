#!/usr/bin/env python
"""Pruning benchmark: the same Optuna sweep (same sampler seed, same search space, same seeds) run
with a pruner and without one; prints the total training epochs each spent and the best value each
reached.

    OMP_NUM_THREADS=1 python scripts/bench_pruning.py --n-trials 8 --pruner median
    python scripts/bench_pruning.py --model ncf --max-epochs 10 -- model.batch_size='choice(256,512)'

Both sweeps use the random sampler, so the two studies try the same parameters in the same order
and differ only in what the pruner stopped. Each writes to multirun/bench_pruning/<pruner>/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path


def run_sweep(args: argparse.Namespace, pruner: str, out: Path) -> dict[str, float]:
    import optuna

    from t4bench.sweep.storage import open_storage

    sweep_dir = out / pruner
    if sweep_dir.exists() and not args.resume:
        shutil.rmtree(sweep_dir)
    cmd = [
        sys.executable,
        "-m",
        "t4bench",
        "--multirun",
        f"model={args.model}",
        f"max_epochs={args.max_epochs}",
        "progress=off",
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=random",
        f"hydra/sweeper/pruner={pruner}",
        f"hydra.sweeper.study_name=bench-{pruner}",
        f"hydra.sweeper.n_trials={args.n_trials}",
        f"hydra.sweeper.seeds_per_trial={args.seeds_per_trial}",
        f"hydra.sweep.dir={sweep_dir}",
        f"model.optimizer.lr={args.lr_space}",
        *args.overrides,
    ]
    if pruner == "median":
        cmd += [f"hydra.sweeper.pruner.n_startup_trials={args.startup}", "hydra.sweeper.pruner.n_warmup_steps=1"]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(
        cmd,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        stdout=subprocess.DEVNULL if args.quiet else None,
    )
    study = optuna.load_study(study_name=f"bench-{pruner}", storage=open_storage(str(sweep_dir / "optuna.journal")))
    trials = study.trials
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    return {
        "epochs": sum(float(t.user_attrs.get("epochs_run", 0)) for t in trials),
        "best": min((t.value for t in complete), default=float("nan")),
        "complete": len(complete),
        "pruned": sum(t.state.name == "PRUNED" for t in trials),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="ncf")
    parser.add_argument("--n-trials", type=int, default=8)
    parser.add_argument("--seeds-per-trial", type=int, default=1)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--pruner", default="median", help="conf/hydra/sweeper/pruner/<name>")
    parser.add_argument("--startup", type=int, default=2, help="median pruner: trials before it prunes")
    parser.add_argument("--lr-space", default="tag(log,interval(1e-5,1e-2))")
    parser.add_argument("--out", type=Path, default=Path("multirun/bench_pruning"))
    parser.add_argument("--resume", action="store_true", help="keep existing studies (resume them)")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides (search space) for both sweeps")
    args = parser.parse_args()
    results = {name: run_sweep(args, name, args.out) for name in (args.pruner, "none")}
    print(f"\n{'sweep':<12}{'total epochs':>14}{'best value':>12}{'complete':>10}{'pruned':>8}")
    for name, r in results.items():
        label = "no pruning" if name == "none" else name
        print(f"{label:<12}{r['epochs']:>14.0f}{r['best']:>12.3f}{r['complete']:>10d}{r['pruned']:>8d}")
    with_p, without = results[args.pruner], results["none"]
    if without["epochs"]:
        print(f"pruning saved {1 - with_p['epochs'] / without['epochs']:.0%} of the epochs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
