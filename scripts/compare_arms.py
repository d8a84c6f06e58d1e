"""Compare two arms of finished seed runs (by MLflow sweep id) with the held-out report's own
code (t4bench.sweep.holdout.report): used to put round 1's preset on round 3's held-out seeds
against the same reference runs (and against round 3's tuned runs), without re-running them, and
for the arms of scripts/gpu_arms.sh.

    python scripts/compare_arms.py URI TUNED_SWEEP_ID REF_SWEEP_ID \
        SEEDS_LO SEEDS_HI LABEL OUT_DIR [MODEL [MAX_EPOCHS]]    # default: ncf 8
"""

from __future__ import annotations

import sys
from pathlib import Path

from t4bench.sweep import mlflow_layout
from t4bench.sweep.holdout import report


def main() -> None:
    uri, tuned_id, ref_id, lo, hi, label, out = sys.argv[1:8]
    model = sys.argv[8] if len(sys.argv) > 8 else "ncf"
    # a run that did not converge enters the statistics at this many epochs (censored)
    max_epochs = float(sys.argv[9]) if len(sys.argv) > 9 else 8.0
    seeds = list(range(int(lo), int(hi) + 1))
    client = mlflow_layout.client(uri)
    exp = mlflow_layout.experiment_id(uri, f"t4bench-{model}")
    arms = {}
    for arm, sweep_id in (("tuned", tuned_id), ("reference", ref_id)):
        results = sorted(
            (r for r in mlflow_layout.seed_results(client, exp, sweep_id) if r["seed"] in seeds),
            key=lambda r: r["seed"],
        )
        assert [r["seed"] for r in results] == seeds, (arm, sweep_id, [r["seed"] for r in results])
        arms[arm] = {"sweep_id": sweep_id, "run_id": None, "overrides": [sweep_id], "results": results}
    rep = report.build_report(model, label, seeds, {"trial": label, "params": {}, "value": None}, arms, max_epochs)
    Path(out).mkdir(parents=True, exist_ok=True)
    text = report.render(rep)
    (Path(out) / "validation.md").write_text(text)
    report.write_csv(rep, Path(out) / "validation.csv")
    print(text)


if __name__ == "__main__":
    main()
