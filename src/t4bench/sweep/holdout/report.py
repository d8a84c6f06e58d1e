"""The held-out comparison of the two arms (tuned, reference) and its outputs: per-arm statistics of
epochs-to-converge with non-converged runs censored at max_epochs, the tuned/reference ratios with
bootstrap CIs and the tests (computed in stats.py with scipy), the goal check as PASS/FAIL lines,
validation.{md,csv,json} in the sweep's folder and the metrics/artifacts on the validation parent
run. holdout/runs.py calls build_report and publish after the arms' runs are in."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from t4bench.sweep import stats
from t4bench.tracking import names

CENSORING = (
    "a run that did not converge enters the epoch statistics as its max_epochs (right-censored: "
    "its true value is larger, so means and stds that include it are lower bounds)"
)
ROWS = ("n", "n_converged", "converged_fraction", "mean", "std", "olympic_mean", "min", "max")


def build_report(
    model: str,
    study: str,
    seeds: list[int],
    best: Mapping[str, Any],
    arms: Mapping[str, Mapping[str, Any]],
    default_max_epochs: float,
) -> dict[str, Any]:
    """Both arms' per-seed epochs (censored), their statistics, the comparison and the goal check."""
    from t4bench.sweep.summary import summarize

    out: dict[str, Any] = {
        "model": model,
        "study": study,
        "seeds": seeds,
        "best": dict(best),
        "censoring": CENSORING,
        "arms": {},
    }
    epochs: dict[str, list[float]] = {}
    for label, arm in arms.items():
        results = list(arm["results"])
        epochs[label] = stats.censored_epochs(results, default_max_epochs)
        n_conv = sum(1 for r in results if str(r.get("outcome")) == "converged")
        out["arms"][label] = {
            "sweep_id": arm["sweep_id"],
            "run_id": arm.get("run_id"),
            "overrides": list(arm["overrides"]),
            "epochs": epochs[label],
            "stats": stats.arm_stats(epochs[label], n_conv),
            **summarize(results),
        }
    if min(len(v) for v in epochs.values()) >= 2:
        out["comparison"] = stats.compare_arms(epochs["tuned"], epochs["reference"])
        out["goal"] = stats.goal_check(out["comparison"])
    return out


def _f(value: Any, digits: int = 3) -> str:
    return "nan" if value is None or not math.isfinite(float(value)) else f"{float(value):.{digits}f}"


def goal_lines(report: Mapping[str, Any]) -> list[str]:
    """`goal <model> mean: PASS (...)`, `... std: ...`, `goal <model>: PASS|FAIL`."""
    model = report["model"]
    if "goal" not in report:
        return [f"goal {model}: FAIL (fewer than 2 runs in an arm: no comparison)"]
    lines = []
    for key, bound, what in (("mean", stats.GOAL_MEAN_RATIO, "30%"), ("std", stats.GOAL_STD_RATIO, "50%")):
        r = report["comparison"][f"{key}_ratio"]
        lines.append(
            f"goal {model} {key}: {'PASS' if report['goal'][key] else 'FAIL'} (tuned/reference "
            f"{_f(r['value'])}, 95% CI [{_f(r['ci_low'])}, {_f(r['ci_high'])}]; needs <= {bound:.2f} "
            f"({what} lower) with the CI below 1.0)"
        )
    lines.append(f"goal {model}: {'PASS' if report['goal']['pass'] else 'FAIL'}")
    return lines


