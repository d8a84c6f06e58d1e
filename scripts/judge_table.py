"""Per-seed epochs-to-converge of two arms as a CSV, and their comparison with the held-out report's own
statistics (t4bench.sweep.stats, as t4bench.sweep.holdout.report and scripts/compare_arms.py use them):
per-arm n, converged, mean ± std; candidate/baseline ratios of mean and std with bootstrap 95% CIs (BCa),
Brown-Forsythe and Mann-Whitney p, the goal (mean ≤ 0.70×, std ≤ 0.50×, each CI below 1.0). A run that
did not converge enters at --max-epochs (right-censored).

    # from scripts/gpu/arms.sh logs: "- tuned:" lines are CANDIDATE's runs, "- reference:" BASELINE's
    python scripts/judge_table.py seeds OUT.csv --log SET LOG CANDIDATE BASELINE [--log ...]
    # summary.{csv,md} (and a strip/box figure of one comparison) from seeds.csv
    python scripts/judge_table.py summary seeds.csv OUT_DIR --compare SET[+SET]:CANDIDATE/BASELINE \
        [--compare ...] [--figure SET[+SET]:CANDIDATE/BASELINE] [--max-epochs 30] [--note TEXT ...]
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path
from typing import Any

from t4bench.sweep import stats

COLUMNS = ("set", "seed", "arm", "epochs_to_converge", "converged")


def read_log(path: Path, set_name: str, candidate: str, baseline: str) -> list[dict[str, str]]:
    """Rows from a report's per-seed lines (`- tuned: 9000:8.5 9001:- ...`; `-`: did not converge)."""
    rows, pattern = [], re.compile(r"^\s*- (tuned|reference): (.*)$", re.MULTILINE)
    for match in pattern.finditer(path.read_text()):
        arm = candidate if match.group(1) == "tuned" else baseline
        for item in match.group(2).split():
            seed, value = item.split(":")
            done = value != "-"
            rows.append(dict(zip(COLUMNS, (set_name, seed, arm, value if done else "", str(int(done))), strict=True)))
    return rows


def arm_values(rows: list[dict[str, str]], sets: list[str], arm: str, max_epochs: float) -> tuple[list[float], int]:
    """One arm's censored epochs over the named sets (in seed order) and how many converged."""
    picked = sorted((r for r in rows if r["set"] in sets and r["arm"] == arm), key=lambda r: int(r["seed"]))
    res = [{"epochs_to_converge": float(r["epochs_to_converge"] or "nan"), "converged": r["converged"]} for r in picked]
    return stats.censored_epochs(res, max_epochs), sum(r["converged"] == "1" for r in picked)


def compare(rows: list[dict[str, str]], spec: str, max_epochs: float) -> dict[str, Any]:
    """SET[+SET]:CANDIDATE/BASELINE -> per-arm statistics, ratios with CIs, tests, goal (stats.*)."""
    sets_text, (candidate, baseline) = spec.split(":")[0], spec.split(":")[1].split("/")
    out: dict[str, Any] = {"set": sets_text, "candidate": candidate, "baseline": baseline}
    values, sets = {}, sets_text.split("+")
    for role, arm in (("candidate", candidate), ("baseline", baseline)):
        values[role], n_conv = arm_values(rows, sets, arm, max_epochs)
        arm_stats = stats.arm_stats(values[role], n_conv)
        out.update({f"{role}_{k}": arm_stats[k] for k in ("n", "n_converged", "mean", "std")})
    comp = stats.compare_arms(values["candidate"], values["baseline"])
    for key in ("mean_ratio", "std_ratio"):
        out.update({key: comp[key]["value"], **{f"{key}_{k}": comp[key][k] for k in ("ci_low", "ci_high")}})
    out.update({f"{k}_p": comp[k]["p_value"] for k in ("brown_forsythe", "mann_whitney")})
    out.update({f"goal_{k}": v for k, v in stats.goal_check(comp).items() if k != "pass"}, values=values)
    return out


