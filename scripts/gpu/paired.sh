#!/usr/bin/env bash
# Two trees' full runs on one GPU, one at a time, alternating which goes first per seed: the same
# model, scale and seed through the CLI under this tree's src/ ("new") and a base tree's ("base",
# a `git archive <rev> src conf` tar carried along), so a src/ change's time to train and throughput
# are compared on the same machine in the same call (host-bound ding runs differ by tens of percent
# between machines). Run by scripts/gpu/run.sh, e.g. with the base carried in .carry/:
#   git archive main src conf > .carry/base-main.tar
#   PAIRED_TAR=.carry/base-main.tar PAIRED_MODELS="gnmt transformer" PAIRED_SEEDS="0 1" \
#     bash scripts/gpu/run.sh scripts/gpu/paired.sh
# Each run's log and MLflow store land in $OUT/paired; one line per run is printed: tree, model,
# seed, exit, wall, outcome, epochs, time to train, throughput.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar_file=${PAIRED_TAR:?"a tar of the base tree's src/ (git archive REV src conf)"}
[[ -f $tar_file ]] || { echo "PAIRED_TAR $tar_file: no such file"; exit 2; }
base=/tmp/paired-base
rm -rf "$base" && mkdir -p "$base" && tar xf "$tar_file" -C "$base" || { echo "cannot unpack $tar_file"; exit 2; }
[[ -d $base/src/t4bench && -d $base/conf ]] || { echo "$tar_file holds no src/t4bench and conf/"; exit 2; }
work=${OUT:-/tmp/t4bench_paired}/paired
# both trees read this checkout's data (the base tree's own default would be beside its src/)
export T4BENCH_DATA_DIR=${T4BENCH_DATA_DIR:-$PWD/data}
mkdir -p "$work"
HW=${HW:-h200}
extra=${PAIRED_ARGS-scale=ding}  # empty: the model's default scale
site=${PYTHONPATH:-}
site=${site%%:*}  # run.sh puts its wheel folder first
run() {  # tree model seed
  local src=$PWD/src && [[ $1 == base ]] && src=$base/src
  local name=$1_$2_seed$3 started=$SECONDS
  # shellcheck disable=SC2086  # PAIRED_ARGS is a word list on purpose
  PYTHONPATH=$site:$src MLFLOW_TRACKING_URI="sqlite:///$work/$1.db" timeout "${PAIRED_LIMIT:-240}" \
    python3 -m t4bench "model=$2" $extra "hw=$HW" "seed=$3" progress=plain "hydra.run.dir=$work/$name" \
    >"$work/$name.log" 2>&1
  local code=$?
  printf '%-4s %-11s seed %-3s exit %-3s wall %4d s  ' "$1" "$2" "$3" "$code" $((SECONDS - started))
  grep -E "outcome|epochs_run|time_to_train_s|avg_throughput" "$work/$name.log" | sed 's/│/ /g' | tr -s ' ' | tr '\n' ' '
  echo
}
for model in ${PAIRED_MODELS:-gnmt}; do
  index=0
  for seed in ${PAIRED_SEEDS:-0}; do
    order=(base new) && ((index % 2)) && order=(new base)
    for tree in "${order[@]}"; do run "$tree" "$model" "$seed"; done
    index=$((index + 1))
  done
done
