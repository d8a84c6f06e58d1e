# Shared by the study scripts of scripts/gpu/ (sourced, not run): CUDA MPS for the call, a GPU-use
# monitor, the study's work folder opened from the store an earlier call packed, and packed again.

# start_mps_and_monitor CSV INTERVAL_S: MPS on unless MPS=0 (stopped when the script exits), and
# nvidia-smi sampling GPU use into CSV; sets $monitor to the sampler's pid
start_mps_and_monitor() {
  if [[ ${MPS:-1} == 1 ]] && command -v nvidia-cuda-mps-control >/dev/null; then
    nvidia-cuda-mps-control -d && echo "MPS daemon started"
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
  fi
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l "$2" >"$1" 2>/dev/null &
  monitor=$!
}

# open_work NAME: the study's work folder .gpuwork/NAME (with sweep/), filled from the store an
# earlier call packed (.gpuwork/NAME.tar.xz, carried back) unless it holds a store already; sets
# $work
open_work() {
  work=$PWD/.gpuwork/$1
  mkdir -p "$work/sweep"
  if [[ -f .gpuwork/$1.tar.xz && ! -f $work/mlflow.db ]]; then
    ${PYTHON:-python3} -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
      ".gpuwork/$1.tar.xz" "$work"
  fi
}

# pack_store WORK OUT_TAR_XZ: what resuming needs (journal, MLflow store and artifacts, logs), not
# the per-job folders; xz: the store compresses to a third of gzip's size, and it travels
# between calls
pack_store() {
  ${PYTHON:-python3} - "$1" "$2" <<'PY'
import sqlite3, sys, tarfile
from pathlib import Path

work = Path(sys.argv[1])
keep = [work / "mlartifacts"] if (work / "mlartifacts").exists() else []
keep += [p for p in work.glob("*") if p.suffix in (".log", ".csv", ".png")]  # logs, GPU-use samples
keep += [p for p in (work / "sweep").glob("*") if p.is_file()]
with tarfile.open(sys.argv[2], "w:xz", preset=6) as tar:
    for path in keep:
        tar.add(path, arcname=str(path.relative_to(work)))
    # the MLflow store through SQLite's backup API, never as raw bytes: a run process still
    # writing (a straggler past the time limit) would leave a copied file mid-transaction, malformed
    # (it happened: 2026-12-04, the Transformer holdout's store)
    if (work / "mlflow.db").exists():
        snapshot = work / "mlflow.db.snapshot"
        source = sqlite3.connect(work / "mlflow.db", timeout=60)
        target = sqlite3.connect(snapshot)
        with target:
            source.backup(target)
        source.close()
        target.close()
        tar.add(snapshot, arcname="mlflow.db")
        snapshot.unlink()
PY
}

# end_groups LIMIT_S LEADER...: wait while any process of the leaders' groups (each started with
# setsid) runs, at most LIMIT_S seconds; then SIGTERM the groups, give them 30 s, SIGKILL what is
# left. Whole groups, not the leaders alone: a joblib worker still writing while the store is
# packed leaves it cut mid-transaction (2026-12-04, the Transformer holdout's store)
end_groups() {
  local deadline=$((SECONDS + $1)) leader
  shift
  alive() { for leader in "$@"; do pgrep -g "$leader" >/dev/null && return 0; done; return 1; }
  while alive "$@" && ((SECONDS < deadline)); do sleep 2; done
  for leader in "$@"; do kill -TERM -- "-$leader" 2>/dev/null; done
  for _ in $(seq 30); do alive "$@" || break; sleep 1; done
  for leader in "$@"; do kill -KILL -- "-$leader" 2>/dev/null; done
}
