#!/usr/bin/env bash
# Where NCF mini's seed-to-seed spread comes from (docs/convergence.md): three seed sweeps
# at reference settings into one MLflow store, 20 runs each, evaluated every 1/8 epoch:
#   both  seed=S                 (the usual: initial weights and data both follow S)
#   init  seed=S  data_seed=0    (only the initial weights vary)
#   data  seed=0  data_seed=S    (only the data order and negatives vary)
# then scripts/seed_sources.py compares their spreads.
#   WORK=/tmp/ncf_sources SEEDS="range(3000,3020)" JOBS=2 bash scripts/ncf_seed_sources.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-multirun/ncf_seed_sources}
SEEDS=${SEEDS:-"range(3000,3020)"}
JOBS=${JOBS:-2}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export OMP_NUM_THREADS=1
common=(model=ncf eval_every=0.125 progress=off hw.threads=1 hydra/launcher=joblib "hydra.launcher.n_jobs=$JOBS"
  "tracking.uri=sqlite:///$WORK/mlflow.db")
for arm in both init data; do
  case $arm in
    both) vary=("seed=$SEEDS") ;;
    init) vary=("seed=$SEEDS" data_seed=0) ;;
    data) vary=(seed=0 "data_seed=$SEEDS") ;;
  esac
  echo "== $arm: ${vary[*]} ($(date +%T))"
  python -m t4bench --multirun "${common[@]}" "${vary[@]}" "tracking.sweep_id=ncf_sources_$arm" \
    "hydra.sweep.dir=$WORK/$arm" >"$WORK/$arm.log" 2>&1
done
python scripts/seed_sources.py "sqlite:///$WORK/mlflow.db" ncf ncf_sources_both ncf_sources_init ncf_sources_data
