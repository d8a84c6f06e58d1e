#!/usr/bin/env bash
# Speed measurements on one GPU, from the repo root (run by scripts/gpu/run.sh, or with src/
# and the dependencies importable). Parts (PARTS, space-separated, default all but suite):
#   ding      where Transformer scale=ding's first epoch goes (perf/first_epoch.py, 3 epochs)
#   ncf_mini  mini NCF to its target, hw=h200: perf=default vs GPU-resident data + whole-step graph
#   variants  perf option sets per model through the loop's Trainer (perf/perf_variants.py)
#   suite     perf/gpu_suite.py (all six models; CSV written to $OUT/gpu_suite.csv after each model)
#   gap       perf/process_gap.py: the suite's bare worker with the CLI process's state added piece
#             by piece, beside the CLI run (why SSD's CLI run beats its bare loop; GAP_MODEL)
#   ab        perf/step_ab.py: bare and Trainer steps in one process, alternating blocks (goal 4 for
#             host-bound models, whose fresh processes spread 12-20 %; AB_MODELS, AB_ARGS)
#   profile   perf/profile_step.py (torch.profiler per model and path; $OUT/profile.md, rewritten
#             after each path, so a cut-off part keeps what it profiled)
#   profile_default  perf/profile_default.py: hw=auto's perf profile against perf=default per model
#             (the README's per-GPU table; $RESULTS/profile_default.csv, written after each model;
#             PD_MODELS, PD_ARGS, PD_LIMIT)
# Each part has its own time limit, so one hung part cannot take the others' figures with it.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
HW=${HW:-h200}
PARTS=${PARTS:-ding ncf_mini variants}
# logs and the suite's CSV in $OUT (few files, easy to copy back from the GPU host); MLflow store
# and run folders in WORK
dest=${OUT:-/tmp/t4bench_gpu_perf}
work=${WORK:-/tmp/t4bench_gpu_perf_work}
mkdir -p "$dest" "$work"
export MLFLOW_TRACKING_URI="sqlite:///$work/perf.db" SUITE_WORK="$work/suite"
part() { [[ " $PARTS " == *" $1 "* ]]; }

if part ding; then
  echo "== ding: Transformer first epoch vs later ones"
  timeout "${DING_LIMIT:-150}" $PY perf/first_epoch.py --epochs "${DING_EPOCHS:-3}" model=transformer scale=ding "hw=$HW" ${DING_ARGS:-}
fi

if part ncf_mini; then
  echo "== ncf_mini: time to train, hw=$HW"
  for perf in ${NCF_PERFS:-default $HW}; do
    bench=() && [[ $perf != default ]] && bench=(model.benchmark=t4bench.benchmarks.ncf.gpu_data.GpuResidentNCF)
    started=$(date +%s%N)
    timeout "${NCF_LIMIT:-120}" $PY -m t4bench model=ncf "hw=$HW" "perf=$perf" "${bench[@]}" progress=plain \
      "hydra.run.dir=$work/ncf_$perf" >"$dest/ncf_mini_$perf.log" 2>&1
    echo "ncf mini perf=$perf: exit $? after $(( ($(date +%s%N) - started) / 1000000 )) ms wall"
    grep -E '^(init|epoch)|time_to_train|outcome|epochs_to_converge|hr_at_10' "$dest/ncf_mini_$perf.log" | cut -c1-160
  done
fi

