"""Where a model's seed-to-seed spread comes from: three seed sweeps of the same settings (made by
scripts/ncf_seed_sources.sh), one varying `seed` only as usual (weights and data together), one
varying the initial weights only (`data_seed` fixed), one varying the data only (`seed` fixed).
Prints, and writes as markdown + CSV, each arm's epochs-to-converge distribution and its spread
against the `both` arm (std ratio with a bootstrap 95% CI, Brown-Forsythe), through the held-out
report's statistics (t4bench.sweep.stats).

    python scripts/seed_sources.py sqlite:///W/mlflow.db ncf BOTH_ID INIT_ID DATA_ID [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from t4bench.sweep import stats
from t4bench.tracking import sweep_layout
from t4bench.tracking.client import mlflow_client

ARMS = ("both", "init", "data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uri")
    parser.add_argument("model")
    parser.add_argument("sweep_ids", nargs=3, metavar="SWEEP_ID", help="the both, init and data sweeps")
    parser.add_argument("--out", type=Path, default=None, help="folder for seed_sources.{md,csv}")
    args = parser.parse_args()
    client = mlflow_client(args.uri, new_store=True)
    exp = sweep_layout.experiment_id(args.uri, f"t4bench-{args.model}")
    epochs: dict[str, list[float]] = {}
    rows = []
    for arm, sweep_id in zip(ARMS, args.sweep_ids, strict=True):
        results = sweep_layout.seed_results(client, exp, sweep_id)
        values = stats.censored_epochs(results, default_max_epochs=float("nan"))
        converged = sum(1 for r in results if r.get("outcome") == "converged")
        epochs[arm] = values
        row = {"arm": arm, "sweep_id": sweep_id, **stats.arm_stats(values, converged)}
        if arm != "both":
            comparison = stats.compare_arms(values, epochs["both"])
            ratio = comparison["std_ratio"]
            row |= {
                "std_ratio_vs_both": ratio["value"],
                "ci_low": ratio["ci_low"],
                "ci_high": ratio["ci_high"],
                "brown_forsythe_p": comparison["brown_forsythe"]["p_value"],
            }
        rows.append(row)
    fields = list(rows[-1])
    lines = [
        f"Seed sources of {args.model}: epochs-to-converge per arm (a run that did not converge enters as its"
        " max_epochs); std ratio against `both` with a BCa bootstrap 95% CI, Brown-Forsythe p.",
        "",
        "| arm | what varies | n | converged | mean | std | min | max | std / both (95% CI) | B-F p |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    varies = {"both": "weights and data", "init": "initial weights only", "data": "data order and negatives only"}
    for row in rows:
        ratio = p = ""
        if row["arm"] != "both":
            ratio = f"{row['std_ratio_vs_both']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
            p = f"{row['brown_forsythe_p']:.3g}"
        lines.append(
            f"| {row['arm']} | {varies[row['arm']]} | {row['n']:.0f} | {row['n_converged']:.0f} | {row['mean']:.3f} "
            f"| {row['std']:.3f} | {row['min']:.3f} | {row['max']:.3f} | {ratio} | {p} |"
        )
    lines += ["", "Per run (epochs):"] + [f"- {arm}: " + " ".join(f"{v:g}" for v in epochs[arm]) for arm in ARMS]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "seed_sources.md").write_text(text + "\n")
        with (args.out / "seed_sources.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields, restval="")
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