def render(report: Mapping[str, Any]) -> str:
    """Markdown: the per-arm table, ratios with CIs, tests, goal lines, per-seed epochs."""
    arms, comp = report["arms"], report.get("comparison", {})
    best = report["best"]
    lines = [
        f"# Held-out validation: {report['study']} ({report['model']})",
        "",
        f"Seeds {report['seeds'][0]}..{report['seeds'][-1]} ({len(report['seeds'])}), never used while tuning. "
        f"Tuned = trial {best['trial']}: `{' '.join(arms['tuned']['overrides'])}`; reference = the config's values.",
        f"Epochs-to-converge; {CENSORING}.",
        "",
        "| | tuned | reference | tuned/reference | 95% CI |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in ROWS:
        ratio = comp.get(f"{row}_ratio") if row in ("mean", "std") else None
        cells = [_f(arms[a]["stats"][row], 0 if row in ("n", "n_converged") else 3) for a in ("tuned", "reference")]
        extra = [_f(ratio["value"]), f"[{_f(ratio['ci_low'])}, {_f(ratio['ci_high'])}]"] if ratio else ["", ""]
        lines.append(f"| {row} | {' | '.join(cells)} | {' | '.join(extra)} |")
    if comp:
        lines += [
            "",
            f"Brown-Forsythe (Levene, center=median) p = {_f(comp['brown_forsythe']['p_value'], 4)}; "
            f"Mann-Whitney U (two-sided) p = {_f(comp['mann_whitney']['p_value'], 4)}; "
            f"bootstrap CIs: {comp['mean_ratio']['ci_method']} / {comp['std_ratio']['ci_method']}.",
        ]
    lines += ["", *(f"    {g}" for g in goal_lines(report)), "", "Per seed (seed:epochs, - = did not converge):"]
    for label in ("tuned", "reference"):
        runs = arms[label]["runs"]
        per = " ".join(
            f"{r['seed']}:{'-' if r.get('outcome') != 'converged' else format(float(r['epochs_to_converge']), 'g')}"
            for r in runs
        )
        lines.append(f"- {label}: {per}")
    return "\n".join(lines) + "\n"


def write_csv(report: Mapping[str, Any], path: Path) -> None:
    comp = report.get("comparison", {})
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["statistic", "tuned", "reference", "ratio", "ci_low", "ci_high"])
        for row in ROWS:
            ratio = comp.get(f"{row}_ratio") if row in ("mean", "std") else None
            writer.writerow(
                [
                    row,
                    report["arms"]["tuned"]["stats"][row],
                    report["arms"]["reference"]["stats"][row],
                    *((ratio["value"], ratio["ci_low"], ratio["ci_high"]) if ratio else ("", "", "")),
                ]
            )


def metrics(report: Mapping[str, Any]) -> dict[str, float]:
    out = {f"{label}_epochs_{k}": v for label, arm in report["arms"].items() for k, v in arm["stats"].items()}
    comp = report.get("comparison")
    if comp:
        for key in ("mean_ratio", "std_ratio"):
            out.update({f"{key}{'' if k == 'value' else '_' + k}": v for k, v in comp[key].items() if k != "ci_method"})
        out["brown_forsythe_p"] = comp["brown_forsythe"]["p_value"]
        out["mann_whitney_p"] = comp["mann_whitney"]["p_value"]
        out["goal_pass"] = float(report["goal"]["pass"])
    return out


def publish(report: Mapping[str, Any], out_dir: Path, mlflow: Any, parent_id: str, sweep_parent: str | None) -> str:
    """Write validation.{md,csv,json} into the sweep's folder and log them and the metrics on the
    validation parent run (the headline means/stds also on the sweep's parent); returns the text
    to print."""
    from t4bench.sweep.summary import _json_safe
    from t4bench.tracking import sweep_layout

    out_dir.mkdir(parents=True, exist_ok=True)
    text = render(report)
    paths = [out_dir / "validation.md", out_dir / "validation.csv", out_dir / "validation.json"]
    paths[0].write_text(text)
    write_csv(report, paths[1])
    paths[2].write_text(json.dumps(_json_safe(dict(report)), indent=2, default=str))
    values = metrics(report)
    sweep_layout.log_metrics(mlflow, parent_id, values)
    if "goal" in report:
        sweep_layout.set_tags(mlflow, parent_id, {names.GOAL: "PASS" if report["goal"]["pass"] else "FAIL"})
    for path in paths:
        mlflow.log_artifact(parent_id, str(path))
    if sweep_parent:
        keys = ("tuned_epochs_mean", "tuned_epochs_std", "reference_epochs_mean", "reference_epochs_std")
        sweep_layout.log_metrics(mlflow, sweep_parent, {f"validation_{k}": values[k] for k in keys})
    return text
