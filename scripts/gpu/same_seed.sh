#!/usr/bin/env bash
# Run-to-run noise at one seed, and what deterministic=true costs (docs/sweeps.md
# "Run-to-run noise"). GNMT and Transformer at scale=ding on the H200: seed 0 trained K times with
# deterministic=false and K times with deterministic=true. Prepared, not yet run on a GPU.
#
# Arm by arm (false, then true), all of an arm's runs at once under CUDA MPS: each model's K repeats
# are one --multirun (hydra/launcher=packed hw.runs_per_gpu=K: all K at once, tagged
# t4bench.gpu_share=K) in its own sweep dir and process group (setsid), both models' sweeps together
# (2K runs on the GPU: 8 x 4.7 + 8 x 2.2 GiB at K=8). The repeats differ only in the user tag
# `repeat` (+tracking.tags.repeat=range(0,K)), which no training reads: the sanctioned way to give
# Hydra K jobs of one seed (the CLI refuses + of a key no code reads; tracking.tags is open).
# Then ALONE runs per model and arm one at a time (t4bench.gpu_share=1): shared runs' seconds are no
# speed figure, these are the cost of the switch. One MLflow store (STORE), packed back into
# $RESULTS; scripts/same_seed.py writes $OUT/same_seed.csv and $OUT/same_seed_summary.csv.
#
#   LIMIT_S=420 bash scripts/gpu/run.sh scripts/gpu/same_seed.sh     # one call on a GPU host (H200)
#   HW=cpu SCALE=mini K=2 ALONE=0 EXTRA="max_epochs=1" OUT=/tmp/ss WORK=/tmp/ss/work \
#     scripts/gpu/same_seed.sh                                            # CPU dry run
#
# LIMIT_S bounds each arm's packed part (what finished stays in the store; a run cut off is
# `killed` and left out of the table's epochs); 0: no bound.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODELS=${MODELS:-"gnmt transformer"}
HW=${HW:-h200}
SCALE=${SCALE:-ding}
SEED=${SEED:-0}
K=${K:-8}
ARMS=${ARMS:-"false true"}
ALONE=${ALONE:-1}
EVAL_EVERY=${EVAL_EVERY:-0.5}
MPS=${MPS:-$([[ $HW == cpu ]] && echo false || echo true)}
LIMIT_S=${LIMIT_S:-0}
OUT=${OUT:-docs/convergence}
WORK=${WORK:-multirun/same_seed}
mkdir -p "$WORK" "$OUT"
WORK=$(cd "$WORK" && pwd)  # absolute: the store URL and the runs' artifacts must not land in the repo
STORE=${STORE:-sqlite:///$WORK/mlflow.db}
export T4BENCH_DATA_DIR=${T4BENCH_DATA_DIR:-$PWD/data}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # 2K processes share the host's cores
# shellcheck source=scripts/gpu/study_common.sh
source scripts/gpu/study_common.sh
if [[ -z ${PART:-} && $HW != cpu ]]; then
  # the daemon for every sweep (each one's hw.mps=true then finds it running and leaves it)
  MPS=$([[ $MPS == true ]] && echo 1 || echo 0) start_mps_and_monitor "$WORK/gpu_use.csv" 5
fi
# the store made once, before the sweeps: two processes creating one fresh SQLite store at once
# race in MLflow's schema migration ("table _alembic_tmp_tags already exists")
[[ -n ${PART:-} ]] || ${PYTHON:-python} -c \
  "import sys; from mlflow.tracking import MlflowClient; MlflowClient(sys.argv[1]).search_experiments()" "$STORE"

sweep() {  # sweep MODEL ARM NAME OVERRIDES...: one --multirun into its own folder and sweep id
  local model=$1 arm=$2 name=$3
  shift 3
  # shellcheck disable=SC2086  # EXTRA: several overrides
  MLFLOW_TRACKING_URI=$STORE ${PYTHON:-python} -m t4bench --multirun "model=$model" "scale=$SCALE" "hw=$HW" \
    "seed=$SEED" "deterministic=$arm" "eval_every=$EVAL_EVERY" progress=plain \
    "tracking.sweep_id=same_seed_${model}_${SCALE}_$name" "hydra.sweep.dir=$WORK/${model}_${SCALE}_$name" \
    "$@" ${EXTRA:-}
}

stamp=${STAMP:-$(date +%H%M%S)}
if [[ -n ${PART:-} ]]; then  # one packed sweep, started below in its own process group
  IFS=: read -r model arm <<<"$PART"
  sweep "$model" "$arm" "det-${arm}_$stamp" "+tracking.tags.repeat=range(0,$K)" \
    hydra/launcher=packed "hw.runs_per_gpu=$K" "hw.mps=$MPS"
  exit
fi
for arm in $ARMS; do
  leaders=() logs=()
  for model in $MODELS; do
    logs+=("$WORK/${model}_det-${arm}_$stamp.log")
    # its own process group (setsid), so the time limit ends the sweep's workers too (end_groups)
    PART=$model:$arm STAMP=$stamp WORK=$WORK STORE=$STORE MPS=$MPS setsid bash "$0" >"${logs[-1]}" 2>&1 &
    leaders+=("$!")
  done
  end_groups "$((LIMIT_S > 0 ? LIMIT_S : 86400))" "${leaders[@]}" || true  # (its last kill finds nothing)
  for log in "${logs[@]}"; do echo "== $log"; { grep -E "error|Error|exited" "$log" || true; } | tail -n 5; done
done
# the cost of the switch: runs alone on the GPU (their seconds count), one at a time
if ((ALONE > 0)); then
  for arm in $ARMS; do
    for model in $MODELS; do
      # alone0,alone1,...: a list, not range(0,1) (one value is no search, the CLI says)
      sweep "$model" "$arm" "alone_det-${arm}_$stamp" "+tracking.tags.repeat=$(seq -s, -f 'alone%g' 0 $((ALONE - 1)))" \
        >"$WORK/${model}_alone_det-${arm}_$stamp.log" 2>&1 || echo "alone $model det-$arm exited non-zero"
    done
  done
fi
[[ -n ${monitor:-} ]] && kill "$monitor" 2>/dev/null || true
[[ -f $WORK/gpu_use.csv ]] && sort -t, -k3 -n "$WORK/gpu_use.csv" | tail -1 | sed 's/^/peak GPU memory sample: /'
# shellcheck disable=SC2086  # MODELS: several names
${PYTHON:-python} scripts/same_seed.py --store "$STORE" --scale "$SCALE" --models $MODELS \
  --csv "$OUT/same_seed.csv" --summary "$OUT/same_seed_summary.csv"
# a call on a GPU host: the store (runs, their run_tags.json) and logs go back as one file
[[ -n ${RESULTS:-} ]] && pack_store "$WORK" "$RESULTS/same_seed.tar.xz"
exit 0
