"""The same-seed experiment's table and summary from its MLflow store (scripts/gpu/same_seed.sh).

    python scripts/same_seed.py --store sqlite:///multirun/same_seed/mlflow.db \
        --csv docs/convergence/same_seed.csv --summary docs/convergence/same_seed_summary.csv

CSV: one row per run (model, deterministic, repeat, epochs_to_converge, outcome, run_train_s,
plus gpu_share, epochs_run and the last epoch's train loss in full). `deterministic` is the run's
t4bench.deterministic tag (what the rank set, read back from the framework), `repeat` its user tag
(+tracking.tags.repeat), gpu_share how many runs shared its GPU. Summary, per model and arm:
epochs-to-converge of the finished runs (mean, std, min, max, the distinct values: with
deterministic=true one value is expected, on the same GPU and software), how many distinct final
losses (1: bit-identical runs), and the cost of the switch from the runs alone on the GPU
(gpu_share 1; shared runs' seconds are no speed figure): mean seconds per epoch and its ratio to
the deterministic=false arm's. Printed as a table too."""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from t4bench.tracking import names
from t4bench.tracking.tags import run_tags

COLUMNS = [
    "model",
    "deterministic",
    "repeat",
    "epochs_to_converge",
    "outcome",
    "run_train_s",
    "gpu_share",
    "epochs_run",
    "final_train_loss",
    "first_difference",
]
SUMMARY = ["model", "deterministic", "runs", "converged", "epochs_mean", "epochs_std", "epochs_min",
           "epochs_max", "distinct_epochs", "distinct_final_losses", "alone_runs", "s_per_epoch_alone",
           "cost_vs_nondeterministic"]  # fmt: skip
#: outcomes that say nothing about the seed (a time limit or a crash ended the run)
UNFINISHED = {names.OUTCOME_KILLED, names.OUTCOME_FAILED, names.OUTCOME_RUNNING}


def collect(store: str, models: Sequence[str], scale: str) -> list[dict[str, Any]]:
    client = MlflowClient(store)
    rows = []
    for model in models:
        experiment = client.get_experiment_by_name(f"t4bench-{model}")
        if experiment is None:
            continue
        query = f"tags.`{names.SWEEP_ID}` LIKE 'same_seed_{model}_{scale}_%'"
        for run in client.search_runs([experiment.experiment_id], query, max_results=50_000):
            if names.SEED not in run.data.tags:  # a sweep's parent run
                continue
            tags = run_tags(client, run)  # t4bench.deterministic is in the run's run_tags.json
            metrics = run.data.metrics
            rows.append(
                {
                    "model": model,
                    "deterministic": tags.get(names.DETERMINISTIC, "unknown"),
                    "repeat": tags.get("repeat", ""),
                    "epochs_to_converge": metrics.get(names.EPOCHS_TO_CONVERGE, math.nan),
                    "outcome": tags.get(names.OUTCOME, ""),
                    "run_train_s": metrics.get(names.RUN_TRAIN_S, math.nan),
                    "gpu_share": int(tags.get(names.GPU_SHARE, 1)),
                    "epochs_run": metrics.get(names.EPOCHS_RUN, math.nan),
                    # the last epoch's loss, all digits: equal across an arm's runs = bit-identical runs
                    "final_train_loss": repr(metrics.get(names.TRAIN_LOSS, math.nan)),
                    "_history": history(client, run.info.run_id),
                }
            )
    mark_first_differences(rows)
    order = {"false": 0, "true": 1}
    return sorted(rows, key=lambda r: (r["model"], order.get(r["deterministic"], 2), -r["gpu_share"], str(r["repeat"])))


def history(client: MlflowClient, run_id: str) -> list[tuple[float, float, float]]:
    """(epochs done, train loss, eval quality) at each evaluation, every digit: two runs that
    repeat each other have equal lists."""
    per_step: dict[int, dict[str, float]] = {}
    for key in (names.EPOCH, names.TRAIN_LOSS, names.EVAL_QUALITY):
        for metric in client.get_metric_history(run_id, key):
            per_step.setdefault(metric.step, {})[key] = metric.value
    return [
        (row.get(names.EPOCH, math.nan), row.get(names.TRAIN_LOSS, math.nan), row.get(names.EVAL_QUALITY, math.nan))
        for _, row in sorted(per_step.items())
    ]


