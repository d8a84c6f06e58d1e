"""What limits each model's training step: torch.profiler over a few steps after warm-up, per model
and path, summarised as markdown (docs/perf.md's profiler sections).

    python perf/profile_step.py --out $OUT/profile.md                 # H200: six models x bare/same/best
    python perf/profile_step.py --models ssd --paths bare same --steps 8 --out ssd.md
    python perf/profile_step.py --device cpu --models ssd --steps 2 --warmup 1 --out x.md scale=mini

Paths, each built in this process one after the other, seeded as a run is, with the suite's Hydra
overrides (`gpu_suite.column_overrides`): `bare` (harness_overhead.BareLoop, what the suite times
as bare eager), `same` (the loop's Trainer at `perf=default`: train_steps, as `python -m t4bench
input=synthetic` times it, without MLflow and telemetry) and `best` (the Trainer at `perf=<hw>`).
Per path: `--warmup` untimed steps (compile, capture, autotune), `--steps` timed without the
profiler (the step time), then `--steps` under the profiler. The summary: the 15 kernels (on a CPU:
aten ops) with the most kernel time, device busy time (union of kernel intervals) against wall,
kernels and launches per step, host syncs per step and the time the host spent blocked in them,
host CPU time, the share of kernel time in matrix kernels (GEMM, convolution, attention; the rest is
mostly memory-bound elementwise and reduction work), counted GFLOP per step, and peak memory.
"""

from __future__ import annotations

import argparse
import gc
import math
import re
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness_overhead
import torch
from gpu_suite import MODELS, column_overrides, perf_override
from harness_overhead import BareLoop, add_run_args, check_run_args, run_context, synchronize, synthetic_config
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from t4bench import seeding
from t4bench.benchmark import benchmark_class
from t4bench.progress import ProgressReporter
from t4bench.pytorch.loop import Trainer

PATHS = ("bare", "same", "best")
TOP = 15
#: kernels (CUDA) or aten ops (CPU) that do matrix products: the compute-bound part of a step
MATRIX = re.compile(
    r"gemm|conv|cutlass|xmma|nvjet|cudnn|fmha|flash|attention|wgrad|dgrad|addmm|bmm|aten::mm|matmul|linear"
)
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch"}


@dataclass
class Profile:
    model: str
    path: str
    perf: str
    device: str
    steps: int
    step_ms: float  # without the profiler
    profiled_ms: float  # per step, under the profiler
    busy_ms: float  # device busy per step (union of kernel intervals; on a CPU: op self time)
    kernels: float  # kernels (CPU: aten ops) run per step
    launches: float  # kernel and graph launches per step (CUDA)
    syncs: float  # host waits on the device per step (cuda*Synchronize)
    sync_ms: float  # per step, host blocked in them
    host_cpu_ms: float  # process CPU time per step (all threads)
    matrix_share: float  # of kernel time
    gflop_per_step: float
    peak_gib: float
    peak_what: str
    #: False: a CUDA run whose profiler recorded no kernels (no CUPTI): op figures are host-side
    kernel_records: bool = True
    top: list[tuple[str, float, float, float]] = field(default_factory=list)  # name, ms/step, share, calls/step


def build(model: str, path: str, args: argparse.Namespace, out: Path) -> tuple[Callable[[int], None], Any, str]:
    """(run n steps, (model, batch, autocast) for FLOP counting, the perf config) of one path."""
    perf = "default" if path in ("bare", "same") else args.best
    overrides = column_overrides(model, args)
    cfg = synthetic_config(overrides, out)
    cfg = synthetic_config([*overrides, perf_override(cfg, perf)], out)
    ctx = run_context(cfg, out)
    if path == "bare":
        loop = BareLoop(cfg, ctx)
        loss_sum = torch.zeros((), device=ctx.device, dtype=torch.float64)

        def bare(n: int) -> None:
            for _ in range(n):
                loss, _ = loop.step()
                loss_sum.add_(loss.detach().double())

        return bare, (loop.model, loop.batch, loop.autocast, loop.bench), perf
    seeding.seed_torch(int(cfg.seed))  # as the rank does before it builds the benchmark
    bench = benchmark_class(cfg)(cfg, ctx)
    trainer = Trainer(bench, cfg, ctx)
    batch = trainer.ctx.to_device(bench.synthetic_batch())
    quiet = ProgressReporter("off")

    def harness(n: int) -> None:
        trainer.train_steps(iter([batch] * n), n, quiet, bench.throughput_unit)

    amp = trainer.ctx.amp_dtype
    autocast = dict(device_type=ctx.device.type, dtype=amp or torch.float32, enabled=amp is not None)
    return harness, (trainer.model, batch, autocast, bench), perf


def block_ms(run: Callable[[int], None], steps: int, device: torch.device) -> float:
    """Mean step time of `steps` steps of a path's runner, the device drained before and after."""
    synchronize(device)
    started = time.perf_counter()
    run(steps)
    synchronize(device)
    return (time.perf_counter() - started) * 1e3 / steps