def markdown(results: list[dict[str, Any]], max_epochs: float, notes: list[str]) -> str:
    lines = [
        *(f"{note}\n" for note in notes),
        "| seeds | arms (candidate / baseline) | n per arm | converged | candidate epochs | baseline epochs "
        "| mean ratio [95% CI] | std ratio [95% CI] | Brown–Forsythe p | Mann–Whitney p | goal mean / std |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        cells = [r["set"].replace("+", " + "), f"`{r['candidate']}` / `{r['baseline']}`", f"{r['candidate_n']:.0f}"]
        cells.append(f"{r['candidate_n_converged']:.0f} / {r['baseline_n_converged']:.0f}")
        cells += [f"{r[f'{role}_mean']:.3f} ± {r[f'{role}_std']:.3f}" for role in ("candidate", "baseline")]
        cells += [f"{r[k]:.3f} [{r[k + '_ci_low']:.3f}, {r[k + '_ci_high']:.3f}]" for k in ("mean_ratio", "std_ratio")]
        cells += [f"{r['brown_forsythe_p']:.2g}", f"{r['mann_whitney_p']:.2g}"]
        cells.append(" / ".join("met" if r[f"goal_{k}"] else "not met" for k in ("mean", "std")))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Epochs-to-converge (std: ddof=1); ratios candidate/baseline, bootstrap 95% CIs (scipy.stats.bootstrap, BCa, "
        "9999 resamples, rng seed 0); Brown–Forsythe = Levene, center=median; Mann–Whitney U two-sided; goal: mean "
        f"ratio ≤ 0.70, std ratio ≤ 0.50, each CI below 1.0. A run not converged enters at {max_epochs:g} epochs.",
    ]
    return "\n".join(lines) + "\n"


def figure(result: dict[str, Any], rows: list[dict[str, str]], path: Path, max_epochs: float) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    sets = result["set"].split("+")
    fig, ax = plt.subplots(figsize=(6, 4.5))
    arms = [result["baseline"], result["candidate"]]
    vals = result["values"]
    ax.boxplot([vals["baseline"], vals["candidate"]], widths=0.5, showfliers=False, medianprops={"color": "k"})
    rng = np.random.default_rng(0)
    for i, arm in enumerate(arms, start=1):
        for set_name, marker, colour in zip(sets, "os", ("tab:blue", "tab:orange"), strict=False):
            ys = arm_values(rows, [set_name], arm, max_epochs)[0]
            label = f"one dot per seed, {set_name}" if i == 1 else "_nolegend_"
            xs = i + rng.uniform(-0.15, 0.15, len(ys))
            ax.scatter(xs, ys, marker=marker, color=colour, alpha=0.7, s=22, label=label)
    ax.plot([], [], color="k", label="box (all the arm's seeds): quartiles, median;\nwhiskers: extremes within 1.5 IQR")
    ax.legend(fontsize=7, loc="upper right")
    ax.set_xticks(
        [1, 2], [f"{arm} ({len(vals[role])} seeds)" for arm, role in zip(arms, ("baseline", "candidate"), strict=True)]
    )
    ax.set_ylabel("epochs to converge (dots jittered sideways)")
    ax.set_title(f"GNMT scale=ding, {' + '.join(sets)}: epochs to converge per seed", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    seeds = sub.add_parser("seeds")
    seeds.add_argument("out", type=Path)
    seeds.add_argument("--log", nargs=4, action="append", required=True, metavar=("SET", "LOG", "CAND", "BASE"))
    summ = sub.add_parser("summary")
    summ.add_argument("seeds_csv", type=Path)
    summ.add_argument("out_dir", type=Path)
    summ.add_argument("--compare", action="append", required=True)
    summ.add_argument("--figure")
    summ.add_argument("--max-epochs", type=float, default=30.0)
    summ.add_argument("--note", action="append", help="a paragraph put above the table (date, GPU, commands)")
    args = parser.parse_args()
    if args.cmd == "seeds":
        rows = [row for set_name, log, cand, base in args.log for row in read_log(Path(log), set_name, cand, base)]
        with args.out.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, COLUMNS)
            writer.writeheader()
            writer.writerows(sorted(rows, key=lambda r: (r["set"], r["arm"], int(r["seed"]))))
        return
    with args.seeds_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    results = [compare(rows, spec, args.max_epochs) for spec in args.compare]
    with (args.out_dir / "summary.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, [k for k in results[0] if k != "values"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(results)
    text = markdown(results, args.max_epochs, args.note or [])
    (args.out_dir / "summary.md").write_text(text)
    print(text)
    if args.figure:  # the comparison already made for the table, when the figure's is one of them
        drawn = dict(zip(args.compare, results, strict=True)).get(args.figure) or compare(
            rows, args.figure, args.max_epochs
        )
        figure(drawn, rows, args.out_dir / "epochs.png", args.max_epochs)


if __name__ == "__main__":
    main()
