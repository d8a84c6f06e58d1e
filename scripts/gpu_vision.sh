#!/usr/bin/env bash
# Vision benchmarks on a CUDA host (issue 3), from the repo root with `import t4bench` working:
#   bash scripts/gpu_vision.sh                 (hw=h200, bf16; HW=a100 etc. for other profiles)
# 1. synthetic training throughput at reference size, t4bench vs a bare PyTorch loop of the same
#    model/batch/precision/optimizer (benchmarks/vision_throughput.py), printed as a table
# 2. (MINI=1) the mini runs on the GPU: ResNet, SSD, Mask R-CNN to their mini targets; needs
#    data/fashion-mnist-folder and data/fashion-coco (carried from the CPU machine, or written by
#    `python -m t4bench.data.prepare` where Debian's dataset-fashion-mnist is installed)
# Everything lands in $OUT (default /tmp/t4bench_gpu_vision): MLflow stores, Hydra run dirs.
set -uo pipefail
PY=${PYTHON:-python3}
HW=${HW:-h200}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
dest=${OUT:-/tmp/t4bench_gpu_vision}
mkdir -p "$dest"
started=$SECONDS

echo "== 1. synthetic throughput at reference size ($HW, bf16, $STEPS steps after $WARMUP warm-up)"
$PY benchmarks/vision_throughput.py --device cuda --hw "$HW" --steps "$STEPS" --warmup "$WARMUP" \
  --out "$dest/throughput" 2>&1 | tail -8
echo "(section 1 done at $((SECONDS - started)) s)"

if [[ "${MINI:-1}" == 1 ]]; then
  echo "== 2. mini runs on $HW (fp32 and bf16 both fine; the profile's precision is used)"
  export MLFLOW_TRACKING_URI="sqlite:///$dest/mini.db"
  for model in resnet50 ssd maskrcnn; do
    $PY -m t4bench model=$model hw=$HW seed=1 progress=plain hydra.run.dir="$dest/mini_$model" 2>&1 \
      | grep -E "^epoch|outcome|epochs_to_converge|time_to_train|error" | tail -20
  done
  echo "(section 2 done at $((SECONDS - started)) s)"
fi
