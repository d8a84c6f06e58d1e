"""Why a host-bound model runs at another speed as `python -m t4bench` than as the suite's bare
worker (SSD: the CLI 7-22 % faster at the same loss on an H100, 2026-12-06, while in one process,
perf/profile_step.py, the two steps agree). The bare worker again with one piece of the CLI
process's state added at a time, beside the CLI run with and without its sampler threads, each arm
a fresh process, the arms' order rotated every repeat:

    python perf/process_gap.py --model ssd --steps 40 --warmup 8 --repeats 2

Pieces (a code read found no other difference in threads, switches, modes, model, optimizer or
batch): `set_device` (torch.cuda.set_device, as t4bench.pytorch.rank.device_for does; the bare
worker never calls it), `imports` (mlflow, pandas, sqlalchemy: the CLI process's ~2,000 extra
modules, pyarrow's allocator thread), `telemetry` (t4bench's NVML sampler thread). Whichever arm
closes the gap names the cause; the figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gpu_suite import BARE_RESULT, bare_worker
from harness_overhead import t4bench_metrics

PIECES = ("set_device", "imports", "telemetry")
BARE_ARMS = ("", "set_device", "imports", "telemetry", ",".join(PIECES))
#: the CLI run, and the same without t4bench's NVML sampler and MLflow's system-metrics thread
CLI_ARMS = {"cli": [], "cli-quiet": ["hw.telemetry.enabled=false", "tracking.system_metrics_interval_s=0"]}
WORKER = "--worker"


def add_pieces(pieces: list[str]) -> list[object]:
    """Put the named pieces of the CLI process's state into this one; what must stay alive."""
    import torch

    kept: list[object] = []
    if "set_device" in pieces and torch.cuda.is_available():  # a CPU check runs the rest
        torch.cuda.set_device(0)
    if "imports" in pieces:
        kept += [importlib.import_module(name) for name in ("mlflow", "pandas", "sqlalchemy")]
    if "telemetry" in pieces:
        from t4bench import telemetry

        kept.append(telemetry.start(enabled=True, on_gpu=torch.cuda.is_available(), gpus=1))
    return kept


def bare_arm(pieces: str, overrides: list[str]) -> float:
    command = [sys.executable, __file__, WORKER, pieces, *overrides]
    proc = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(BARE_RESULT)]
    if proc.returncode != 0 or not lines:
        print(f"  bare+{pieces or 'nothing'} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}")
        return float("nan")
    return float(json.loads(lines[-1][len(BARE_RESULT) :])["throughput"])


def cli_arm(arm: str, overrides: list[str], out: Path) -> float:
    try:
        return t4bench_metrics([*overrides, *CLI_ARMS[arm]], out)["avg_throughput"]
    except SystemExit as failure:  # one failed run must not cost the other arms' figures
        print(f"  {arm} failed: {str(failure)[-200:]}")
        return float("nan")


def main(argv: list[str]) -> None:
    if argv[:1] == [WORKER]:
        kept = add_pieces([p for p in argv[1].split(",") if p])
        bare_worker(argv[2:])
        del kept
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ssd")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--arms", nargs="+", default=None, help="a subset of the arms (bare+nothing is always run)")
    args = parser.parse_args(argv)
    overrides = [
        f"model={args.model}",
        f"hw={args.hw}",
        "hw.strict=false",
        f"input.steps={args.steps}",
        f"input.warmup_steps={args.warmup}",
        "perf=default",
    ]
    every = [f"bare+{pieces or 'nothing'}" for pieces in BARE_ARMS] + list(CLI_ARMS)
    unknown = sorted(set(args.arms or []) - set(every))
    if unknown:
        parser.error(f"no arm {', '.join(unknown)}; choose from {', '.join(every)}")
    arms = [arm for arm in every if args.arms is None or arm in args.arms or arm == "bare+nothing"]
    figures: dict[str, list[float]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            shift = repeat % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                if arm in CLI_ARMS:
                    value = cli_arm(arm, overrides, Path(tmp))
                else:
                    value = bare_arm(BARE_ARMS[every.index(arm)], overrides)
                figures[arm].append(value)
                print(f"  repeat {repeat + 1} {arm}: {value:,.1f}", flush=True)
    base = statistics.median(figures["bare+nothing"])
    print(f"\n{args.model}, {args.steps} timed steps after {args.warmup}, medians of {args.repeats}:")
    for arm in arms:
        median = statistics.median(figures[arm])
        print(f"  {arm:34s} {median:12,.1f}  x{median / base:.3f}  ({', '.join(f'{v:,.1f}' for v in figures[arm])})")


if __name__ == "__main__":
    main(sys.argv[1:])
