#!/usr/bin/env bash
# Vision benchmarks on a CUDA host, from the repo root with `import t4bench` working:
#   bash scripts/gpu/vision.sh                 (hw=h200, bf16; HW=a100 etc. for other profiles)
# 1. synthetic training throughput at reference size, t4bench vs a bare PyTorch loop of the same
#    model/batch/precision/optimizer (perf/vision_throughput.py), printed as a table
# 2. the SSD and Mask R-CNN mini runs on the GPU (bf16 training and COCOeval evaluation on CUDA,
#    which synthetic mode does not exercise); needs data/fashion-coco (carry it from the CPU
#    machine, 54 MB) and is skipped with a note without it. MINI=0 skips it.
# Everything lands in $OUT (default /tmp/t4bench_gpu_vision): MLflow stores, Hydra run dirs.
set -uo pipefail
PY=${PYTHON:-python3}
HW=${HW:-h200}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
dest=${OUT:-/tmp/t4bench_gpu_vision}
mkdir -p "$dest"
started=$SECONDS

echo "== 1. synthetic throughput at reference size (hw=$HW, bf16, $STEPS steps after $WARMUP warm-up)"
$PY perf/vision_throughput.py --device cuda --hw "$HW" --steps "$STEPS" --warmup "$WARMUP" \
  --out "$dest/throughput" 2>&1 | tail -12
echo "(section 1 done at $((SECONDS - started)) s)"

if [[ "${MINI:-1}" != 1 ]]; then exit 0; fi
echo "== 2. SSD and Mask R-CNN mini runs on hw=$HW"
if [[ ! -f data/fashion-coco/.complete.json ]]; then
  echo "skipped: data/fashion-coco is not here (carry it, or run python -m t4bench.data.prepare fashion-coco"
  echo "         with T4BENCH_FASHION_MNIST_DIR pointing at the Fashion-MNIST IDX files)"
  exit 0
fi
export MLFLOW_TRACKING_URI="sqlite:///$dest/mini.db"
for model in ssd maskrcnn; do
  $PY -m t4bench model=$model hw=$HW seed=1 progress=plain hydra.run.dir="$dest/mini_$model" 2>&1 \
    | grep -E "^epoch|outcome|epochs_to_converge|time_to_train|error" | tail -12
done
echo "(section 2 done at $((SECONDS - started)) s)"
