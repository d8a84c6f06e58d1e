#!/usr/bin/env bash
# A seed-robust sweep from sweeps/ and its held-out validation, as recorded in docs/sweeps.md.
#   scripts/sweep_and_validate.sh [SWEEP] [HELD_OUT_SEEDS]      (default: ncf_stable 100-119)
# Two worker processes share the study's journal; re-running the script resumes the study, and
# validation reuses the held-out runs that already finished. One thread per process: on a small
# CPU torch's default thread pool per process oversubscribes the cores (docs/sweeps.md).
set -euo pipefail
cd "$(dirname "$0")/.."  # sweeps/, multirun/ and mlflow.db are relative to the repository root
sweep="${1:-ncf_stable}"
seeds="${2:-100-119}"
if [[ ! -f "sweeps/${sweep}.yaml" ]]; then
  echo "sweep_and_validate.sh: error: no sweep definition sweeps/${sweep}.yaml" >&2
  exit 2
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
python -m t4bench --multirun "+sweeps=${sweep}" hydra.sweeper.n_jobs=2
python -m t4bench.sweep.holdout --sweep-dir "multirun/sweeps/${sweep}" --seeds "${seeds}"