def gflop(parts: Any) -> float:
    model, batch, autocast, bench = parts
    with FlopCounterMode(display=False) as counter, torch.autocast(**autocast):
        loss, _ = bench.loss(model, batch)
        loss.backward()
    return counter.get_total_flops() / 1e9


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (kernels on several streams overlap)."""
    total, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def summarize(prof: Any, steps: int, wall_s: float, device: torch.device) -> dict[str, Any]:
    events = list(prof.events())
    cpu = [e for e in events if e.device_type == DeviceType.CPU]
    work = [e for e in events if e.device_type == DeviceType.CUDA]
    recorded = bool(work) or device.type != "cuda"
    if work:
        durations = [(e.name, e.time_range.elapsed_us()) for e in work]
        busy = busy_us([(e.time_range.start, e.time_range.end) for e in work])
    else:  # a CPU run, or no CUPTI (no kernel records): aten ops by their own (self) host time
        work = [e for e in cpu if e.name.startswith("aten::")]
        durations = [(e.name, float(e.self_cpu_time_total)) for e in work]
        busy = sum(d for _, d in durations)
    totals: dict[str, list[float]] = {}
    for name, us in durations:
        entry = totals.setdefault(name, [0.0, 0])
        entry[0] += us
        entry[1] += 1
    device_us = sum(us for _, us in durations) or math.nan
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:TOP]
    syncs = [e for e in cpu if "Synchronize" in e.name]
    return {
        "kernel_records": recorded,
        "busy_ms": busy / 1e3 / steps,
        "kernels": len(work) / steps,
        "launches": sum(e.name in LAUNCHES for e in cpu) / steps,
        "syncs": len(syncs) / steps,
        "sync_ms": sum(e.self_cpu_time_total for e in syncs) / 1e3 / steps,
        "matrix_share": sum(us for name, us in durations if MATRIX.search(name.lower())) / device_us,
        "top": [(name, us / 1e3 / steps, us / device_us, count / steps) for name, (us, count) in ranked],
        "profiled_ms": wall_s * 1e3 / steps,
    }


def profile_path(model: str, path: str, args: argparse.Namespace, out: Path) -> Profile:
    device = torch.device(args.device)
    harness_overhead.reset_peak_memory(device)
    run, parts, perf = build(model, path, args, out)
    run(args.warmup)
    step_ms = block_ms(run, args.steps, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    cpu_started = time.process_time()
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        run(args.steps)
        synchronize(device)
        wall = time.perf_counter() - started
    host_cpu_ms = (time.process_time() - cpu_started) * 1e3 / args.steps
    if device.type == "cuda":
        peak, what = torch.cuda.max_memory_allocated(device) / 2**30, "GPU max allocated"
    else:
        peak, what = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "process max RSS"
    flops = gflop(parts) if path != "best" else math.nan  # a compiled model's count is the same work
    summary = summarize(prof, args.steps, wall, device)
    return Profile(
        model=model,
        path=path,
        perf=perf,
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        steps=args.steps,
        step_ms=step_ms,
        host_cpu_ms=host_cpu_ms,
        gflop_per_step=flops,
        peak_gib=peak,
        peak_what=what,
        **summary,
    )


def _share(part: float, whole: float) -> str:
    return "-" if not math.isfinite(part / whole) else f"{100 * part / whole:.0f}%"


def markdown(p: Profile) -> str:
    unit = "kernel" if p.device != "cpu" and p.kernel_records else "aten op"
    achieved = p.gflop_per_step / p.step_ms if math.isfinite(p.gflop_per_step) else math.nan
    lines = [
        f"#### {p.model}, {p.path} (perf={p.perf}), {p.device}",
        "",
        *(
            []
            if p.kernel_records
            else ["- **no kernel records** (CUPTI unavailable?): device figures are aten ops' host time"]
        ),
        f"- step {p.step_ms:.2f} ms ({p.profiled_ms:.2f} ms under the profiler, {p.steps} steps); "
        f"{p.gflop_per_step:,.1f} GFLOP/step counted, {achieved:.3g} TFLOP/s achieved",
        f"- device busy {p.busy_ms:.2f} ms/step = {_share(p.busy_ms, p.profiled_ms)} of wall "
        f"(idle or launch-bound: the rest); matrix {unit}s {100 * p.matrix_share:.0f}% of kernel time",
        f"- {p.kernels:,.0f} {unit}s and {p.launches:,.0f} launches per step; "
        f"{p.syncs:,.1f} host syncs per step, host blocked in them {p.sync_ms:.2f} ms/step "
        f"({_share(p.sync_ms, p.profiled_ms)})",
        f"- host CPU {p.host_cpu_ms:.2f} ms/step ({_share(p.host_cpu_ms, p.profiled_ms)} of wall, all threads); "
        f"peak {p.peak_gib:.2f} GiB ({p.peak_what})",
        "",
        f"| {unit} | ms/step | share of kernel time | calls/step |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, ms, share, calls in p.top:
        shown = (name[:90] + "...") if len(name) > 90 else name
        lines.append(f"| `{shown.replace('|', '/')}` | {ms:.3f} | {100 * share:.1f}% | {calls:g} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(parser, MODELS, "hardware profile (default h200 on cuda, cpu on cpu)", warmup=5)
    parser.set_defaults(steps=8)
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--best", default=None, help="perf config of the best path (default: the hw's)")
    parser.add_argument("--out", type=Path, required=True, help="markdown file to write")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every path")
    args = parser.parse_args(argv)
    check_run_args(parser, args)
    args.best = args.best or args.hw
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    command = "python perf/profile_step.py " + " ".join(argv)
    sections = [f"Made by `{command}` (torch {torch.__version__}).\n"]
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for path in args.paths:
                try:
                    sections.append(markdown(profile_path(model, path, args, Path(tmp))))
                except Exception as error:  # one failing path (out of memory, a compile error) keeps the others
                    sections.append(f"#### {model}, {path}: failed: {type(error).__name__}: {str(error)[:200]}\n")
                print(sections[-1], flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text("\n".join(sections))  # after each path: a run cut short keeps what it made
                gc.collect()
                if args.device == "cuda":
                    torch.cuda.empty_cache()
                torch._dynamo.reset()  # the next path compiles afresh, as a new process would


if __name__ == "__main__":
    main(sys.argv[1:])
