#!/usr/bin/env bash
# The GPU smoke (run after every change to src/): every model through `python -m t4bench` with the
# GPU profile's default settings, one CSV row each:
#   NCF mini to its target; GNMT and Transformer scale=ding to their targets; ResNet-50, SSD and
#   Mask R-CNN mini for a few epochs, and each of those three with input=synthetic (throughput).
# On the GPU machine, through scripts/gpu/run.sh (which installs the carried wheels and data):
#   GIT_COMMIT=<hash> bash scripts/gpu/run.sh scripts/gpu/smoke.sh
# Write the hash out (`git rev-parse HEAD` here, pasted): the command runs on the GPU machine, whose
# copy of .git can be older than the tree it was sent (it can name an earlier commit). Without GIT_COMMIT the CSV says HEAD, with "+changed" when src/ or conf/ differ from it.
# CSV columns: case, model, command, exit, outcome, epochs, time_to_train_s, throughput,
# throughput_unit, peak_gpu_memory_gib, wall_s, runs_on_gpu (1: alone), gpu, git_commit. Written to $SMOKE_CSV (default
# $RESULTS/gpu_smoke.csv); commit it as perf/results/gpu_smoke_<gpu>.csv. CASES picks cases.
# PERF=<profile>: every case with perf=<profile> instead of the card's own (hw's), e.g. PERF=h200 on
# an H100 when no H200 comes: the H200's settings (NCF's GPU-resident data and whole-step graph,
# ResNet-50 and Mask R-CNN compile) run, on the other card; the command column says so.
# The runs go one after another, alone on the GPU, so their seconds are the GPU's own (except the
# TOGETHER cases, marked in runs_on_gpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
HW=${HW:-h200}
perf=${PERF:+perf=$PERF}
work=${OUT:-/tmp/t4bench_smoke}/smoke
mkdir -p "$work"
csv=${SMOKE_CSV:-${RESULTS:-$work}/gpu_smoke.csv}
commit=${GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
[[ -z ${GIT_COMMIT:-} ]] && ! git diff --quiet HEAD -- src conf 2>/dev/null && commit+="+changed"
export MLFLOW_TRACKING_URI="sqlite:///$work/mlflow.db"
declare -A args=(
  [ncf]="model=ncf"
  [gnmt]="model=gnmt scale=ding"
  [transformer]="model=transformer scale=ding"
  [resnet50]="model=resnet50 max_epochs=${VISION_EPOCHS:-2}"
  [ssd]="model=ssd max_epochs=${VISION_EPOCHS:-2}"
  [maskrcnn]="model=maskrcnn max_epochs=1"
  [resnet50-synthetic]="model=resnet50 input=synthetic"
  [ssd-synthetic]="model=ssd input=synthetic"
  [maskrcnn-synthetic]="model=maskrcnn input=synthetic"
  # the translation and NCF profiles' synthetic-only options (compile, whole-step CUDA graph)
  [gnmt-synthetic]="model=gnmt input=synthetic"
  [transformer-synthetic]="model=transformer input=synthetic"
  [ncf-synthetic]="model=ncf input=synthetic"
)
cases=${CASES:-ncf gnmt transformer resnet50 ssd maskrcnn resnet50-synthetic ssd-synthetic maskrcnn-synthetic gnmt-synthetic}
# TOGETHER: cases run side by side after the others (when GPU time is short); their rows say
# how many shared the GPU, and their seconds are not the GPU's own. LIMIT_S: no case starts after it.
together=${TOGETHER:-}
limit=${LIMIT_S:-100000}
: >"$work/cases.tsv"
one_case() {  # case, sharing
  local case=$1 shared=$2 started=$SECONDS extra status
  read -r -a extra <<<"${args[$case]}"
  $PY -m t4bench "${extra[@]}" "hw=$HW" ${perf:+"$perf"} seed=0 progress=plain "+tracking.tags.smoke=$case" \
    "hydra.run.dir=$work/$case" >"$work/$case.log" 2>&1
  status=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$case" "python -m t4bench ${args[$case]} hw=$HW${perf:+ $perf}" "$status" \
    "$((SECONDS - started))" "$shared" >>"$work/cases.tsv"
  echo "$case: exit $status after $((SECONDS - started)) s"
  ((status == 0)) || tail -5 "$work/$case.log"
}
for case in $cases $together; do  # a misspelt case would run the default model under its name
  [[ -n ${args[$case]:-} ]] || { echo "gpu_smoke: unknown case '$case' (one of: ${!args[*]})" >&2; exit 2; }
done
for case in $cases; do
  if ((SECONDS > limit)); then echo "$case: not started (LIMIT_S=$limit reached)"; continue; fi
  one_case "$case" 1
done
write_csv() {
$PY - "$work/cases.tsv" "$csv" "$commit" <<'PY'
import csv, math, subprocess, sys
from mlflow.tracking import MlflowClient

cases, out, commit = sys.argv[1:4]
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout.splitlines()[0].strip()
except (OSError, subprocess.CalledProcessError, IndexError):
    gpu = "none"
client = MlflowClient()
columns = ["case", "model", "command", "exit", "outcome", "epochs", "time_to_train_s", "throughput",
           "throughput_unit", "peak_gpu_memory_gib", "wall_s", "runs_on_gpu", "gpu", "git_commit"]
rows = []
for line in open(cases):
    case, command, status, wall, shared = line.rstrip("\n").split("\t")
    model = command.split("model=")[1].split()[0]
    experiment = client.get_experiment_by_name(f"t4bench-{model}")
    runs = client.search_runs([experiment.experiment_id], f"tags.smoke = '{case}'") if experiment else []
    m = runs[0].data.metrics if runs else {}
    t = runs[0].data.tags if runs else {}
    epochs = m.get("epochs_to_converge", math.nan)
    if math.isnan(epochs):
        epochs = m.get("epochs_run", math.nan)
    fmt = lambda v, d: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}f}"
    rows.append({"case": case, "model": model, "command": command, "exit": status,
                 "outcome": t.get("t4bench.outcome", "no run"), "epochs": fmt(epochs, 2),
                 "time_to_train_s": fmt(m.get("time_to_train_s"), 2), "throughput": fmt(m.get("avg_throughput"), 1),
                 "throughput_unit": t.get("t4bench.throughput_unit", ""),
                 "peak_gpu_memory_gib": fmt(m.get("peak_gpu_memory_gib"), 2), "wall_s": wall, "runs_on_gpu": shared, "gpu": gpu,
                 "git_commit": commit})
