"""GPU checks (hardware profiles, telemetry), on a CUDA host, from the repo root:

    python3 scripts/gpu/checks.py [--hw h200] [--reps 3] [--steps 500]      (or scripts/gpu/checks.sh)

1. `hw=auto` resolves to the expected profile (h200 on an H200).
2. A profile this host does not have (`hw=t4`), or more GPUs than it has (`hw.count=N+1`), fails
   with one line, exit 2.
3. Idle power of GPU 0 (NVML, before any run): the floor training power must exceed.
4. Mini NCF on `hw=<profile>` with telemetry: metrics present and plausible (power above idle,
   energy > 0, per-GPU time series, GPU inventory tags). Needs data/movielens-100k (skipped without).
5. Synthetic NCF (reference shapes), telemetry on vs off, `--reps` pairs interleaved (on/off, then
   off/on) so drift cancels: the throughput cost of telemetry.
A figures table comes last. Runs land in one MLflow store under $OUT (default /tmp/t4bench_gpu_checks).
Exit status: 0 when every check passed or was skipped, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: per-GPU series every telemetry run must log (system/gpu_0_<name>): MLflow's monitor's, then ours
GPU_SERIES = (
    "utilization_percentage",
    "memory_usage_megabytes",
    "power_usage_watts",
    "temperature_celsius",
    "sm_clock_megahertz",
)


@dataclass
class Row:
    check: str
    status: str  # PASS | FAIL | SKIP
    figures: str


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default=os.environ.get("HW", "h200"), help="profile this host should resolve to")
    parser.add_argument("--reps", type=int, default=int(os.environ.get("REPS", "3")), help="on/off pairs")
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "500")), help="timed synthetic steps")
    parser.add_argument(
        "--out", default=os.environ.get("OUT", "/tmp"), help="MLflow store and run dirs go under OUT/t4bench_gpu_checks"
    )
    parser.add_argument(
        "--synthetic-override",
        action="append",
        default=[],
        help="extra override for the synthetic runs (e.g. model.batch_size=4096 for a CPU smoke test)",
    )
    return parser.parse_args()


def missing_modules() -> list[str]:
    missing = []
    for module in ("torch", "hydra", "omegaconf", "mlflow", "pynvml", "mlperf_logging", "rich", "t4bench"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    return missing


class Checks:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dest = Path(args.out).resolve() / "t4bench_gpu_checks"
        self.dest.mkdir(parents=True, exist_ok=True)
        self.uri = f"sqlite:///{self.dest / 'mlflow.db'}"
        self.env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": self.uri,
            "PYTHONUNBUFFERED": "1",
            "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
        }
        self.rows: list[Row] = []
        self.idle_power_w: float | None = None
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(self.uri)

    def add(self, check: str, ok: bool | None, figures: str) -> None:
        status = "SKIP" if ok is None else "PASS" if ok else "FAIL"
        self.rows.append(Row(check, status, figures))
        print(f"[{status}] {check}: {figures}", flush=True)

    def t4bench(
        self, *overrides: str, name: str, timeout: float = 300
    ) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.perf_counter()
        cmd = [sys.executable, "-m", "t4bench", *overrides, "progress=plain", f"hydra.run.dir={self.dest / name}"]
        print("$ " + " ".join(cmd[1:]), flush=True)
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            proc = subprocess.CompletedProcess(cmd, 124, str(err.stdout or ""), f"timed out after {timeout:.0f} s")
        wall = time.perf_counter() - started
        if proc.returncode not in (0, 2):
            print(proc.stdout[-1500:] + proc.stderr[-2500:], flush=True)
        return proc, wall

    def run_tagged(self, check: str) -> Any:
        runs = []
        for experiment in self.client.search_experiments():
            runs += self.client.search_runs([experiment.experiment_id], f"tags.check = '{check}'")
        return max(runs, key=lambda r: r.info.start_time) if runs else None

    # ---------------------------------------------------------------------------------------

    def detection(self) -> None:
        from omegaconf import OmegaConf

        from t4bench import hardware

        found = hardware.detect()
        cfg = OmegaConf.create({"hw": hardware.load_profile("auto")})
        hardware.resolve(cfg, found)
        self.found = found
        self.add(
            "hw=auto resolves",
            cfg.hw.name == self.args.hw,
            f"{found.describe()} via {found.source} -> hw={cfg.hw.name} ({cfg.hw.precision}); expected {self.args.hw}",
        )

    def wrong_profile_fails(self) -> None:
        wrong = "h200" if self.args.hw == "t4" else "t4"
        proc, wall = self.t4bench(f"hw={wrong}", name="wrong_profile", timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        ok = (
            proc.returncode == 2
            and last.startswith(f"t4bench: error: hw={wrong} asks for")
            and "Traceback" not in proc.stderr
        )
        self.add(f"hw={wrong} fails fast", ok, f"exit {proc.returncode} after {wall:.1f} s: {last}")

    def too_many_gpus_fail(self) -> None:
        if not self.found.gpus:
            self.add("hw.count above the GPUs here fails", None, "no GPU")
            return
        count = len(self.found.gpus) + 1
        proc, wall = self.t4bench(f"hw={self.args.hw}", f"hw.count={count}", name="too_many", timeout=120)
        last = ([line for line in proc.stderr.splitlines() if line.strip()] or [""])[-1]
        ok = proc.returncode == 2 and f"hw.count={count}" in last and "only" in last
        self.add(f"hw.count={count} fails fast", ok, f"exit {proc.returncode} after {wall:.1f} s: {last}")

    def idle_power(self) -> None:
        if not self.found.gpus:
            self.add("idle power (NVML)", None, "no GPU")
            return
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            readings = []
            for _ in range(12):
                readings.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
                time.sleep(0.25)
        finally:
            pynvml.nvmlShutdown()
        self.idle_power_w = statistics.median(readings)
        self.add("idle power (NVML)", True, f"GPU0 median {self.idle_power_w:.1f} W over 3 s")

    def telemetry_plausible(self, check: str, run: Any) -> None:
        """Summary metrics, per-GPU series and inventory tags of one telemetry-on run."""
        from t4bench.tracking.tags import run_tags

        tags, metrics = run_tags(self.client, run), run.data.metrics  # telemetry and inventory: its tag file
        if not tags.get("t4bench.telemetry", "").startswith("on"):
            on_gpu = bool(self.found.gpus)
            self.add(f"{check}: telemetry", False if on_gpu else None, tags.get("t4bench.telemetry", "no tag"))
            return
        energy, power = metrics.get("energy_to_train_kj", 0.0), metrics.get("avg_power_w", 0.0)
        idle = self.idle_power_w or 0.0
        series = {
            name: len(self.client.get_metric_history(run.info.run_id, f"system/gpu_0_{name}")) for name in GPU_SERIES
        }
        inventory = {k.removeprefix("t4bench.gpu."): v for k, v in tags.items() if k.startswith("t4bench.gpu.")}
        self.add(
            f"{check}: energy, power > idle",
            energy > 0 and power > idle,
            f"energy {energy:.3f} kJ, avg {power:.0f} W vs idle {idle:.0f} W, max temp "
            f"{metrics.get('max_temp_c', float('nan')):.0f} C, "
            f"throttled {metrics.get('throttled_fraction', float('nan')):.2f}, "
            f"util {metrics.get('avg_gpu_util_pct', float('nan')):.0f}%, "
            f"sample cost {metrics.get('telemetry_sample_cost_ms', float('nan')):.2f} ms",
        )
        self.add(
            f"{check}: per-GPU series",
            all(n > 0 for n in series.values()),
            ", ".join(f"{name} {n}" for name, n in series.items()) + " points",
        )
        self.add(
            f"{check}: inventory tags",
            bool(inventory.get("names")) and "driver" in inventory,
            "; ".join(f"{k}={v}" for k, v in sorted(inventory.items())),
        )

    def mini_run(self) -> None:
        data = REPO / "data" / "movielens-100k" / "ml-100k.inter"
        if not data.exists() and not os.environ.get("T4BENCH_DATA_DIR"):
            self.add(f"mini NCF hw={self.args.hw}", None, f"{data} missing (carry data/movielens-100k)")
            return
        proc, wall = self.t4bench(
            "model=ncf",
            f"hw={self.args.hw}",
            "max_epochs=3",
            "hw.telemetry.interval_s=0.5",
            "tracking.system_metrics_interval_s=0.5",
            "+tracking.tags.check=mini",
            name="mini",
        )
        run = self.run_tagged("mini")
        if proc.returncode != 0 or run is None:
            self.add(
                f"mini NCF hw={self.args.hw}", False, f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
            )
            return
        m = run.data.metrics
        self.add(
            f"mini NCF hw={self.args.hw}",
            run.info.status == "FINISHED",
            f"{run.info.status}, {m.get('epochs_run', 0):.0f} epochs, HR@10 {m.get('eval_quality', float('nan')):.3f}, "
            f"time_to_train {m.get('time_to_train_s', float('nan')):.1f} s, "
            f"{m.get('avg_throughput', 0):,.0f} samples/s, "
            f"precision {run.data.tags.get('t4bench.precision')}, wall {wall:.0f} s",
        )
        self.telemetry_plausible("mini", run)

    def telemetry_cost(self) -> None:
        throughput: dict[bool, list[float]] = {True: [], False: []}
        first_on = None
        for rep in range(self.args.reps):
            order = (True, False) if rep % 2 == 0 else (False, True)
            for telemetry in order:
                check = f"synthetic-{'on' if telemetry else 'off'}-{rep}"
                proc, _ = self.t4bench(
                    "model=ncf",
                    "input=synthetic",
                    f"input.steps={self.args.steps}",
                    f"hw={self.args.hw}",
                    f"hw.telemetry.enabled={str(telemetry).lower()}",
                    f"+tracking.tags.check={check}",
                    *self.args.synthetic_override,
                    name=check,
                )
                run = self.run_tagged(check)
                if proc.returncode != 0 or run is None or run.info.status != "FINISHED":
                    self.add(check, False, f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
                    continue
                throughput[telemetry].append(run.data.metrics["avg_throughput"])
                if telemetry and first_on is None:
                    first_on = run
        if first_on is not None:
            self.telemetry_plausible("synthetic", first_on)
        on, off = throughput[True], throughput[False]
        if not on or not off:
            self.add("telemetry cost (synthetic NCF)", False, "missing runs")
            return
        cost = 100 * (1 - statistics.mean(on) / statistics.mean(off))
        spread = 100 * (max(off) - min(off)) / statistics.mean(off) if len(off) > 1 else float("nan")
        sampled = first_on is not None and first_on.data.tags.get("t4bench.telemetry", "").startswith("on")
        self.add(
            "telemetry cost (synthetic NCF)",
            True if sampled else None,
            f"on {statistics.mean(on):,.0f} vs off {statistics.mean(off):,.0f} samples/s: cost {cost:+.2f}% "
            f"(off-run spread {spread:.2f}%; on {[round(x) for x in on]}, off {[round(x) for x in off]})",
        )

    def table(self) -> None:
        width = max(len(r.check) for r in self.rows)
        print("\n== t4bench GPU checks: figures")
        print(f"{'check'.ljust(width)}  status  figures")
        for row in self.rows:
            print(f"{row.check.ljust(width)}  {row.status:6s}  {row.figures}")
        print(f"MLflow store: {self.uri}")


def main() -> int:
    args = parse_args()
    missing = missing_modules()
    if missing:
        print(
            f"gpu_checks: error: cannot import {', '.join(missing)} with {sys.executable} "
            "(set PYTHONPATH to src/ and the dependencies)",
            file=sys.stderr,
        )
        return 2
    import torch

    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"devices {torch.cuda.device_count() if torch.cuda.is_available() else 0}",
        flush=True,
    )
    checks = Checks(args)
    checks.detection()
    checks.wrong_profile_fails()
    checks.too_many_gpus_fail()
    checks.idle_power()
    checks.mini_run()
    checks.telemetry_cost()
    checks.table()
    return 0 if all(row.status != "FAIL" for row in checks.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
