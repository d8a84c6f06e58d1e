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
import statistics
import sys
import tempfile
from pathlib import Path

from gpu_suite import bare_run, bare_worker, harness_run

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
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            shift = repeat % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                # the suite's runners: each prints its figure; a failed run is NaN with its line
                if arm in CLI_ARMS:
                    value = harness_run(arm, [*overrides, *CLI_ARMS[arm]], Path(tmp), notes)["avg_throughput"]
                else:
                    worker = [sys.executable, __file__, WORKER, BARE_ARMS[every.index(arm)]]
                    value = bare_run(arm, overrides, notes, worker)["throughput"]
                figures[arm].append(value)
    base = statistics.median(figures["bare+nothing"])
    print(f"\n{args.model}, {args.steps} timed steps after {args.warmup}, medians of {args.repeats}:")
    for arm in arms:
        median = statistics.median(figures[arm])
        print(f"  {arm:34s} {median:12,.1f}  x{median / base:.3f}  ({', '.join(f'{v:,.1f}' for v in figures[arm])})")


if __name__ == "__main__":
    main(sys.argv[1:])
