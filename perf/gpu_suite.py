"""All six benchmarks at reference shapes on one GPU: a bare eager loop, t4bench at the same settings,
t4bench with the hw profile's best `perf` options, and each one's share of the measured FLOP limit.

    python perf/gpu_suite.py                          # hw=h200, bf16, every model
    python perf/gpu_suite.py --models resnet50 ncf --steps 20 --repeats 3
    python perf/gpu_suite.py --device cpu --models ncf --batch 64 --steps 2 --warmup 1  # smoke

Per model, each column is a fresh process with the GPU to itself, given the same Hydra overrides (`perf=default` for
both bare and same): `python -m t4bench input=synthetic perf=default` (same) and `gpu_suite.py --bare-worker` (bare:
`harness_overhead.BareLoop`, the same seed, model, generated batch, loss, optimizer, LR schedule, precision and
backend switches, stepped as zero_grad / forward / backward / step, nothing else; plus FlopCounterMode over one step),
`--repeats` times, alternating which of the two goes first; then `... perf=<best>` once, unless that profile sets no
option for the model (a third sample of the same settings is no best column). Throughput and train_loss of the t4bench
runs come back from MLflow, the bare worker's as one JSON line. Each column also gets its peak GPU memory
(max_memory_allocated, GiB). Figures are the medians over the repeats; the per-repeat same/bare ratios are in
`ratio_each`. The bf16 matrix-product peak is measured once (8192^3, random operands, median). A figure whose run
ended with a non-finite loss is written as NaN, never as a throughput; SIGTERM (a call's time limit) keeps the pairs
the model under way finished. Writes perf/results/gpu_suite_<gpu>_<date>.csv (or --csv); `suite_table.py` prints it as
a table.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import signal
import statistics
import subprocess
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
    reset_peak_memory,
    run_context,
    synchronize,
    synthetic_config,
    t4bench_metrics,
    timed,
)
from model_rows import CUT_NOTE, CutShort, cut_short, each_model, results_csv
from suite_table import UNSET, markdown
from torch.utils.flop_counter import FlopCounterMode

from t4bench.benchmark import benchmark_class
from t4bench.pytorch.perf import PerfOptions

MODELS = ("resnet50", "ssd", "maskrcnn", "gnmt", "ncf", "transformer")


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
    #: same/bare pairs measured (each pair two fresh processes); `ratio_each` their same/bare ratios
    repeats: int = 1
    ratio_each: str = ""
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


def bare_eager(cfg, ctx) -> dict[str, float]:
    """throughput (units/s), loss (mean of the timed steps), units_per_step, gflop_per_step and
    peak_gib (allocated, over build and timed steps, as t4bench's peak_gpu_memory_gib covers its
    run) of a bare eager loop (`BareLoop`), in this process."""
    reset_peak_memory(ctx.device)
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
    return {
        "throughput": units / seconds,
        "loss": mean_loss,
        "units_per_step": units // steps,
        "gflop_per_step": counter.get_total_flops() / 1e9,
        "peak_gib": peak_gib,
    }


BARE_WORKER = "--bare-worker"
BARE_RESULT = "bare-result "
NOT_RUN = {
    "throughput": math.nan,
    "loss": math.nan,
    "units_per_step": 0,
    "gflop_per_step": math.nan,
    "peak_gib": math.nan,
}


def bare_worker(overrides: list[str]) -> None:
    """`gpu_suite.py --bare-worker OVERRIDES`: `bare_eager` of the config `python -m t4bench
    input=synthetic OVERRIDES` composes, printed as one `bare-result {json}` line."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = synthetic_config(overrides, Path(tmp))
        result = bare_eager(cfg, run_context(cfg, Path(tmp)))
    print(BARE_RESULT + json.dumps(result), flush=True)


def bare_run(model: str, overrides: list[str], notes: list[str], worker: list[str] | None = None) -> dict[str, float]:
    """One bare worker (`worker`: its command, this script's by default) in a fresh process, as each
    t4bench run is (no other model's loop state, no MLflow client); a failure (out of memory): NaN, a note."""
    command = [*(worker or [sys.executable, __file__, BARE_WORKER]), *overrides]
    proc = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(BARE_RESULT)]
    if proc.returncode != 0 or not lines:
        error = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        notes.append(f"bare loop failed: {error}")
        print(f"  {model}: bare eager FAILED: {error}", flush=True)
        return dict(NOT_RUN)
    result = json.loads(lines[-1][len(BARE_RESULT) :])
    print(f"  {model}: bare eager {result['throughput']:,.1f} (loss {result['loss']:.4g})", flush=True)
    return result


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


def column_overrides(model: str, args: argparse.Namespace) -> list[str]:
    """The Hydra overrides every column of one model gets (bare and same add `perf=default`)."""
    overrides = [
        f"model={model}",
        f"hw={args.hw}",
        f"hw.precision={args.precision}",
        f"input.steps={args.steps}",
        f"input.warmup_steps={args.warmup}",
    ]
    if args.batch is not None:
        overrides.append(f"model.batch_size={args.batch}")
    return overrides + args.overrides


def perf_differs(plain: list[str], chosen: list[str], out: Path) -> bool:
    """Whether two columns' overrides give the model different perf options."""
    return PerfOptions.from_config(synthetic_config(chosen, out)) != PerfOptions.from_config(
        synthetic_config(plain, out)
    )


