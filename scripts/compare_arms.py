"""Compare two arms of finished seed runs (by MLflow sweep id) with the held-out report's own
code (t4bench.sweep.holdout.report): used to put round 1's preset on round 3's held-out seeds
against the same reference runs (and against round 3's tuned runs), without re-running them, and
for the arms of scripts/gpu/arms.sh.

    python scripts/compare_arms.py URI TUNED_SWEEP_IDS REF_SWEEP_IDS \
        SEEDS_LO SEEDS_HI LABEL OUT_DIR [MODEL [MAX_EPOCHS]]    # default: ncf 8

An arm's sweep ids may be several, comma-separated: an arm whose seeds ran in blocks, one packed
sweep per block (more seeds than fit the GPU at once). The report goes to OUT_DIR
(validation.{md,csv,json}) and is logged, files and metrics, on a parent run of its own in the
store (sweep id compare-LABEL, kind validation), like a held-out validation's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from t4bench.sweep.holdout import report
from t4bench.tracking import names, sweep_layout
from t4bench.tracking.client import mlflow_client


def main() -> None:
    uri, tuned_ids, ref_ids, lo, hi, label, out = sys.argv[1:8]
    model = sys.argv[8] if len(sys.argv) > 8 else "ncf"
    # a run that did not converge enters the statistics at this many epochs (censored)
    max_epochs = float(sys.argv[9]) if len(sys.argv) > 9 else 8.0
    seeds = list(range(int(lo), int(hi) + 1))
    client = mlflow_client(uri, new_store=True)
    exp = sweep_layout.experiment_id(uri, f"t4bench-{model}")
    arms = {}
    for arm, sweep_ids in (("tuned", tuned_ids.split(",")), ("reference", ref_ids.split(","))):
        results = sorted(
            (r for sid in sweep_ids for r in sweep_layout.seed_results(client, exp, sid) if r["seed"] in seeds),
            key=lambda r: r["seed"],
        )
        assert [r["seed"] for r in results] == seeds, (arm, sweep_ids, [r["seed"] for r in results])
        arms[arm] = {"sweep_id": ",".join(sweep_ids), "run_id": None, "overrides": sweep_ids, "results": results}
    rep = report.build_report(model, label, seeds, {"trial": label, "params": {}, "value": None}, arms, max_epochs)
    parent = sweep_layout.get_or_create_parent(
        client,
        exp,
        f"compare-{label}",
        kind="validation",
        run_name=f"compare-{label}",
        tags={names.VALIDATION_OF: f"{tuned_ids} vs {ref_ids}"},
        identity=f"compare|{tuned_ids}|{ref_ids}|{lo}-{hi}",
    )
    try:
        text = report.publish(rep, Path(out), client, parent, None)
    finally:
        client.set_terminated(parent, status=names.FINISHED)
    print(text)


if __name__ == "__main__":
    main()
