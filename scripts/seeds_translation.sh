#!/usr/bin/env bash
# Epochs-to-converge of the mini GNMT and Transformer over seeds, on CPU cores (never the GPU).
#
#   scripts/seeds_translation.sh [PARALLEL] [extra t4bench overrides ...]
#   e.g. scripts/seeds_translation.sh 8                    (16 cores: 8 runs x 2 threads)
#        SEEDS=0 MODELS=gnmt scripts/seeds_translation.sh 1 max_epochs=1   (a quick check)
#
# Runs `python -m t4bench model=M seed=S hw=cpu` for every model in $MODELS (gnmt transformer) and
# seed in $SEEDS (0 1 2 3 4), PARALLEL (default 4) at a time, $THREADS (default 2) torch threads
# each, all into one MLflow store ($MLFLOW_TRACKING_URI, default sqlite:///$OUT/.../mlflow.db) and
# tagged with one sweep id (t4bench.sweep_id = $T4BENCH_SWEEP_ID, default translation-seeds-<time>).
# Then prints, per model, the seed-sweep summary read back from MLflow (t4bench.sweep.summary):
# epochs-to-converge per seed, their mean/std, and time-to-train.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PARALLEL=${1:-4}
shift || true
if ! [[ $PARALLEL =~ ^[1-9][0-9]*$ ]]; then
  echo "seeds_translation.sh: error: PARALLEL must be a positive integer, got '$PARALLEL'" >&2
  exit 2
fi
SEEDS=${SEEDS:-0 1 2 3 4}
MODELS=${MODELS:-gnmt transformer}
THREADS=${THREADS:-2}
dest=${OUT:-/tmp}/t4bench_seeds_translation
mkdir -p "$dest/logs"
export MLFLOW_TRACKING_URI=${MLFLOW_TRACKING_URI:-sqlite:///$dest/mlflow.db}
export T4BENCH_SWEEP_ID=${T4BENCH_SWEEP_ID:-translation-seeds-$(date +%Y%m%d-%H%M%S)}

if [[ ! -f data/translation/mini/manifest.json ]]; then
  $PY -m t4bench.data.prepare translation || exit 1
fi
# create the store and the experiments before the parallel runs: several first runs creating the
# same sqlite schema at once fail
$PY - "$MODELS" <<'PY' || exit 1
import os, sys
from t4bench.tracking.run import RunTracker
tracker = RunTracker(os.environ["MLFLOW_TRACKING_URI"])
for model in sys.argv[1].split():
    tracker.ensure_experiment(f"t4bench-{model}")
PY

echo "sweep $T4BENCH_SWEEP_ID: models [$MODELS] seeds [$SEEDS], $PARALLEL at a time x $THREADS threads -> $MLFLOW_TRACKING_URI"
started=$(date +%s)
for model in $MODELS; do
  for seed in $SEEDS; do
    while (( $(jobs -rp | wc -l) >= PARALLEL )); do wait -n; done
    name=$model-seed$seed
    (
      OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS $PY -m t4bench "model=$model" "seed=$seed" hw=cpu \
        progress=plain "hydra.run.dir=$dest/runs/$T4BENCH_SWEEP_ID/$name" "$@" >"$dest/logs/$name.log" 2>&1
      rc=$?
      echo "$(date +%H:%M:%S) $name exit $rc: $(grep -E '^epoch' "$dest/logs/$name.log" | tail -1)"
    ) &
  done
done
wait
echo "all runs done in $(( $(date +%s) - started )) s wall"

for model in $MODELS; do
  echo
  echo "== $model"
  $PY -m t4bench.sweep.summary --sweep-id "$T4BENCH_SWEEP_ID" --experiment "t4bench-$model" \
    --tracking-uri "$MLFLOW_TRACKING_URI"
done
