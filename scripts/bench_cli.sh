#!/usr/bin/env bash
# Wall time of `t4bench --help`, each subcommand's `--help` (the console script's module,
# `python -m t4bench.cli`), `python -m t4bench --help` and `--cfg job` (best and median of N runs, default 5)
# beside a bare interpreter start, and the heavy modules each one imports (none is the goal: torch,
# MLflow and TensorFlow load only when a run starts). Prints figures; asserts nothing.
#   scripts/bench_cli.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

python - "${1:-5}" <<'EOF'
import shutil
import statistics
import subprocess
import sys
import time

runs = int(sys.argv[1])
# `python` as the user types it (a pyenv shim adds its own start-up), else this interpreter
python = shutil.which("python") or sys.executable
commands = {
    "python -c pass": [python, "-c", "pass"],
    **{
        f"t4bench {sub}--help": [python, "-m", "t4bench.cli", *sub.split(), "--help"]
        for sub in ("", "run ", "sweep ", "report ", "runs ", "runs list ", "data ", "data check ", "check ", "validate ")
    },
    "python -m t4bench --help": [python, "-m", "t4bench", "--help"],
    "python -m t4bench --cfg job": [python, "-m", "t4bench", "--cfg", "job"],
    "python -m t4bench --cfg job model=gnmt hw=t4": [python, "-m", "t4bench", "--cfg", "job", "model=gnmt", "hw=t4"],
}
heavy = ("torch", "mlflow", "tensorflow", "sqlalchemy", "pandas", "optuna", "hydra")
print(f"{'command':<48} {'best s':>7} {'median s':>9}  heavy imports (target: t4bench --help under 1 s, none)")
for label, argv in commands.items():
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    traced = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], check=True, capture_output=True, text=True)
    loaded = sorted({line.split("|")[-1].strip().split(".")[0] for line in traced.stderr.splitlines() if "|" in line})
    found = [m for m in heavy if m in loaded]
    print(f"{label:<48} {min(times):7.2f} {statistics.median(times):9.2f}  {', '.join(found) or 'none'}")
EOF
