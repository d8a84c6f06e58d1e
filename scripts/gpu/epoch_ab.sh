#!/usr/bin/env bash
# Time per epoch of real-data runs under several perf settings (perf/epoch_ab.py) on a GPU host, the
# card that came as hw (run.sh's HW). Arms and the model come in EAB_ARGS, e.g.
#   EAB_ARGS="--epochs 4 --repeats 2 --arm default:perf=default --arm profile: model=gnmt scale=ding" \
#     bash scripts/gpu/run.sh scripts/gpu/epoch_ab.sh      # carry .whl .carry
set -uo pipefail
cd "$(dirname "$0")/../.."
results=${RESULTS:-${OUT:-/tmp}}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck disable=SC2086  # EAB_ARGS: several arguments
timeout "${EAB_LIMIT_S:-300}" ${PYTHON:-python3} perf/epoch_ab.py --csv "$results/epoch_ab${EAB_TAG:-}.csv" \
  ${EAB_ARGS:-} "hw=${HW:-h200}"
echo "epoch_ab.py exited $?"
