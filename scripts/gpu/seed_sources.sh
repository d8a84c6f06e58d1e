#!/usr/bin/env bash
# On one GPU: the crossed seed sweep (sweeps/seed_sources.yaml: weights seeds x data seeds x
# repeats) of one model, every preset (arm) side by side under CUDA MPS through t4bench's packed
# launcher, into one MLflow store; then `python -m t4bench.report.seed_sources` splits each arm's
# epochs-to-converge variance (weights, data, pairing, repeat) with bootstrap CIs.
#   MODEL=gnmt SS_ARMS="reference tuned" SS_SEEDS=7200-7203 SS_DATA_SEEDS=8200-8202 SS_AT_ONCE=7 \
#     bash scripts/gpu/run.sh scripts/gpu/seed_sources.sh        # carry .whl .carry (.gpuwork)
# Work dir .gpuwork/seed_sources_$MODEL (carried as .gpuwork/seed_sources_$MODEL.tar.xz, returned as
# $RESULTS/seed_sources_$MODEL.tar.xz): an arm whose sweep finished in an earlier call is not run
# again. An arm cut by SS_LIMIT_S is not resumed (a grid sweep run again would add a second run to
# the pairs it had finished): its complete crossed part is analysed, or it is run again under
# SS_ROUND (a new sweep id). Runs share the GPU: their epochs count, their seconds do not.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
model=${MODEL:-gnmt}
scale=${SCALE:-ding}
arms=${SS_ARMS:-reference tuned}
seeds=${SS_SEEDS:-7200-7203} data_seeds=${SS_DATA_SEEDS:-8200-8202} repeats=${SS_REPEATS:-2}
per_arm=${SS_AT_ONCE:-7}  # two presets of GNMT ding x 7 fit an 80 GB H100 by the packing check; x 12 do not
round=${SS_ROUND:-}
name=seed_sources_$model
results=${RESULTS:-${OUT:-/tmp}}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=scripts/gpu/study_common.sh
source scripts/gpu/study_common.sh
open_work "$name"
sweep_id() { echo "${model}_${scale}_$1_sources${round:+_$round}"; }
run_args=("model=$model" "scale=$scale" "eval_every=${EVAL_EVERY:-0.5}" "hw=${HW:-h200}" progress=off)
todo=()
for arm in $arms; do [[ -f $work/$(sweep_id "$arm").done.log ]] || todo+=("$arm"); done
# all arms' runs share the GPU at once: check them together (each sweep checks only its own)
if ((${#todo[@]})); then
  $PY scripts/pack_check.py $((${#todo[@]} * per_arm)) "${run_args[@]}" || exit 2
fi
fraction=$(awk -v runs=$((${#todo[@]} * per_arm)) 'BEGIN { printf "%.4f", 0.9 / (runs > 0 ? runs : 1) }')
start_mps_and_monitor "$work/gpu_use.csv" 10
leaders=()
for arm in "${todo[@]}"; do
  id=$(sweep_id "$arm")
  echo "== $id: seeds $seeds x data seeds $data_seeds x $repeats repeats, $per_arm at once ($(date +%T))"
  # its own process group (setsid: end_groups stops the sweep's workers too); the done file only
  # when the sweep exits 0
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid bash -c '"$@" >"$0.log" 2>&1 && echo finished >"$0.done.log"' "$work/$id" \
    $PY -m t4bench --multirun +sweeps=seed_sources "${run_args[@]}" "hparams=$arm" \
    "seed=range(${seeds%-*},$((${seeds#*-} + 1)))" "data_seed=range(${data_seeds%-*},$((${data_seeds#*-} + 1)))" \
    "+tracking.tags.repeat=range(0,$repeats)" hydra/launcher=packed "hw.runs_per_gpu=$per_arm" \
    "hw.mps=${SS_MPS:-true}" "hw.gpu_memory_fraction=$fraction" "hw.loader_workers=0" \
    "tracking.uri=sqlite:///$work/mlflow.db" "tracking.sweep_id=$id" "hydra.sweep.dir=$work/sweep/$id" &
  leaders+=("$!")
  sleep "${SS_STAGGER_S:-20}"  # one sweep creates the store's tables before the next opens it
done
((${#leaders[@]})) && end_groups "${SS_LIMIT_S:-420}" "${leaders[@]}" && wait "${leaders[@]}"
kill "$monitor" 2>/dev/null  # never a bare `wait`: the sampler runs until killed
report=(--tracking-uri "sqlite:///$work/mlflow.db" --experiment "t4bench-$model" --out "$results/${model}_$scale")
for arm in $arms; do
  id=$(sweep_id "$arm")
  echo "$id: $(ls "$work/sweep/$id" 2>/dev/null | wc -l) job folders, done: $([[ -f $work/$id.done.log ]] && echo yes || echo no)"
  tail -3 "$work/$id.log" 2>/dev/null
  report+=(--sweep-id "$arm=$id")
done
$PY -m t4bench.report.seed_sources "${report[@]}" || echo "!! report failed: run it where t4bench is installed, on the returned store (an arm cut short: --seeds/--data-seeds)"
pack_store "$work" "$results/$name.tar.xz"
du -h "$results/$name.tar.xz"
