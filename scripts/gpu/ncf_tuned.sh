#!/usr/bin/env bash
# On a GPU host's CPU cores (or any many-core host): the NCF mini seed-robust sweep
# (sweeps/ncf_tuned.yaml: 36 trials x seeds 0-3) and its held-out validation on seeds 1000-1019,
# NCF mini on hw=cpu, one thread per process. Resumable: the journal and MLflow store live in
# $NCF_WORK (default multirun/ncf_tuned, an ignored path to carry back and forth);
# re-running continues the study and reuses finished validation runs.
#   NCF_JOBS=12 bash scripts/gpu/ncf_tuned.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
sweep=${SWEEP:-ncf_tuned}
work=${NCF_WORK:-$PWD/multirun/$sweep}
jobs=${NCF_JOBS:-12}
seeds=${HELDOUT:-1000-1019}
mkdir -p "$work"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
uri="sqlite:///$work/mlflow.db"
common=("tracking.uri=$uri" "hydra.sweep.dir=$work/sweep")
PY=${PYTHON:-python3}
echo "== sweep ($(date +%T), $jobs workers)"
$PY -m t4bench --multirun "+sweeps=$sweep" "hydra.sweeper.n_jobs=$jobs" "${common[@]}" >"$work/sweep.log" 2>&1 \
  || { echo "sweep exited $?"; tail -20 "$work/sweep.log"; exit 1; }
tail -3 "$work/sweep.log"
validate() { $PY -m t4bench.sweep.holdout --sweep-dir "$work/sweep" --seeds "$1" "tracking.uri=$uri"; }
# validation runs one job at a time; seeds run in parts side by side, each part reusing what the
# others finished. The first seed alone first, so the validation parent runs exist before the parts
# look for them.
first=${seeds%%-*} last=${seeds##*-}
echo "== held-out validation, seeds $seeds ($(date +%T))"
validate "$first" >"$work/validate-first.log" 2>&1
pids=()
for ((s = first + 1; s <= last; s += 2)); do
  part="$s-$((s + 1 > last ? last : s + 1))"
  validate "$part" >"$work/validate-$part.log" 2>&1 &
  pids+=("$!")
  (( ${#pids[@]} >= jobs )) && { wait "${pids[0]}"; pids=("${pids[@]:1}"); }
done
for pid in "${pids[@]}"; do wait "$pid" || echo "a validation part exited $?"; done
echo "== validation report ($(date +%T))"
validate "$seeds" >"$work/validate.log" 2>&1 || echo "validation exited $?"
sed -n '/^# Held-out validation/,$p' "$work/validate.log"