def mark_first_differences(rows: list[dict[str, Any]]) -> None:
    """Each run's `first_difference`: the epochs done at the first evaluation where its train loss
    or quality differs from the arm's most common history ('' where it repeats it to its end;
    the runs that repeat the common history leave it empty too). Tells a run that left the others
    from its first steps (a different start) from one that drifted late (a one-off event)."""
    for model, arm in {(r["model"], r["deterministic"]) for r in rows}:
        cell = [r for r in rows if (r["model"], r["deterministic"]) == (model, arm)]
        common = Counter(repr(r["_history"]) for r in cell).most_common(1)[0][0]
        reference = next(r["_history"] for r in cell if repr(r["_history"]) == common)
        for row in cell:
            row["first_difference"] = next(
                (f"{mine[0]:g}" for mine, theirs in zip(row["_history"], reference, strict=False) if mine != theirs),
                "",
            )
    for row in rows:
        del row["_history"]


def _round(value: float) -> float | str:
    return "" if math.isnan(value) else round(value, 3)


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for model, arm in sorted({(r["model"], r["deterministic"]) for r in rows}):
        cell = [r for r in rows if (r["model"], r["deterministic"]) == (model, arm) and r["outcome"] not in UNFINISHED]
        done = [float(r["epochs_to_converge"]) for r in cell if not math.isnan(r["epochs_to_converge"])]
        alone = [r["run_train_s"] / r["epochs_run"] for r in cell if r["gpu_share"] == 1 and r["epochs_run"] > 0]
        out.append(
            {
                "model": model,
                "deterministic": arm,
                "runs": len(cell),
                "converged": len(done),
                "epochs_mean": _round(statistics.fmean(done)) if done else "",
                "epochs_std": _round(statistics.stdev(done)) if len(done) > 1 else "",
                "epochs_min": min(done, default=""),
                "epochs_max": max(done, default=""),
                "distinct_epochs": " ".join(f"{e:g}" for e in sorted(set(done))),
                # 1: every finished run of the arm ended on the same loss to the last bit
                "distinct_final_losses": len({r["final_train_loss"] for r in cell}),
                "alone_runs": len(alone),
                "s_per_epoch_alone": _round(statistics.fmean(alone)) if alone else "",
                "cost_vs_nondeterministic": "",
            }
        )
    for row in out:  # the switch's cost: seconds per epoch alone, against the same model's false arm
        base = next((b for b in out if b["model"] == row["model"] and b["deterministic"] == "false"), None)
        if base and row["s_per_epoch_alone"] != "" and base["s_per_epoch_alone"] not in ("", 0):
            row["cost_vs_nondeterministic"] = round(
                float(row["s_per_epoch_alone"]) / float(base["s_per_epoch_alone"]), 3
            )
    return out


def write(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="MLflow tracking URI of the experiment's store")
    parser.add_argument("--scale", default="ding")
    parser.add_argument("--models", nargs="+", default=["gnmt", "transformer"])
    parser.add_argument("--csv", type=Path, default=Path("docs/convergence/same_seed.csv"))
    parser.add_argument("--summary", type=Path, default=Path("docs/convergence/same_seed_summary.csv"))
    args = parser.parse_args(argv)
    rows = collect(args.store, args.models, args.scale)
    if not rows:
        parser.error(f"no same_seed_<model>_{args.scale}_* runs of {', '.join(args.models)} in {args.store}")
    table = summary(rows)
    write(args.csv, COLUMNS, rows)
    write(args.summary, SUMMARY, table)
    print(" | ".join(SUMMARY))
    for row in table:
        print(" | ".join(str(row[c]) for c in SUMMARY))
    print(f"{len(rows)} runs -> {args.csv}, {args.summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
