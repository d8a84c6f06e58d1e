#!/usr/bin/env bash
# The runs-per-hour benchmark on a GPU host (perf/runs_per_hour.py), resumable across calls:
# the work dir (one folder per N: MLflow store, result.json) comes carried as
# .gpuwork/runs_per_hour.tar.xz and goes back as $RESULTS/runs_per_hour.tar.xz; an N whose sweep
# finished in an earlier call is read back, not run again.
#   RPH_ARGS="--model gnmt --n 1,8 --n1-runs 6" RPH_LIMIT_S=420 \
#     bash scripts/gpu/run.sh scripts/gpu/runs_per_hour.sh    # carry .whl .carry .gpuwork
set -uo pipefail
cd "$(dirname "$0")/../.."
results=${RESULTS:-${OUT:-/tmp}}
work=$PWD/.gpuwork/runs_per_hour
mkdir -p "$work"
[[ -f .gpuwork/runs_per_hour.tar.xz && -z $(ls -A "$work") ]] && tar xJf .gpuwork/runs_per_hour.tar.xz -C "$work"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=scripts/gpu/study_common.sh
source scripts/gpu/study_common.sh
# its own process group: at the time limit the sweep's runs end too, not the script alone (`timeout`
# signalled only its child, and an N=8 sweep went on writing its store while it was packed)
# shellcheck disable=SC2086  # RPH_ARGS: several arguments
# --hw: the card that came (run.sh's HW), unless RPH_ARGS names one (argparse: the last wins)
setsid ${PYTHON:-python3} perf/runs_per_hour.py --work-dir "$work" --hw "${HW:-h200}" \
  --csv "$results/runs_per_hour.csv" ${RPH_ARGS:-} --set hw.loader_workers=0 &
leader=$!
end_groups "${RPH_LIMIT_S:-420}" "$leader"
wait "$leader"
echo "runs_per_hour.py exited $?"
# result.json of every finished N, the stores and sweep logs (not the per-job folders)
tar cJf "$results/runs_per_hour.tar.xz" -C "$work" --exclude='*/sweep/*/*' .
du -h "$results/runs_per_hour.tar.xz"
