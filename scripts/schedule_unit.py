"""The schedule-unit experiment's table and plot from its MLflow store (scripts/gpu/schedule_unit.sh).

    python scripts/schedule_unit.py --store sqlite:///multirun/schedule_unit/mlflow.db \
        --csv docs/convergence/schedule_unit.csv --plot docs/convergence/schedule_unit.png
    python scripts/schedule_unit.py --rows A.csv B.csv --csv both.csv --summary S.csv --plot P.png
        # the rows of earlier CSVs (stores made by separate calls), joined: no store needed

CSV: one row per run (model, N, unit, seed, epochs_to_converge, outcome); N is the run's
t4bench.emulated_world_size tag (1 where it has none: no emulation). Plot: mean epochs-to-converge
(converged runs; bars: std) against N, one panel per model, one line per schedule unit."""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from t4bench.tracking import names
from t4bench.tracking.tags import run_tags

COLUMNS = ["model", "N", "unit", "seed", "epochs_to_converge", "outcome"]


def collect(store: str, models: list[str], scale: str) -> list[dict[str, Any]]:
    client = MlflowClient(store)
    rows = []
    for model in models:
        experiment = client.get_experiment_by_name(f"t4bench-{model}")
        if experiment is None:
            continue
        sweep = f"schedule_unit_{model}_{scale}"  # and the _<stamp>_<i> ids of later calls' PARTS
        for run in client.search_runs(
            [experiment.experiment_id], f"tags.`{names.SWEEP_ID}` LIKE '{sweep}%'", max_results=50_000
        ):
            if names.SEED not in run.data.tags:  # the sweep's parent run
                continue
            tags = run_tags(client, run)  # emulated_world_size is in the run's run_tags.json
            rows.append(
                {
                    "start": run.info.start_time,
                    "model": model,
                    "N": int(tags.get(names.EMULATED_WORLD_SIZE, 1)),
                    "unit": run.data.params.get("model.schedule.unit", ""),
                    "seed": int(tags[names.SEED]),
                    "epochs_to_converge": run.data.metrics.get(names.EPOCHS_TO_CONVERGE, math.nan),
                    "outcome": tags.get(names.OUTCOME, ""),
                }
            )
    return sorted(latest_outcome(rows), key=lambda r: (r["model"], r["unit"], r["N"], r["seed"]))


def latest_outcome(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, N, unit, seed): a run that a call's time limit killed was run again by
    a later call (scripts/gpu/schedule_unit.sh PARTS), and that run's outcome is the one that counts."""
    kept: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["outcome"] != "killed", r["start"])):
        kept[(row["model"], row["N"], row["unit"], row["seed"])] = row  # the last finished run wins
    return [{k: v for k, v in row.items() if k != "start"} for row in kept.values()]


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, unit and N: runs, converged, mean/std of the converged runs' epochs-to-converge (a
    run that did not converge is only counted: it needed more than max_epochs, so that mean is a
    lower bound), and the mean's ratio to N=1's of the same unit with a 95% bootstrap CI (scipy,
    percentile: 5 seeds per cell)."""
    import numpy as np
    from scipy.stats import bootstrap

    def ratio(a: Any, b: Any, axis: int = -1) -> Any:
        return np.mean(a, axis=axis) / np.mean(b, axis=axis)

    out = []
    for model, unit in sorted({(r["model"], r["unit"]) for r in rows}):
        cells = {
            n: np.array([r["epochs_to_converge"] for r in rows if (r["model"], r["unit"], r["N"]) == (model, unit, n)])
            for n in sorted({r["N"] for r in rows if (r["model"], r["unit"]) == (model, unit)})
        }
        base = cells[min(cells)]
        base = base[~np.isnan(base)]
        for n, values in cells.items():
            done = values[~np.isnan(values)]
            mean = float(np.mean(done)) if len(done) else math.nan
            std = float(np.std(done, ddof=1)) if len(done) > 1 else math.nan
            row = {"model": model, "unit": unit, "N": n, "runs": len(values), "converged": len(done),
                   "mean": round(mean, 3), "std": round(std, 3),
                   "ratio_to_n1": round(mean / float(np.mean(base)), 3) if len(base) else math.nan,
                   "ci_low": "", "ci_high": ""}  # fmt: skip
            if n != min(cells) and len(done) > 1 and len(base) > 1:
                ci = bootstrap((done, base), ratio, vectorized=True, method="percentile", random_state=0)
                row["ci_low"], row["ci_high"] = (round(float(x), 3) for x in ci.confidence_interval)
            out.append(row)
    return out


def plot(table: list[dict[str, Any]], path: Path) -> None:
    """`summary`'s mean ± std of the converged runs against N, one panel per model, one line per unit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in table})
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        for unit in sorted({r["unit"] for r in table if r["model"] == model}):
            cells = sorted((r for r in table if (r["model"], r["unit"]) == (model, unit)), key=lambda r: r["N"])
            missed = sum(r["runs"] - r["converged"] for r in cells)
            label = f"unit={unit}" + (f" ({missed} not converged, left out)" if missed else "")
            stds = [0.0 if math.isnan(r["std"]) else r["std"] for r in cells]  # one converged run: no bar
            ax.errorbar(
                [r["N"] for r in cells], [r["mean"] for r in cells], yerr=stds, marker="o", capsize=3, label=label
            )
        ax.set(
            title=model, xlabel="emulated GPUs N (global batch = N x batch)", ylabel="epochs to converge (mean ± std)"
        )
        ax.set_xticks(sorted({r["N"] for r in table}))
        ax.legend(loc="upper left", fontsize="small")  # above N=1-2, where the lines are low
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def read_rows(paths: list[Path], models: list[str]) -> list[dict[str, Any]]:
    """The rows of per-run CSVs `--csv` wrote, typed as `collect` makes them, in its order."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["model"] in models:
                    rows.append({**row, "N": int(row["N"]), "seed": int(row["seed"]),
                                 "epochs_to_converge": float(row["epochs_to_converge"] or math.nan)})  # fmt: skip
    return sorted(rows, key=lambda r: (r["model"], r["unit"], r["N"], r["seed"]))


def write_csv(path: Path, rows: list[dict[str, Any]], fields: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path} ({len(rows)} rows)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", help="MLflow tracking URI of the experiment's runs")
    source.add_argument("--rows", type=Path, nargs="+", help="per-run CSVs this script wrote (joined)")
    parser.add_argument("--models", nargs="+", default=["gnmt", "transformer"])
    parser.add_argument("--scale", default="ding")
    parser.add_argument("--csv", type=Path, required=True)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--summary", type=Path, default=None, help="per model/unit/N statistics CSV")
    args = parser.parse_args()
    rows = collect(args.store, args.models, args.scale) if args.store else read_rows(args.rows, args.models)
    if not rows:
        raise SystemExit(f"no schedule-unit runs in {args.store or ' '.join(map(str, args.rows))}")
    write_csv(args.csv, rows, COLUMNS)
    table = summary(rows)
    if args.summary is not None:
        write_csv(args.summary, table, list(table[0]))
    if args.plot is not None:
        plot(table, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