if part variants; then
  echo "== variants"
  steps=(--steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --hw "$HW")
  F=perf.optimizer_impl=fused
  # VARIANT_MODELS (space-separated, default all six) picks which models' variants run
  vpart() { [[ " ${VARIANT_MODELS:-resnet50 transformer ssd ncf gnmt maskrcnn} " == *" $1 "* ]]; }
  vpart resnet50 && timeout 200 $PY perf/perf_variants.py resnet50 "" "$F" "$F perf.compile=true" \
    "$F perf.compile=true perf.cuda_graphs=true" "${steps[@]}"
  # Transformer: host-bound after compile (59 % of the step idle, docs/perf.md's profile): CUDA
  # graphs through inductor (reduce-overhead) at the suite's fixed shapes
  # (the token count is read on the host, so the step has no host sync and the whole step can be
  # one CUDA graph: + compile x1.669 vs compile's x1.622, one H100, 2026-12-06, tree 1f4056e)
  vpart transformer && timeout "${TRANSFORMER_LIMIT:-120}" $PY perf/perf_variants.py transformer "" "$F" \
    "$F perf.compile=true" "$F perf.compile=true perf.compile_mode=reduce-overhead" "$F perf.cuda_graphs=true" \
    "$F perf.compile=true perf.cuda_graphs=true" "${steps[@]}"
  # SSD: host-bound (294 syncs a step in the 2026-12-06 profile); the whole-batch loss removes the
  # per-image matching and loss loop
  vpart ssd && timeout "${SSD_LIMIT:-140}" $PY perf/perf_variants.py ssd "" "perf.batched_loss=true" \
    "$F perf.batched_loss=true" "$F perf.batched_loss=true perf.compile=true perf.compile_modules=[backbone]" "${steps[@]}"
  # NCF: bandwidth-bound (95 % busy): compile fuses its casts, cat, mul and the loss's elementwise
  # kernels (11 copies and 11 bf16 casts a step in the 2026-12-06 profile)
  vpart ncf && timeout "${NCF_VARIANT_LIMIT:-200}" $PY perf/perf_variants.py ncf "" "$F" "$F perf.cuda_graphs=true" \
    "$F perf.compile=true" "$F perf.compile=true perf.cuda_graphs=true" "${steps[@]}"
  # GNMT and Mask R-CNN (measured 2026-12-06: x1.152 and x1.376, now in perf/h200.yaml). GNMT: the attention's
  # [B, T, S, H] tanh is one fusable expression; after compile ~1,000 launches a step remain and 30 %
  # of it is idle (profile); reduce-overhead was x1.152 vs compile's x1.183 (H100, 2026-12-06) with a
  # graph break at packing. Since 1f4056e lengths and token counts are on the host and a batch
  # without padding is not packed, so the step has no host sync: attention compile + the whole step
  # in one CUDA graph x1.345 (H100, now in perf/h100 and perf/h200). Mask R-CNN: the FPN backbone
  vpart gnmt && timeout "${GNMT_LIMIT:-300}" $PY perf/perf_variants.py gnmt "" "$F" \
    "$F perf.compile=true perf.compile_modules=[attention]" "$F perf.compile=true" \
    "$F perf.compile=true perf.compile_mode=reduce-overhead" "$F perf.cuda_graphs=true" \
    "$F perf.compile=true perf.compile_modules=[attention] perf.cuda_graphs=true" "${steps[@]}"
  vpart maskrcnn && timeout "${MASKRCNN_LIMIT:-150}" $PY perf/perf_variants.py maskrcnn "" "$F" \
    "$F perf.compile=true perf.compile_modules=[backbone]" "${steps[@]}"
fi

if part gap; then
  echo "== gap: bare worker + pieces of the CLI process vs the CLI run"
  timeout "${GAP_LIMIT:-500}" $PY perf/process_gap.py --model "${GAP_MODEL:-ssd}" --hw "$HW" ${GAP_ARGS:-}
fi

if part ab; then
  echo "== ab: bare vs Trainer steps in one process"
  # shellcheck disable=SC2086  # AB_MODELS and AB_ARGS are word lists on purpose
  timeout "${AB_LIMIT:-400}" $PY perf/step_ab.py --hw "$HW" --models ${AB_MODELS:-ssd maskrcnn} \
    --out "$dest/step_ab.csv" ${AB_ARGS:-}
fi

if part suite; then
  echo "== suite"
  # shellcheck disable=SC2086  # SUITE_ARGS is a word list on purpose
  timeout "${SUITE_LIMIT:-560}" $PY perf/gpu_suite.py --hw "$HW" --csv "$dest/gpu_suite.csv" ${SUITE_ARGS:-}
fi

if part profile; then
  echo "== profile"
  # shellcheck disable=SC2086  # PROFILE_ARGS is a word list on purpose
  timeout "${PROFILE_LIMIT:-200}" $PY perf/profile_step.py --hw "$HW" --steps "${PROFILE_STEPS:-5}" \
    --warmup "${PROFILE_WARMUP:-5}" --out "$dest/profile.md" ${PROFILE_ARGS:-}
fi

if part profile_default; then
  echo "== profile_default"
  # shellcheck disable=SC2086  # PD_MODELS and PD_ARGS are word lists on purpose
  timeout "${PD_LIMIT:-420}" $PY perf/profile_default.py --models ${PD_MODELS:-ncf resnet50 ssd gnmt transformer maskrcnn} \
    --csv "${RESULTS:-$dest}/profile_default.csv" ${PD_ARGS:-}
fi
