#!/usr/bin/env bash
# Pack, here, the mini data an offline GPU host needs (it has no package index and no Debian data
# packages), small enough to travel with the wheels of scripts/gpu/fetch_wheels.sh (64 MiB a call):
#   .carry/data-small.tgz      data/movielens-100k + data/translation (mini and ding), ~2 MB
#   .carry-vision/*.idx.xz     the Fashion-MNIST IDX files (26 MB as xz; 30 MB as Debian's gz), from
#                              which scripts/gpu/run.sh prepares data/fashion-mnist-folder and
#                              data/fashion-coco there in ~10 s (54 MB of PNGs would not travel)
# Both folders are ignored by git; name them in the device call's carry list.
set -euo pipefail
cd "$(dirname "$0")/../.."
source_dir=${T4BENCH_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p .carry .carry-vision
tar czf .carry/data-small.tgz data/movielens-100k data/translation
for file in "$source_dir"/*-ubyte.gz; do
  out=.carry-vision/$(basename "$file" .gz).xz
  [[ -s $out ]] || zcat "$file" | xz -9 -T2 >"$out"
done
du -sh .carry .carry-vision .whl 2>/dev/null
