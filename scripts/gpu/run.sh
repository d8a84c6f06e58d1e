#!/usr/bin/env bash
# One call on a GPU host (Python 3.12 + CUDA torch, no package index): install the wheels
# carried in .whl/ (mlflow, hydra, optuna, pycocotools, mlperf-logging, ...; see docs/hardware.md),
# put src/ on the path, then run the named GPU scripts one after another, each into its own log.
#   bash scripts/gpu/run.sh scripts/gpu/checks.sh scripts/gpu/vision.sh ...
# A script named as bg:PATH runs in the background from the start (CPU-only work that shares the
# lease, e.g. bg:scripts/seeds_translation.sh with BG_ARGS="5"), and is waited for at the end; its
# CPU load is then on the host while the GPU scripts are timed: say so next to their figures.
# Logs land in $OUT (or /tmp/t4bench_gpu), MLflow stores and run folders in $OUT/work.tgz; each
# script prints its figures last.
set -uo pipefail
cd "$(dirname "$0")/../.."
results=${OUT:-/tmp/t4bench_gpu}
# the scripts write MLflow stores and run folders under work/, packed into one archive at the end
export OUT=$results/work RESULTS=$results
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >"$results/pip.log" 2>&1 || { echo "wheel install failed"; tail "$results/pip.log"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 PYTHON=python3
# the mini data carried by scripts/gpu/pack_data.sh: unpacked, and the Fashion-MNIST sets prepared here
if [[ -f .carry/data-small.tgz && ! -d data/translation ]]; then tar xzf .carry/data-small.tgz; fi
if compgen -G ".carry-vision/*.xz" >/dev/null && [[ ! -f data/fashion-coco/.complete.json ]]; then
  python3 - <<'PY'
import gzip, lzma, shutil
from pathlib import Path

out = Path("/tmp/fashion-mnist")
out.mkdir(exist_ok=True)
for packed in Path(".carry-vision").glob("*.xz"):
    with lzma.open(packed) as src, gzip.open(out / packed.with_suffix(".gz").name, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)
PY
  T4BENCH_FASHION_MNIST_DIR=/tmp/fashion-mnist python3 -m t4bench.data.prepare fashion-mnist-folder fashion-coco \
    | tail -2
fi
# never let NCCL/PyTorch use NVLink multicast on shared or virtual GPU hosts
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count(), 'GPU(s)')"
nvidia-smi --query-gpu=name,driver_version,power.draw,temperature.gpu,clocks.sm --format=csv,noheader || true
# HW for the scripts (they default to h200): the profile of the card that came, when not given.
# A call for the H200 may get an H100, and hw=h200 then refuses every run in one line (a wasted
# call, 2026-12-05 twice). The pick is hw=auto's own (conf/hw/*.yaml nvml_name against NVML's GPU
# 0); a card without a profile, or no GPU, leaves HW unset (the scripts' h200 refuses).
if [[ -z ${HW:-} ]]; then
  picked=$(python3 -c "from t4bench import hardware; print(hardware.profile_for(hardware.detect()))" 2>/dev/null)
  [[ -n $picked && $picked != cpu ]] && export HW=$picked
  echo "HW=${HW:-unset} (hw=auto's pick for this GPU)"
fi

status=0
background=()
foreground=()
for script in "$@"; do
  if [[ $script == bg:* ]]; then background+=("${script#bg:}"); else foreground+=("$script"); fi
done
bg_pids=()
for script in "${background[@]}"; do
  name=$(basename "$script" .sh)
  echo "===== $script in the background ($(date +%T))"
  # shellcheck disable=SC2086  # BG_ARGS is a word list on purpose
  bash "$script" ${BG_ARGS:-} >"$results/$name.log" 2>&1 &
  bg_pids+=("$!:$name")
done

for script in "${foreground[@]}"; do
  name=$(basename "$script" .sh)
  echo "===== $script ($(date +%T))"
  started=$SECONDS
  bash "$script" >"$results/$name.log" 2>&1 || { echo "!! $script exited $?"; status=1; }
  echo "----- last lines of $name.log ($((SECONDS - started)) s)"
  tail -n "${TAIL_LINES:-25}" "$results/$name.log"
done
for entry in "${bg_pids[@]}"; do
  pid=${entry%%:*} name=${entry#*:}
  wait "$pid" || { echo "!! background $name exited $?"; status=1; }
  echo "----- last lines of $name.log (background, done $(date +%T))"
  tail -n "${TAIL_LINES:-25}" "$results/$name.log"
done
tar czf "$results/work.tgz" -C "$results" work && rm -rf "$OUT"
exit $status
