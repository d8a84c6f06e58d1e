"""All six benchmarks at reference shapes on one GPU: a bare eager loop, t4bench at the same settings,
t4bench with the hw profile's best `perf` options, and each one's share of the measured FLOP limit.

    python perf/gpu_suite.py                          # hw=h200, bf16, every model
    python perf/gpu_suite.py --models resnet50 ncf --steps 20
    python perf/gpu_suite.py --device cpu --models ncf --batch 64 --steps 2 --warmup 1  # smoke

Per model, in this order: `python -m t4bench input=synthetic perf=default` and `... perf=<best>` as
subprocesses (each has the GPU to itself; throughput and train_loss read back from MLflow), then in
this process a bare loop of the same model, generated batch, loss, optimizer and precision
(zero_grad / forward / backward / step, nothing else), and FlopCounterMode over one step's forward
and backward. Each column also gets its peak GPU memory (max_memory_allocated, GiB).
The bf16 matrix-product peak is measured once (8192^3, random operands, median).
A figure whose run ended with a non-finite loss is written as NaN, never as a throughput.
Writes perf/results/gpu_suite_<gpu>_<date>.csv (or --csv); `suite_table.py` prints it as
the README's markdown table.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gc
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from harness_overhead import (
    BareLoop,
    add_run_args,
    check_run_args,
    run_context,
    synchronize,
    synthetic_config,
    t4bench_metrics,
    timed,
)
from torch.utils.flop_counter import FlopCounterMode

from t4bench.benchmark import benchmark_class

MODELS = ("resnet50", "ssd", "maskrcnn", "gnmt", "ncf", "transformer")
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class SuiteRow:
    model: str
    batch: int
    precision: str
    unit: str
    bare_eager: float
    t4bench_same: float
    t4bench_best: float
    best_perf: str
    bare_loss: float
    same_loss: float
    best_loss: float
    # torch.cuda.max_memory_allocated, GiB: the measure t4bench logs as peak_gpu_memory_gib (NaN on a CPU)
    bare_peak_gib: float
    same_peak_gib: float
    best_peak_gib: float
    units_per_step: int
    gflop_per_step: float
    peak_tflops: float
    gpu: str
    torch: str
    date: str
    notes: str = ""

    def flop_fraction(self, throughput: float) -> float:
        """Counted FLOP/s at `throughput` over the measured matmul peak."""
        steps_per_s = throughput / self.units_per_step if self.units_per_step else math.nan
        return self.gflop_per_step * 1e9 * steps_per_s / (self.peak_tflops * 1e12)


def finite_or_nan(throughput: float, loss: float) -> float:
    return throughput if math.isfinite(loss) else math.nan


def matmul_peak_tflops(device: torch.device, size: int = 8192, reps: int = 10) -> float:
    """Median bf16 TFLOP/s of size^3 products on random operands (fp32 on a CPU, small)."""
    if device.type != "cuda":
        size, dtype = 512, torch.float32
    else:
        dtype = torch.bfloat16
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        synchronize(device)
        started = time.perf_counter()
        a @ b
        synchronize(device)
        times.append(time.perf_counter() - started)
    return 2 * size**3 / sorted(times)[len(times) // 2] / 1e12


def bare_eager(cfg, ctx) -> tuple[float, float, int, float, float]:
    """(units/s, mean loss, units per step, GFLOP per step, peak GiB allocated) of a bare eager loop
    (`BareLoop`); the peak covers the timed steps (model, optimizer state, activations), as
    t4bench's peak_gpu_memory_gib covers its run."""
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    loop = BareLoop(cfg, ctx)
    loss_sum = torch.zeros((), device=ctx.device, dtype=torch.float64)

    def step() -> int:
        loss, units = loop.step()
        loss_sum.add_(loss.detach().double())
        return units

    steps = int(cfg.input.steps)
    units, seconds = timed(step, int(cfg.input.warmup_steps), steps, ctx.device, after_warmup=loss_sum.zero_)
    mean_loss = float(loss_sum) / steps
    peak_gib = torch.cuda.max_memory_allocated(ctx.device) / 2**30 if ctx.device.type == "cuda" else math.nan
    with FlopCounterMode(display=False) as counter, torch.autocast(**loop.autocast):
        loss, _ = loop.bench.loss(loop.model, loop.batch)
        loss.backward()
    return units / seconds, mean_loss, units // steps, counter.get_total_flops() / 1e9, peak_gib


def perf_override(cfg, choice: str) -> str:
    """`perf=<choice>` where the config has a perf group default, else `+perf=<choice>`."""
    return f"perf={choice}" if "perf" in cfg else f"+perf={choice}"


