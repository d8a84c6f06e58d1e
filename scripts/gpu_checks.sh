#!/usr/bin/env bash
# GPU checks for issue 5, on a CUDA host, from the repo root after `pip install -e .`:
#   bash scripts/gpu_checks.sh            (HW=h200 by default; HW=auto works on any known GPU)
# 1. hw=auto resolution  2. mini NCF run with telemetry  3. synthetic run  4. telemetry on vs off
# (same synthetic run) -- prints the figures. Runs land in $OUT (or /tmp) in their own MLflow store.
set -uo pipefail
PY=${PYTHON:-python3}
HW=${HW:-h200}
STEPS=${STEPS:-300}
dest=${OUT:-/tmp}/t4bench_gpu_checks
mkdir -p "$dest"
export MLFLOW_TRACKING_URI="sqlite:///$dest/mlflow.db"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
common=(progress=plain)

echo "== 1. hw=auto resolution"
$PY - <<'PY'
from omegaconf import OmegaConf
from t4bench import hardware
found = hardware.detect()
cfg = OmegaConf.create({"hw": hardware.load_profile("auto")})
hardware.resolve(cfg, found)
print(f"detected: {found.describe()} via {found.source} -> hw={cfg.hw.name} precision={cfg.hw.precision}")
PY
$PY -m t4bench hw=t4 2>&1 | tail -1   # must fail with one line naming T4 and the GPU found

echo "== 2. mini NCF on hw=$HW with telemetry"
if [[ ! -f data/movielens-100k/ml-100k.inter ]]; then $PY -m t4bench.data.prepare >/dev/null 2>&1 || true; fi
$PY -m t4bench model=ncf hw=$HW max_epochs=3 hw.telemetry.interval_s=0.5 +tracking.tags.check=mini \
  "${common[@]}" hydra.run.dir="$dest/mini" 2>&1 | tail -4

echo "== 3+4. synthetic NCF (reference shapes), telemetry on vs off, $STEPS steps each"
for telem in true false true false; do
  $PY -m t4bench model=ncf data=synthetic data.steps=$STEPS hw=$HW hw.telemetry.enabled=$telem \
    +tracking.tags.check=synthetic_telemetry_$telem "${common[@]}" hydra.run.dir="$dest/synth_$telem" 2>&1 | tail -2
done

echo "== figures"
$PY - <<'PY'
import os
from statistics import mean
from mlflow.tracking import MlflowClient
c = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
runs = [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]
keys = ("avg_throughput", "energy_to_train_kj", "avg_power_w", "max_temp_c", "throttled_fraction",
        "avg_gpu_util_pct", "telemetry_samples", "telemetry_sample_cost_ms")
for r in sorted(runs, key=lambda r: r.info.start_time):
    t, m = r.data.tags, r.data.metrics
    print(f"{t.get('check','?'):28s} {r.info.status:9s} hw={t.get('t4bench.hw')} prec={t.get('t4bench.precision')} "
          f"telemetry={t.get('t4bench.telemetry')}")
    print("   " + "  ".join(f"{k}={m[k]:.4g}" for k in keys if k in m))
    gpus = {k: v for k, v in t.items() if k.startswith("t4bench.gpu.")}
    if gpus:
        print("   " + "; ".join(f"{k[12:]}={v}" for k, v in gpus.items()))
    hist = [k for k in m if k.startswith("telemetry.gpu0.")]
    if hist:
        print(f"   per-interval metrics: {sorted(hist)}")
on = [r.data.metrics["avg_throughput"] for r in runs if r.data.tags.get("check") == "synthetic_telemetry_true"]
off = [r.data.metrics["avg_throughput"] for r in runs if r.data.tags.get("check") == "synthetic_telemetry_false"]
if on and off:
    print(f"telemetry on {mean(on):,.0f} vs off {mean(off):,.0f} samples/s: cost {100 * (1 - mean(on) / mean(off)):+.2f}% "
          f"(runs on={[round(x) for x in on]} off={[round(x) for x in off]})")
PY
