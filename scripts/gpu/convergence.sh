#!/usr/bin/env bash
# On one GPU: seed-robust Optuna sweeps (sweeps/<study>.yaml) with many runs on the GPU at
# once under CUDA MPS, cut at a time limit and resumed by the next call from their journals.
#   STUDIES="gnmt_ding_tuned:4" LIMIT_S=540 bash scripts/gpu/run.sh scripts/gpu/convergence.sh
# STUDIES: study:workers pairs, run side by side; each worker runs its trial's seeds side by side
# (hydra/launcher=joblib, batch_seeds), so workers x seeds_per_trial runs share the GPU and a trial
# lasts about one run. Workers claim no new trial after LIMIT_S - DRAIN_S seconds
# (hydra.sweeper.timeout), so the call ends with whole trials; what is still running at LIMIT_S
# is stopped (failed and re-queued by the sweeper). Each study's Optuna journal, MLflow store and
# artifacts live in .gpuwork/<study>/; a call that finds .gpuwork/<study>.tar.xz (or .tgz; carried
# from the last call's results) continues from it, and leaves $RESULTS/<study>.tar.xz for the next
# one (unpack nothing here: carry it back as it came). Trials cut by the time limit are RUNNING in the
# journal; the sweeper fails and re-queues them once their heartbeat is stale (stale_after).
# MPS (one context for all processes, measured x7.6 GNMT runs/hour at 16 vs x4.3 time-sliced):
# hw.runs_per_gpu (workers x seeds at once) tags the runs t4bench.gpu_share and checks that they fit
# the GPU's memory before anything starts; MPS is started here (hw.mps=false: not by the sweeper).
# MPS=0 turns it off. Runs load data in their own process (LOADER_WORKERS=0): 16 runs x the
# profile's 8 DataLoader workers, re-forked every epoch, would crowd the host's 16 cores.
# MPS=0 turns it off. The runs' seconds are shared-GPU seconds: only their epochs are comparable.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
HW=${HW:-h200}
LIMIT_S=${LIMIT_S:-540}
# END_AT (epoch seconds): the time limit is what is left until then (after another script of the call)
[[ -n ${END_AT:-} ]] && LIMIT_S=$((END_AT - $(date +%s)))
DRAIN_S=${DRAIN_S:-200}
STUDIES=${STUDIES:-gnmt_ding_tuned:4}
results=${RESULTS:-${OUT:-/tmp}}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=scripts/gpu/study_common.sh
source scripts/gpu/study_common.sh
start_mps_and_monitor "$results/gpu_use.csv" 30
pids=()
for entry in $STUDIES; do
  study=${entry%%:*} jobs=${entry##*:}
  work=$PWD/.gpuwork/$study
  mkdir -p "$work"
  carried=$(ls .gpuwork/"$study".tar.xz .gpuwork/"$study".tgz 2>/dev/null | head -1)
  if [[ -n $carried && ! -f $work/sweep/optuna.journal ]]; then
    $PY -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" "$carried" "$work" \
      && echo "$study: resumed from the carried journal and store ($carried)"
  fi
  echo "== $study: $jobs workers, time limit $LIMIT_S s ($(date +%T))"
  setsid $PY -m t4bench --multirun "+sweeps=$study" "hw=$HW" "hydra.sweeper.n_jobs=$jobs" \
    hydra/launcher=joblib hydra.launcher.n_jobs="${SEEDS_AT_ONCE:-4}" hydra.sweeper.batch_seeds=true \
    "hw.runs_per_gpu=$((jobs * ${SEEDS_AT_ONCE:-4}))" "hw.mps=false" \
    "hydra.sweeper.timeout=$((LIMIT_S - DRAIN_S))" "hw.loader_workers=${LOADER_WORKERS:-0}" "hydra.sweep.dir=$work/sweep" "tracking.uri=sqlite:///$work/mlflow.db" >>"$work/sweep.log" 2>&1 &
  pids+=("$!:$study")
done
end_groups "$LIMIT_S" "${pids[@]%%:*}"  # every sweep's whole process group, before packing
kill "$monitor" 2>/dev/null
for e in "${pids[@]}"; do
  study=${e#*:}
  work=.gpuwork/$study
  $PY - "$work/sweep/optuna.journal" "$study" <<'PY'
import sys
import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name=sys.argv[2], storage=JournalStorage(JournalFileBackend(sys.argv[1])))
states = [t.state.name for t in study.trials]
print(f"{sys.argv[2]}: {len(states)} trials: " + ", ".join(f"{s.lower()} {states.count(s)}" for s in sorted(set(states))))
done = [t for t in study.trials if t.state.name == "COMPLETE"]
for t in sorted(done, key=lambda t: t.value)[:5]:
    print(f"  trial {t.number}: {t.value:.3f} {t.params}")
PY
  pack_store "$work" "$results/$study.tar.xz"
  echo "$study: store $(du -sh "$results/$study.tar.xz" | cut -f1) in $study.tar.xz"
  grep -c "trial .*: mean_std" "$work/sweep.log" | sed "s/^/$study: trials finished by this call's log: /"
done
sort -t, -k3 -n "$results/gpu_use.csv" | tail -1 | sed 's/^/peak GPU memory sample: /'
