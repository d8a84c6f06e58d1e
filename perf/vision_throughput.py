"""Synthetic training throughput of the vision benchmarks at reference size: t4bench vs a bare loop.

    python perf/vision_throughput.py                       # H200, bf16, reference batches
    python perf/vision_throughput.py --device cpu --steps 2 --warmup 1 --batch 2   # smoke test

For each model, `python -m t4bench model=<m> input=synthetic hw=<hw> ...` runs as a subprocess and
its `avg_throughput` is read from its MLflow run (store under --out, default $OUT or a temporary
folder); then a bare PyTorch loop of the same model, batch, precision and optimizer runs in this
process (`harness_overhead.bare_loop_throughput`; warm-up excluded, CUDA synchronised around the
timed steps). Prints a table: model, batch, precision, t4bench img/s, bare img/s, ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
from pathlib import Path

import torch
from harness_overhead import Comparison, add_run_args, check_run_args, compare

MODELS = ("resnet50", "ssd", "maskrcnn")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(parser, MODELS, "hardware profile for cuda (default h200); cpu uses hw=cpu", warmup=5)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
        help="folder for the MLflow store and Hydra run dirs (default: $OUT or a temporary one)",
    )
    parser.add_argument(
        "overrides", nargs="*", help="extra Hydra overrides for every model, e.g. model.channels_last=false"
    )
    args = parser.parse_args(argv)
    check_run_args(parser, args)
    return args


def overrides_for(model: str, args: argparse.Namespace) -> list[str]:
    hw = "cpu" if args.device == "cpu" else (args.hw or "h200")
    precision = args.precision or ("fp32" if args.device == "cpu" else "bf16")
    chosen = [
        f"model={model}",
        f"hw={hw}",
        f"hw.precision={precision}",
        f"input.steps={args.steps}",
        f"input.warmup_steps={args.warmup}",
    ]
    if args.batch is not None:
        chosen.append(f"model.batch_size={args.batch}")
    return chosen + list(args.overrides)


def rate(value: float) -> str:
    """One decimal for GPU-sized figures, three significant ones for a CPU smoke test's."""
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def table(rows: list[Comparison]) -> str:
    lines = [f"{'model':<10} {'batch':>5} {'precision':<9} {'t4bench img/s':>14} {'bare img/s':>11} {'ratio':>6}"]
    lines += [
        f"{r.model:<10} {r.batch:>5} {r.precision:<9} {rate(r.t4bench):>14} {rate(r.bare):>11} {r.ratio:>6.3f}"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        rows = []
        for model in args.models:
            rows.append(compare(overrides_for(model, args), out))
            print(f"{model}: t4bench {rate(rows[-1].t4bench)}, bare {rate(rows[-1].bare)} img/s", flush=True)
            gc.collect()  # free the bare loop's model before the next t4bench subprocess
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    device = rows[0].device if rows else args.device
    print(f"\nsynthetic training throughput on {device} ({args.steps} timed steps after {args.warmup} warm-up):")
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