def median_or_nan(values: list[float]) -> float:
    """The median of the repeats, NaN if any of them is not finite (a failed or diverged run)."""
    return statistics.median(values) if all(math.isfinite(v) for v in values) else math.nan


def median_figure(values: list[float], losses: list[float]) -> float:
    """The median throughput of the repeats; NaN if any repeat's loss was not finite."""
    return median_or_nan([finite_or_nan(value, loss) for value, loss in zip(values, losses, strict=True)])


def peak_of(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else math.nan


def measure(model: str, args: argparse.Namespace, out: Path, peak: float, gpu: str) -> SuiteRow:
    overrides = column_overrides(model, args)
    cfg = synthetic_config(overrides, out)
    plain = [*overrides, perf_override(cfg, "default")]
    notes: list[str] = []
    same_runs: list[dict[str, float]] = []
    bare_runs: list[dict[str, float]] = []
    cut, pairs = False, 0
    try:
        for repeat in range(args.repeats):
            # alternate which goes first, so neither always meets the GPU as the other left it
            for column in ("same", "bare") if repeat % 2 == 0 else ("bare", "same"):
                if column == "same":
                    same_runs.append(harness_run(model, plain, out, notes))
                else:
                    bare_runs.append(bare_run(model, plain, notes))
            pairs += 1  # printed after the count: a SIGTERM from here on keeps this pair
            print(f"  {model}: pair {pairs} of {args.repeats} done", flush=True)
    except CutShort:
        cut = True  # the pair under way is dropped (its column may have died of the same signal)
    if pairs == 0:
        raise CutShort
    same_runs, bare_runs = same_runs[:pairs], bare_runs[:pairs]
    best = {"avg_throughput": math.nan, "train_loss": math.nan}
    best_perf = args.best
    if args.best != "none" and not cut:
        chosen = [*overrides, perf_override(cfg, args.best)]
        if perf_differs(plain, chosen, out):
            try:
                best = harness_run(model, chosen, out, notes)
            except CutShort:
                cut = True
        else:
            # the profile leaves this model at perf=default: a "best" run would be a third sample
            # of the same settings, read as a speed-up (or slow-down) that is only the spread
            notes.append(f"perf={args.best} sets no option for {model}: no best column")
            best_perf = f"{args.best} {UNSET}"
    if cut:
        notes.append(f"{CUT_NOTE} after {pairs} of {args.repeats} pairs, before the best run")
    same_loss = [run["train_loss"] for run in same_runs]
    bare_loss = [run["loss"] for run in bare_runs]
    bare = median_figure([run["throughput"] for run in bare_runs], bare_loss)
    same = median_figure([run["avg_throughput"] for run in same_runs], same_loss)
    ratios = [s["avg_throughput"] / b["throughput"] for s, b in zip(same_runs, bare_runs, strict=True)]
    first = next((run for run in bare_runs if run["units_per_step"]), bare_runs[0])
    return SuiteRow(
        model=model,
        batch=int(cfg.model.batch_size),
        precision=args.precision,
        unit=benchmark_class(cfg).throughput_unit,
        bare_eager=bare,
        t4bench_same=same,
        t4bench_best=finite_or_nan(best["avg_throughput"], best["train_loss"]),
        best_perf=best_perf,
        bare_loss=median_or_nan(bare_loss),
        same_loss=median_or_nan(same_loss),
        best_loss=best["train_loss"],
        bare_peak_gib=peak_of([run["peak_gib"] for run in bare_runs]),
        same_peak_gib=peak_of([run.get("peak_gpu_memory_gib", math.nan) for run in same_runs]),
        best_peak_gib=best.get("peak_gpu_memory_gib", math.nan),
        units_per_step=int(first["units_per_step"]),
        gflop_per_step=first["gflop_per_step"],
        peak_tflops=peak,
        gpu=gpu,
        torch=torch.__version__,
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        repeats=pairs,
        ratio_each=" ".join(f"{ratio:.4f}" for ratio in ratios),
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
    parser.add_argument("--repeats", type=int, default=1, help="same/bare pairs per model, alternating order")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args(argv)
    check_run_args(parser, args)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    args.best = args.best or args.hw
    return args


def main(argv: list[str]) -> None:
    if argv[:1] == [BARE_WORKER]:
        bare_worker(argv[1:])
        return
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, cut_short)
    device = torch.device(args.device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = matmul_peak_tflops(device)
    print(f"{gpu}, torch {torch.__version__}: measured matmul peak {peak:,.1f} TFLOP/s", flush=True)
    path = args.csv or results_csv("gpu_suite", gpu)
    rows = each_model(
        args.models,
        "SUITE_WORK",
        lambda model, out: measure(model, args, out, peak, gpu),
        lambda rows: write_csv(rows, path),
        stop=lambda row: CUT_NOTE in row.notes,
    )
    if not rows:
        sys.exit(f"gpu_suite: {CUT_NOTE} before any model finished a pair; nothing written")
    print(f"wrote {path}")
    print(markdown(path))
    if len(rows) < len(args.models) or CUT_NOTE in rows[-1].notes:
        sys.exit(f"gpu_suite: {CUT_NOTE}: {len(rows)} of {len(args.models)} models written")


if __name__ == "__main__":
    main(sys.argv[1:])