with open(out, "w", newline="") as handle:
    writer = csv.DictWriter(handle, columns)
    writer.writeheader()
    writer.writerows(rows)
width = max((len(r["case"]) for r in rows), default=4)  # the early CSV, before any case ends, has none
for r in rows:
    print(f"{r['case']:{width}s} exit {r['exit']:>3s} {r['outcome']:16s} epochs {r['epochs']:>6s} "
          f"ttt {r['time_to_train_s']:>8s} s  {r['throughput']:>12s} {r['throughput_unit']:10s} "
          f"peak {r['peak_gpu_memory_gib']:>6s} GiB  wall {r['wall_s']:>4s} s  x{r['runs_on_gpu']}")
failed = [r["case"] for r in rows if r["exit"] != "0" or r["outcome"] in ("no run", "diverged")]
print(f"smoke: {len(rows) - len(failed)}/{len(rows)} cases ran cleanly" + (f"; failed: {' '.join(failed)}" if failed else ""))
sys.exit(1 if failed else 0)
PY
}
# the CSV of the cases so far, in case the side-by-side ones are cut short
[[ -n $together ]] && write_csv >/dev/null
if [[ -n $together ]] && ((SECONDS <= limit)); then
  n=$(wc -w <<<"$together")
  for case in $together; do one_case "$case" "$n" & done
  wait
fi
write_csv
