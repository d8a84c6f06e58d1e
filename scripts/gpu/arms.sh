#!/usr/bin/env bash
# On one GPU: several arms (override sets) over the same seeds, all side by side under
# CUDA MPS, one packed seed sweep per arm into one MLflow store; then every arm against the first
# with scripts/compare_arms.py (means, stds, bootstrap CIs, Brown-Forsythe, Mann-Whitney).
#   ARMS="tuned:hparams=tuned ema25:hparams=tuned,ema.half_life_epochs=0.25" SEEDS=2000-2011 \
#   RUN_ARGS="model=transformer scale=ding eval_every=0.5 max_epochs=25" \
#     bash scripts/gpu/run.sh scripts/gpu/arms.sh          # carry .whl .carry (.gpuwork)
# An arm is NAME:OVERRIDES (comma-separated). Work dir .gpuwork/$ARMS_NAME (carried as
# .gpuwork/$ARMS_NAME.tar.xz, returned as $RESULTS/$ARMS_NAME.tar.xz): an arm whose seeds all
# finished in an earlier call is not run again. The runs share the GPU: their epochs count, their
# seconds do not (each run is tagged t4bench.gpu_share).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
name=${ARMS_NAME:-arms}
seeds=${SEEDS:-2000-2011}
lo=${seeds%-*} hi=${seeds#*-}
read -r -a run_args <<<"${RUN_ARGS:-model=transformer scale=ding eval_every=0.5 max_epochs=25}"
model=${run_args[0]#model=}
max_epochs=${MAX_EPOCHS:-25}
results=${RESULTS:-${OUT:-/tmp}}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=scripts/gpu/study_common.sh
source scripts/gpu/study_common.sh
open_work "$name"
n=$((hi - lo + 1))
# every arm's runs share the GPU at once, but each sweep's own check counts only its n: check
# them all together first (two arms of 12 passed alone and filled an H100 together, 2026-12-05)
todo=0
for arm in ${ARMS:?ARMS=NAME:OVERRIDES ...}; do [[ -f $work/${arm%%:*}.done.log ]] || todo=$((todo + 1)); done
for arm in $ARMS; do
  [[ -f $work/${arm%%:*}.done.log ]] && continue
  # shellcheck disable=SC2046  # the arm's overrides: several words
  $PY scripts/pack_check.py $((todo * n)) "${run_args[@]}" $(tr , ' ' <<<"${arm#*:}") "hw=${HW:-h200}" || exit 2
done
# and each run's allocator capped at its share of all of them (a sweep alone would take 0.9 / n)
fraction=$(awk -v runs=$((todo * n)) 'BEGIN { printf "%.4f", 0.9 / runs }')
start_mps_and_monitor "$work/gpu_use.csv" 10
leaders=()
for arm in $ARMS; do
  arm_name=${arm%%:*} overrides=${arm#*:}
  done_file=$work/$arm_name.done.log  # a .log: pack_store keeps it for the next call
  [[ -f $done_file ]] && { echo "$arm_name: finished in an earlier call"; continue; }
  echo "== $arm_name: ${overrides//,/ } seeds $seeds ($n at once, $(date +%T))"
  # its own process group (setsid, so end_groups stops the sweep's workers too); the done file
  # only when the sweep exits 0
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid bash -c '"$@" >"$0.log" 2>&1 && echo finished >"$0.done.log"' "$work/$arm_name" \
    $PY -m t4bench --multirun "${run_args[@]}" $(tr , ' ' <<<"$overrides") "hw=${HW:-h200}" progress=off \
    "seed=range($lo,$((hi + 1)))" hydra/launcher=packed "hw.runs_per_gpu=$n" "hw.mps=${ARMS_MPS:-true}" \
    "hw.gpu_memory_fraction=$fraction" "hw.loader_workers=${LOADER_WORKERS:-0}" "tracking.uri=sqlite:///$work/mlflow.db" \
    "tracking.sweep_id=${name}_$arm_name" "hydra.sweep.dir=$work/sweep/$arm_name" &
  leaders+=("$!")
  sleep "${ARMS_STAGGER_S:-20}"  # one sweep creates the store's tables before the next opens it
done
((${#leaders[@]})) && end_groups "${ARMS_LIMIT_S:-420}" "${leaders[@]}" && wait "${leaders[@]}"
# never a bare `wait`: it would wait for the sampler too (nvidia-smi -l runs until killed), past
# any time limit of the call
kill "$monitor" 2>/dev/null
first=""
for arm in $ARMS; do
  arm_name=${arm%%:*}
  echo "$arm_name: $(ls "$work/sweep/$arm_name" 2>/dev/null | wc -l) job folders, done: $([[ -f $work/$arm_name.done.log ]] && echo yes || echo no)"
  tail -3 "$work/$arm_name.log"
  if [[ -z $first ]]; then first=$arm_name; continue; fi
  [[ -f $work/$arm_name.done.log && -f $work/$first.done.log ]] || continue
  $PY scripts/compare_arms.py "sqlite:///$work/mlflow.db" "${name}_$arm_name" "${name}_$first" "$lo" "$hi" \
    "$arm_name-vs-$first" "$results/$arm_name-vs-$first" "$model" "$max_epochs" | sed -n 1,25p
done
pack_store "$work" "$results/$name.tar.xz"
du -h "$results/$name.tar.xz"
