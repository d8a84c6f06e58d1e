#!/usr/bin/env bash
# Translation on one GPU, from the repo root, with data/translation/{ding,mini} present:
#   OUT=/some/dir bash scripts/gpu/translation.sh          (HW=h200 by default)
# (a) scale=ding GNMT and Transformer trained to their BLEU targets through `python -m t4bench`
#     (conf/model_scale/*_ding.yaml), BLEU per epoch printed;
# (b) synthetic reference-size throughput of both, t4bench vs a bare PyTorch loop, bf16 and fp32
#     (perf/translation_throughput.py).
# Everything lands in $OUT/t4bench_gpu_translation (MLflow sqlite store, logs); a figures table
# comes last. About 5-8 minutes on one H200. DING_EPOCHS caps the ding runs (default: the configs').
# Extra arguments go to both ding runs, e.g. model.target.bleu=99 max_epochs=30 to see the plateau;
# GNMT_ARGS / TRANSFORMER_ARGS / THROUGHPUT_ARGS (space-separated overrides) go to one step only
# (a CPU dry run: HW=cpu DING_EPOCHS=1 STEPS=1 with tiny models, see docs/translation.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
HW=${HW:-h200}
STEPS=${STEPS:-100}
dest=${OUT:-/tmp}/t4bench_gpu_translation
mkdir -p "$dest"
export MLFLOW_TRACKING_URI="sqlite:///$dest/mlflow.db"
cap=()
if [[ -n ${DING_EPOCHS:-} ]]; then cap=("max_epochs=$DING_EPOCHS"); fi

for kind in ding mini; do
  if [[ ! -f data/translation/$kind/manifest.json ]]; then
    echo "scripts/gpu/translation.sh: error: data/translation/$kind is missing (python -m t4bench.data.prepare translation)" >&2
    exit 2
  fi
done

echo "== (a) scale=ding to the BLEU target on hw=$HW"
for model in transformer gnmt; do
  started=$(date +%s)
  args_var=${model^^}_ARGS
  read -r -a model_args <<<"${!args_var:-}"
  $PY -m t4bench "model=$model" scale=ding "hw=$HW" progress=plain +tracking.tags.check=ding \
    "hydra.run.dir=$dest/ding_$model" "${cap[@]}" "${model_args[@]}" "$@" >"$dest/ding_$model.log" 2>&1
  echo "$model: exit $? after $(( $(date +%s) - started )) s wall"
  grep -E '^(init|epoch)' "$dest/ding_$model.log" | cut -c1-150
  tail -3 "$dest/ding_$model.log" | grep -iE 'error|Traceback' || true
done

echo "== (b) synthetic reference size: t4bench vs bare loop ($STEPS steps)"
read -r -a throughput_args <<<"${THROUGHPUT_ARGS:-}"
$PY perf/translation_throughput.py "hw=$HW" --precisions bf16,fp32 --json "$dest/throughput.json" \
  "input.steps=$STEPS" "input.warmup_steps=${WARMUP_STEPS:-10}" "${throughput_args[@]}" 2>&1 | tail -12

echo "== figures"
$PY - "$dest" <<'PY'
import json, math, os, sys
from pathlib import Path
from mlflow.tracking import MlflowClient

dest = Path(sys.argv[1])
client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
print(f"{'ding run':12s} {'outcome':14s} {'target':>6s} {'epochs':>6s} {'ttt s':>7s} {'tok/s':>9s}  BLEU per epoch")
for name in ("t4bench-transformer", "t4bench-gnmt"):
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], "tags.check = 'ding'") if experiment else []
    for run in runs:
        m, p = run.data.metrics, run.data.params
        bleu = [round(x.value, 2) for x in client.get_metric_history(run.info.run_id, "eval_bleu")]
        epochs = m.get("epochs_to_converge", math.nan)
        print(f"{name[8:]:12s} {run.data.tags.get('t4bench.outcome', '?'):14s} {p.get('model.target.bleu', '?'):>6s} "
              f"{'-' if math.isnan(epochs) else int(epochs):>6} {m.get('time_to_train_s', math.nan):7.1f} "
              f"{m.get('avg_throughput', math.nan):9,.0f}  {bleu}")
throughput = dest / "throughput.json"
if throughput.exists():
    print(f"\n{'synthetic ref':12s} {'batch':>5s} {'prec':5s} {'t4bench tok/s':>14s} {'bare tok/s':>12s} {'ratio':>6s}")
    for r in json.loads(throughput.read_text()):
        print(f"{r['model']:12s} {r['batch']:5d} {r['precision']:5s} {r['t4bench']:14,.0f} {r['bare']:12,.0f} {r['ratio']:6.3f}")
PY
