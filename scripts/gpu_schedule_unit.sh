#!/usr/bin/env bash
# The schedule-unit experiment (issue #24 item 6, docs/sweeps.md "Emulating N GPUs on one"): one GPU
# trains with the global batch of N = 1..4 GPUs (emulate.world_size=N), schedule.unit=steps vs
# samples, seeds 0-4, GNMT and Transformer at scale=ding, evaluating every half epoch. Writes
# docs/convergence/schedule_unit.csv (model, N, unit, seed, epochs_to_converge, outcome) and
# docs/convergence/schedule_unit.png. Resumable: each model's sweep has its own folder and the MLflow
# store is one file (STORE); a re-run repeats the runs, so cut SEEDS/NS to what is missing.
#
#   scripts/gpu_schedule_unit.sh                                   # on the H200, one run at a time
#   RUNS_PER_GPU=8 MPS=true PEAK_GIB_GNMT=9 PEAK_GIB_TRANSFORMER=6 scripts/gpu_schedule_unit.sh
#       # packed: the peaks must be those of an N=4 run (4x the batch), measured alone
#   HW=cpu SCALE=mini SEEDS=0 NS=1,2 EXTRA="max_epochs=1" OUT=/tmp/su scripts/gpu_schedule_unit.sh  # CPU dry run
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-"gnmt transformer"}
HW=${HW:-h200}
SCALE=${SCALE:-ding}
SEEDS=${SEEDS:-"range(0,5)"}
NS=${NS:-1,2,3,4}
UNITS=${UNITS:-steps,samples}
EVAL_EVERY=${EVAL_EVERY:-0.5}
RUNS_PER_GPU=${RUNS_PER_GPU:-1}
MPS=${MPS:-false}
OUT=${OUT:-docs/convergence}
WORK=${WORK:-multirun/schedule_unit}
mkdir -p "$WORK" "$OUT"
WORK=$(cd "$WORK" && pwd)  # absolute: the store URL and the runs' artifacts must not land in the repo
STORE=${STORE:-sqlite:///$WORK/mlflow.db}
export T4BENCH_DATA_DIR=${T4BENCH_DATA_DIR:-$PWD/data}
for model in $MODELS; do
  pack=()
  if [ "$RUNS_PER_GPU" -gt 1 ]; then
    peak_var="PEAK_GIB_${model^^}"
    pack=(hydra/launcher=packed "hw.runs_per_gpu=$RUNS_PER_GPU" "hw.mps=$MPS")
    [ -n "${!peak_var:-}" ] && pack+=("hw.peak_memory_gib.${model}_${SCALE}=${!peak_var}")
  fi
  # shellcheck disable=SC2086  # EXTRA: several overrides
  MLFLOW_TRACKING_URI=$STORE python -m t4bench --multirun "model=$model" "scale=$SCALE" "hw=$HW" \
    "eval_every=$EVAL_EVERY" "emulate.world_size=$NS" "model.schedule.unit=$UNITS" "seed=$SEEDS" \
    progress=plain "tracking.sweep_id=schedule_unit_${model}_${SCALE}" \
    "hydra.sweep.dir=$WORK/${model}_${SCALE}" ${pack[@]+"${pack[@]}"} ${EXTRA:-}
done
python scripts/schedule_unit.py --store "$STORE" --scale "$SCALE" --models $MODELS \
  --csv "$OUT/schedule_unit.csv" --plot "$OUT/schedule_unit.png"
