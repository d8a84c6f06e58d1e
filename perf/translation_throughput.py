"""Synthetic reference-size throughput of GNMT and Transformer: t4bench vs a bare PyTorch loop.

    python perf/translation_throughput.py hw=h200 [--precisions bf16,fp32] [overrides ...]

For each model and precision, `harness_overhead.compare` runs `python -m t4bench input=synthetic`
(reference-size model, generated batch of the reference shapes) and then a bare
zero_grad/forward/backward/step loop over the same model, batch, loss and optimizer, on the same
device. Prints one table of target tokens/s. Needs no dataset.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from harness_overhead import Comparison, compare

MODELS = ("gnmt", "transformer")


def table(results: list[Comparison]) -> str:
    rows = [
        f"{'model':12s} {'batch':>5s} {'prec':5s} {'device':7s} {'t4bench tok/s':>14s} "
        f"{'bare tok/s':>12s} {'ratio':>6s}"
    ]
    rows += [
        f"{r.model:12s} {r.batch:5d} {r.precision:5s} {r.device:7s} {r.t4bench:14,.0f} {r.bare:12,.0f} {r.ratio:6.3f}"
        for r in results
    ]
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="bf16,fp32", help="comma-separated hw.precision values")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args, overrides = parser.parse_known_args(argv)
    results = []
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                result = compare([f"model={model}", f"hw.precision={precision}", *overrides], Path(tmp))
            print(
                f"{result.model} {result.precision}: t4bench {result.t4bench:,.0f}, bare {result.bare:,.0f} "
                f"{result.unit}",
                flush=True,
            )
            results.append(result)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "ratio": r.ratio} for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
