"""Synthetic throughput of one model under several `perf` option sets, through the loop's Trainer in
this process (the step `python -m t4bench input=synthetic` times, without MLflow and telemetry): the
measurements the per-hw defaults in conf/perf/<hw>.yaml are chosen from.

    python perf/perf_variants.py resnet50 "" "perf.optimizer_impl=fused" \\
        "perf.optimizer_impl=fused perf.compile=true" --hw h200 --steps 30

Each variant is a space-separated list of overrides laid over `perf=default`; "" is the loop as it
was. Prints units/s, the ratio to the first variant, the mean loss of the timed steps (a non-finite
loss prints NaN for the throughput) and the variant's setup time (build, compile, capture).
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import tempfile
import time
from pathlib import Path

import torch
from harness_overhead import run_context, synchronize, synthetic_config

from t4bench.benchmark import benchmark_class
from t4bench.progress import ProgressReporter
from t4bench.pytorch.loop import Trainer


def measure(model: str, variant: str, args: argparse.Namespace, out: Path) -> tuple[float, float, float]:
    """(units/s or NaN, mean timed loss, seconds of build + warm-up) of one variant."""
    overrides = [
        f"model={model}",
        f"hw={args.hw}",
        f"input.steps={args.steps}",
        f"input.warmup_steps={args.warmup}",
        "perf=default",
        *args.overrides,
        *variant.split(),
    ]
    cfg = synthetic_config(overrides, out)
    ctx = run_context(cfg, out)
    started = time.perf_counter()
    bench = benchmark_class(cfg)(cfg, ctx)
    trainer = Trainer(bench, cfg, ctx)
    batch = ctx.to_device(bench.synthetic_batch())
    quiet = ProgressReporter("off")
    trainer.train_steps(iter([batch] * args.warmup), args.warmup, quiet, bench.throughput_unit)
    synchronize(ctx.device)
    setup = time.perf_counter() - started
    stats = trainer.train_steps(iter([batch] * args.steps), args.steps, quiet, bench.throughput_unit)
    loss = stats["train_loss"]
    del trainer, bench, batch
    gc.collect()
    if ctx.device.type == "cuda":
        torch.cuda.empty_cache()
    torch._dynamo.reset()  # each variant compiles afresh, as a new process would
    return (stats["throughput"] if math.isfinite(loss) else math.nan), loss, setup


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("variants", nargs="+", help='space-separated overrides per variant ("" = perf=default)')
    parser.add_argument("--hw", default="h200")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="an override for every variant (repeatable), e.g. --set model.batch_size=4",
    )
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants:
            try:
                results.append((variant, *measure(args.model, variant, args, Path(tmp))))
            except Exception as error:  # one failing variant (a compile error) must not hide the others
                print(
                    f"{args.model} [{variant or 'perf=default'}] failed: {type(error).__name__}: "
                    f"{str(error).splitlines()[0][:300] if str(error) else ''}",
                    flush=True,
                )
                results.append((variant, math.nan, math.nan, math.nan))
                continue
            print(
                f"{args.model} [{variant or 'perf=default'}]: {results[-1][1]:,.1f}/s loss {results[-1][2]:.4g} "
                f"setup {results[-1][3]:.1f}s",
                flush=True,
            )
    base = results[0][1]
    print(f"\n{args.model} ({args.steps} timed steps after {args.warmup} warm-up):")
    for variant, rate, loss, setup in results:
        print(
            f"  {rate:>12,.1f}  x{rate / base:5.3f}  loss {loss:8.4g}  setup {setup:6.1f}s  {variant or 'perf=default'}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