def harness_run(model: str, overrides: list[str], out: Path, notes: list[str]) -> dict[str, float]:
    """One `python -m t4bench` run's metrics; a failed run is NaN with its last error line in `notes`
    (one failing option set must not cost the other models' figures)."""
    label = overrides[-1]
    try:
        # a diverged run logs no throughput: missing figures are NaN
        metrics = {"avg_throughput": math.nan, "train_loss": math.nan, **t4bench_metrics(overrides, out)}
    except SystemExit as failure:
        notes.append(f"{label} failed: {str(failure)[-200:]}")
        print(f"  {model}: t4bench {label} FAILED: {failure}", flush=True)
        return {"avg_throughput": math.nan, "train_loss": math.nan}
    print(f"  {model}: t4bench {label} {metrics['avg_throughput']:,.1f} (loss {metrics['train_loss']:.4g})", flush=True)
    return metrics


def measure(model: str, args: argparse.Namespace, out: Path, peak: float, gpu: str) -> SuiteRow:
    overrides = [
        f"model={model}",
        f"hw={args.hw}",
        f"hw.precision={args.precision}",
        f"input.steps={args.steps}",
        f"input.warmup_steps={args.warmup}",
    ]
    if args.batch is not None:
        overrides.append(f"model.batch_size={args.batch}")
    overrides += args.overrides
    cfg = synthetic_config(overrides, out)
    notes: list[str] = []
    same = harness_run(model, [*overrides, perf_override(cfg, "default")], out, notes)
    best = {"avg_throughput": math.nan, "train_loss": math.nan}
    if args.best != "none":
        best = harness_run(model, [*overrides, perf_override(cfg, args.best)], out, notes)
    ctx = run_context(cfg, out)
    try:
        bare, bare_loss, units, gflop, bare_peak = bare_eager(cfg, ctx)
    except (RuntimeError, ValueError) as failure:  # e.g. out of memory: keep the harness figures
        notes.append(f"bare loop failed: {str(failure).splitlines()[0][:200]}")
        bare, bare_loss, units, gflop, bare_peak = math.nan, math.nan, 0, math.nan, math.nan
    print(f"  {model}: bare eager {bare:,.1f} (loss {bare_loss:.4g}), {gflop:,.1f} GFLOP/step", flush=True)
    return SuiteRow(
        model=model,
        batch=int(cfg.model.batch_size),
        precision=args.precision,
        unit=benchmark_class(cfg).throughput_unit,
        bare_eager=finite_or_nan(bare, bare_loss),
        t4bench_same=finite_or_nan(same["avg_throughput"], same["train_loss"]),
        t4bench_best=finite_or_nan(best["avg_throughput"], best["train_loss"]),
        best_perf=args.best,
        bare_loss=bare_loss,
        same_loss=same["train_loss"],
        best_loss=best["train_loss"],
        bare_peak_gib=bare_peak,
        same_peak_gib=same.get("peak_gpu_memory_gib", math.nan),
        best_peak_gib=best.get("peak_gpu_memory_gib", math.nan),
        units_per_step=units,
        gflop_per_step=gflop,
        peak_tflops=peak,
        gpu=gpu,
        torch=torch.__version__,
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        notes="; ".join(notes),
    )


def write_csv(rows: list[SuiteRow], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = [
        *asdict(rows[0]).keys(),
        "same_over_bare",
        "best_over_bare",
        "bare_flop_fraction",
        "same_flop_fraction",
        "best_flop_fraction",
    ]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    **asdict(row),
                    "same_over_bare": row.t4bench_same / row.bare_eager,
                    "best_over_bare": row.t4bench_best / row.bare_eager,
                    "bare_flop_fraction": row.flop_fraction(row.bare_eager),
                    "same_flop_fraction": row.flop_fraction(row.t4bench_same),
                    "best_flop_fraction": row.flop_fraction(row.t4bench_best),
                }
            )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(parser, MODELS, "hardware profile (default h200 on cuda, cpu on cpu)", warmup=8)
    parser.add_argument("--best", default=None, help="perf config for the best column (default: the hw's; none skips)")
    parser.add_argument(
        "--csv", type=Path, default=None, help="output CSV (default: perf/results/gpu_suite_<gpu>_<date>.csv)"
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args(argv)
    check_run_args(parser, args)
    args.hw = args.hw or ("h200" if args.device == "cuda" else "cpu")
    args.precision = args.precision or ("bf16" if args.device == "cuda" else "fp32")
    args.best = args.best or args.hw
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = matmul_peak_tflops(device)
    print(f"{gpu}, torch {torch.__version__}: measured matmul peak {peak:,.1f} TFLOP/s", flush=True)
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    path = args.csv or RESULTS / f"gpu_suite_{slug}_{dt.date.today().isoformat()}.csv"
    rows: list[SuiteRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(os.environ.get("SUITE_WORK", tmp))
        out.mkdir(parents=True, exist_ok=True)
        for model in args.models:
            rows.append(measure(model, args, out, peak, gpu))
            write_csv(rows, path)  # after every model: a run cut short keeps the rows it finished
            gc.collect()  # free the bare loop's model before the next subprocess
            if device.type == "cuda":
                torch.cuda.empty_cache()
    print(f"wrote {path}")
    from suite_table import markdown

    print(markdown(path))


if __name__ == "__main__":
    main(sys.argv[1:])
