"""Bare eager vs t4bench's Trainer in one process: blocks of timed steps in alternating order, so the
process-to-process spread of a host-bound model cancels and what is left is what each loop does
per step (goal 4's comparator).

    python perf/step_ab.py --models ssd maskrcnn --steps 20 --rounds 8 --out $OUT/step_ab.csv
    python perf/step_ab.py --device cpu --models ssd --steps 2 --rounds 3 --batch 2 --out x.csv scale=mini

Why: on one H100 (2026-12-06) fresh SSD processes of the *same* loop ran 270-420 img/s, so the
suite's 40-step fresh-process pairs (perf/gpu_suite.py) put t4bench at 0.95-1.22x bare and cannot
resolve 1 %. Here both loops are built in this process (perf/profile_step.build: the suite's bare
loop and the Trainer's train_steps at perf=default, without MLflow and telemetry, whose threads
perf/process_gap.py measures), warmed up, then timed round after round: bare then Trainer in even
rounds, Trainer then bare in odd ones, so a drift over the run weighs on both alike. Per round the
ratio is bare's step time over the Trainer's (above 1: t4bench faster); the summary is the
geometric mean of the rounds with scipy's bootstrap 95 % CI, and the median of the rounds with its
own (percentile) bootstrap CI, and the spread of the rounds. Why the median too: on an H100 SSD's
blocks swung ±12 % inside one process (2026-12-06), and one slow block moves the mean of eight
rounds by more than the 1 % to be resolved; many short blocks and their median keep the comparison
on what the two loops do, not on which block a host stall fell into.
"""

from __future__ import annotations

import argparse
import csv
import gc
import math
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gpu_suite import MODELS
from harness_overhead import add_run_args, check_run_args
from profile_step import block_ms, build
from scipy import stats

PATHS = ("bare", "same")


@dataclass
class ABResult:
    model: str
    device: str
    steps: int  # timed steps per block
    rounds: int
    bare_ms: float  # median step time over the rounds
    same_ms: float
    ratio: float  # geometric mean of the rounds' bare_ms / same_ms: t4bench's speed relative to bare
    ci_low: float  # bootstrap 95 % CI of that mean (nan with fewer than 3 rounds)
    ci_high: float
    median_ratio: float  # median of the rounds' ratios
    median_ci_low: float  # its bootstrap 95 % CI (percentile; nan with fewer than 3 rounds)
    median_ci_high: float
    ratio_each: str  # each round's ratio, in order


def _bootstrap(values: np.ndarray, statistic: Any, method: str) -> tuple[float, float]:
    """scipy's bootstrap 95 % CI of `statistic`; nan with fewer than 3 values; a point without spread."""
    if len(values) < 3:
        return math.nan, math.nan
    if np.ptp(values) == 0:  # the bootstrap needs a spread to resample
        return float(values[0]), float(values[0])
    ci = stats.bootstrap((values,), statistic, confidence_level=0.95, n_resamples=10_000, method=method, random_state=0)
    return float(ci.confidence_interval.low), float(ci.confidence_interval.high)


def summarize(model: str, device: str, steps: int, bare: list[float], same: list[float]) -> ABResult:
    ratios = np.array(bare) / np.array(same)
    logs = np.log(ratios)
    low, high = (math.exp(v) for v in _bootstrap(logs, np.mean, "BCa"))
    median_low, median_high = _bootstrap(ratios, np.median, "percentile")
    return ABResult(
        model=model,
        device=device,
        steps=steps,
        rounds=len(ratios),
        bare_ms=float(np.median(bare)),
        same_ms=float(np.median(same)),
        ratio=math.exp(float(logs.mean())),
        ci_low=low,
        ci_high=high,
        median_ratio=float(np.median(ratios)),
        median_ci_low=median_low,
        median_ci_high=median_high,
        ratio_each=" ".join(f"{r:.4f}" for r in ratios),
    )


def measure(model: str, args: argparse.Namespace, out: Path) -> ABResult:
    device = torch.device(args.device)
    runs = {path: build(model, path, args, out)[0] for path in PATHS}
    for run in runs.values():
        block_ms(run, max(args.warmup, 1), device)
    times: dict[str, list[float]] = {path: [] for path in PATHS}
    for round_index in range(args.rounds):
        order = PATHS if round_index % 2 == 0 else PATHS[::-1]
        for path in order:
            times[path].append(block_ms(runs[path], args.steps, device))
        print(f"  {model} round {round_index + 1}: bare/same {times['bare'][-1] / times['same'][-1]:.4f}", flush=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return summarize(model, name, args.steps, times["bare"], times["same"])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(parser, MODELS, "hardware profile (default h200 on cuda, cpu on cpu)", warmup=5)
    parser.set_defaults(steps=20)
    parser.add_argument("--rounds", type=int, default=8, help="timed blocks per loop")
    parser.add_argument("--out", type=Path, required=True, help="CSV to write (after each model)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for both loops")
    args = parser.parse_args(argv)
    check_run_args(parser, args)
    if args.rounds < 2:
        parser.error("--rounds must be >= 2 (each loop goes first in some round)")
    args.best = args.hw  # profile_step.build reads it; only its best path uses it
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    results: list[ABResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            results.append(measure(model, args, Path(tmp)))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("w", newline="") as handle:  # after each model: a cut run keeps what it made
                writer = csv.DictWriter(handle, fieldnames=list(asdict(results[0])))
                writer.writeheader()
                writer.writerows(asdict(r) for r in results)
            gc.collect()
            if args.device == "cuda":
                torch.cuda.empty_cache()
    print(f"\n{results[0].device}, {args.precision}, {args.steps} steps a block, same process (bare/same step time):")
    for r in results:
        print(
            f"  {r.model:12s} bare {r.bare_ms:8.2f} ms  same {r.same_ms:8.2f} ms  ratio {r.ratio:.4f}"
            f" (95% CI {r.ci_low:.4f}-{r.ci_high:.4f}, n={r.rounds}); median {r.median_ratio:.4f}"
            f" (95% CI {r.median_ci_low:.4f}-{r.median_ci_high:.4f}); rounds {r.ratio_each}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
