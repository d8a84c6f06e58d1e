#!/usr/bin/env bash
# On one GPU: held-out validation of a study's best trial against the reference settings
# (python -m t4bench.sweep.holdout), all seeds of an arm side by side under CUDA MPS.
#   HOLDOUTS="gnmt_ding_tuned:1000-1019" bash scripts/gpu/run.sh scripts/gpu/holdout.sh
# The study's journal and MLflow store come carried as .gpuwork/<study>.tar.xz (what
# scripts/gpu/convergence.sh left); the validation runs join that store (validation parent, one run
# per arm, one per seed), and the report lands in <sweep dir>/validation.{md,csv,json}. Everything
# goes back as $RESULTS/<study>.tar.xz, so a call cut short is resumed by the next one: seeds whose
# run finished are reused. JOBS runs at once (one arm's seeds); their seconds are shared-GPU seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
JOBS=${JOBS:-20}
LIMIT_S=${HOLDOUT_LIMIT_S:-420}
HOLDOUTS=${HOLDOUTS:-gnmt_ding_tuned:1000-1019}
results=${RESULTS:-${OUT:-/tmp}}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=scripts/gpu/study_common.sh
source scripts/gpu/study_common.sh
start_mps_and_monitor "$results/gpu_use_holdout.csv" 20
for entry in $HOLDOUTS; do
  study=${entry%%:*} seeds=${entry##*:}
  work=$PWD/.gpuwork/$study
  mkdir -p "$work"
  carried=$(ls .gpuwork/"$study".tar.xz 2>/dev/null | head -1)
  if [[ -n $carried && ! -f $work/sweep/optuna.journal ]]; then
    $PY -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" "$carried" "$work"
  fi
  [[ -f $work/sweep/optuna.journal ]] || { echo "$study: no journal carried"; continue; }
  echo "== $study: held-out seeds $seeds, $JOBS at once, time limit $LIMIT_S s ($(date +%T))"
  setsid $PY -m t4bench.sweep.holdout --sweep-dir "$work/sweep" --seeds "$seeds" \
    "hw=${HW:-h200}" hydra/launcher=joblib "hydra.launcher.n_jobs=$JOBS" "hw.runs_per_gpu=$JOBS" hw.mps=false \
    "hw.loader_workers=${LOADER_WORKERS:-0}" "tracking.uri=sqlite:///$work/mlflow.db" "hydra.sweep.dir=$work/sweep" \
    >>"$work/holdout.log" 2>&1 &
  leader=$!
  end_groups "$LIMIT_S" "$leader"  # the joblib workers too, before the store is packed
  wait "$leader"
  echo "$study: holdout exited $? ($(date +%T))"
  tail -n 40 "$work/holdout.log"
  pack_store "$work" "$results/$study.tar.xz"
  cp "$work"/sweep/validation.* "$results/" 2>/dev/null
  echo "$study: store $(du -sh "$results/$study.tar.xz" | cut -f1)"
done
kill "$monitor" 2>/dev/null
sort -t, -k3 -n "$results/gpu_use_holdout.csv" | tail -1 | sed 's/^/peak GPU memory sample: /'
