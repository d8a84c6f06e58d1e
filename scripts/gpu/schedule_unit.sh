#!/usr/bin/env bash
# The schedule-unit experiment (docs/sweeps.md "Emulating N GPUs on one"): one GPU
# trains with the global batch of N = 1..4 GPUs (emulate.world_size=N), schedule.unit=steps vs
# samples, seeds 0-4, GNMT and Transformer at scale=ding, evaluating every half epoch. Writes
# docs/convergence/schedule_unit.csv (model, N, unit, seed, epochs_to_converge, outcome) and
# docs/convergence/schedule_unit.png. Resumable: each model's sweep has its own folder and the MLflow
# store is one file (STORE); a re-run repeats the runs, so cut SEEDS/NS to what is missing.
#
#   scripts/gpu/schedule_unit.sh                                   # on the H200, one run at a time
#   RUNS_PER_GPU=8 MPS=true PEAK_GIB_GNMT=9 PEAK_GIB_TRANSFORMER=6 scripts/gpu/schedule_unit.sh
#       # packed: the peaks must be those of an N=4 run (4x the batch), measured alone
#   PARALLEL=true RUNS_PER_GPU=12 MPS=true LIMIT_S=480 PEAK_GIB_GNMT=8 PEAK_GIB_TRANSFORMER=4.5 \
#     bash scripts/gpu/run.sh scripts/gpu/schedule_unit.sh
#       # one call on a GPU host: both models' sweeps at once under one MPS daemon started here, stopped
#       # after LIMIT_S (what finished stays in the store); store + table packed into $RESULTS
#   HW=cpu SCALE=mini SEEDS=0 NS=1,2 EXTRA="max_epochs=1" OUT=/tmp/su scripts/gpu/schedule_unit.sh  # CPU dry run
#
# Sweep order: seed, unit, then N fastest, so the runs at once mix N = 1..4 (an N=4 run holds ~4x the
# activations: a wave of N=4 runs alone would need the most memory at once).
set -euo pipefail
cd "$(dirname "$0")/../.."
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
# the store an earlier call packed (scripts/gpu/run.sh brings it back as schedule_unit.tar.xz):
# carried as .gpuwork/schedule_unit.tar.xz, its runs join this call's in one table
if [[ -f .gpuwork/schedule_unit.tar.xz && ! -f $WORK/mlflow.db ]]; then
  tar xJf .gpuwork/schedule_unit.tar.xz -C "$WORK"
fi
export T4BENCH_DATA_DIR=${T4BENCH_DATA_DIR:-$PWD/data}
PARALLEL=${PARALLEL:-false}
LIMIT_S=${LIMIT_S:-0}
if [[ $PARALLEL == true ]]; then
  # shellcheck source=scripts/gpu/study_common.sh
  source scripts/gpu/study_common.sh
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # 2 x RUNS_PER_GPU processes share the host's cores
  # the daemon for both sweeps (each one's hw.mps=true then finds it running and leaves it)
  MPS=$([[ $MPS == true ]] && echo 1 || echo 0) start_mps_and_monitor "$WORK/gpu_use.csv" 5
  # the store made once, before the sweeps: two processes creating one fresh SQLite store at once
  # race in MLflow's schema migration ("table _alembic_tmp_tags already exists")
  ${PYTHON:-python} -c "import sys; from mlflow.tracking import MlflowClient; MlflowClient(sys.argv[1]).search_experiments()" "$STORE"
  # PARTS: one sweep each, all at once, "model:seeds:Ns:units:runs_at_once" (default: each model's
  # full grid); a later call completes what a time limit cut off, e.g. PARTS="gnmt:4:1,2,3,4:steps,samples:8"
  [[ -n ${PARTS:-} ]] || PARTS=$(for m in $MODELS; do printf '%s ' "$m:$SEEDS:$NS:$UNITS:$RUNS_PER_GPU"; done)
  leaders=() logs=()
  stamp=$(date +%H%M%S) i=0
  for part in $PARTS; do
    IFS=: read -r model seeds ns units jobs <<<"$part"
    i=$((i + 1)) logs+=("$WORK/${model}_${stamp}_$i.log")
    # its own process group, so the time limit ends the sweep's joblib workers too; its own sweep id
    # (one id names one sweep; scripts/schedule_unit.py reads every schedule_unit_<model>_<scale>*)
    PARALLEL=false TABLE=false MODELS=$model SEEDS=$seeds NS=$ns UNITS=$units RUNS_PER_GPU=$jobs \
      SWEEP_DIR=$WORK/${model}_${SCALE}_${stamp}_$i SWEEP_ID=schedule_unit_${model}_${SCALE}_${stamp}_$i WORK=$WORK STORE=$STORE setsid bash "$0" >"${logs[-1]}" 2>&1 &
    leaders+=("$!")
  done
  end_groups "$((LIMIT_S > 0 ? LIMIT_S : 86400))" "${leaders[@]}" || true  # (its last kill finds nothing)
  kill "$monitor" 2>/dev/null || true
  sort -t, -k3 -n "$WORK/gpu_use.csv" | tail -1 | sed 's/^/peak GPU memory sample: /'
  for log in "${logs[@]}"; do echo "== $log"; { grep -E "error|Error|exited" "$log" || true; } | tail -n 5; done
fi
[[ $PARALLEL == true ]] || for model in $MODELS; do
  pack=()
  if [ "$RUNS_PER_GPU" -gt 1 ]; then
    peak_var="PEAK_GIB_${model^^}"
    pack=(hydra/launcher=packed "hw.runs_per_gpu=$RUNS_PER_GPU" "hw.mps=$MPS")
    [ -n "${!peak_var:-}" ] && pack+=("hw.peak_memory_gib.${model}_${SCALE}=${!peak_var}")
  fi
  # shellcheck disable=SC2086  # EXTRA: several overrides
  MLFLOW_TRACKING_URI=$STORE ${PYTHON:-python} -m t4bench --multirun "model=$model" "scale=$SCALE" "hw=$HW" \
    "eval_every=$EVAL_EVERY" "seed=$SEEDS" "model.schedule.unit=$UNITS" "emulate.world_size=$NS" \
    progress=plain "tracking.sweep_id=${SWEEP_ID:-schedule_unit_${model}_${SCALE}}" \
    "hydra.sweep.dir=${SWEEP_DIR:-$WORK/${model}_${SCALE}}" ${pack[@]+"${pack[@]}"} ${EXTRA:-}
done
[[ ${TABLE:-true} == true ]] || exit 0
${PYTHON:-python} scripts/schedule_unit.py --store "$STORE" --scale "$SCALE" --models $MODELS \
  --csv "$OUT/schedule_unit.csv" --plot "$OUT/schedule_unit.png"
# a call on a GPU host: the store (runs, their run_tags.json) and logs go back as one file
[[ $PARALLEL == true && -n ${RESULTS:-} ]] && pack_store "$WORK" "$RESULTS/schedule_unit.tar.xz"
exit 0
