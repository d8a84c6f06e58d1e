# Shared by scripts/gpu_convergence.sh and scripts/gpu_holdout.sh (sourced, not run): CUDA MPS for
# the call, a GPU-use monitor, and the study store packed for the next call.

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

# pack_store WORK OUT_TAR_XZ: what resuming needs (journal, MLflow store and artifacts, logs), not
# the per-job folders; xz: the store compresses to a third of gzip's size, and it travels in the
# repo between sessions
pack_store() {
  ${PYTHON:-python3} - "$1" "$2" <<'PY'
import sys, tarfile
from pathlib import Path

work = Path(sys.argv[1])
names = ("mlflow.db", "mlartifacts", "sweep.log", "holdout.log")
keep = [work / n for n in names if (work / n).exists()]
keep += [p for p in (work / "sweep").glob("*") if p.is_file()]
with tarfile.open(sys.argv[2], "w:xz", preset=6) as tar:
    for path in keep:
        tar.add(path, arcname=str(path.relative_to(work)))
PY
}
