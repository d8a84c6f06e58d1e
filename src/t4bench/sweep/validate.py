"""Held-out validation of a robust sweep: the best trial's hyperparameters ("tuned") and the
reference ones (the config's own values), each re-run on seeds the sweep never used, compared with
statistics.

    python -m t4bench.sweep.validate --sweep-dir multirun/sweeps/ncf_stable [--seeds 100-119]

It reads the study's recorded command-line overrides from the storage and runs

    python -m t4bench --multirun <the sweep's overrides> hydra.sweeper.validate_seeds=[...]

so the runs are composed exactly as the sweep's trials were, with the Optuna sweeper launching the
validation jobs (t4bench.sweep.holdout) instead of trials. Seeds the sweep tuned on are refused.

The comparison (build_report / publish, here): per arm n, converged fraction, mean, std, olympic
mean of epochs-to-converge, where a run that did not converge enters as its max_epochs (a right-
censored lower bound: said in the report); tuned/reference ratios of mean and std with bootstrap
95% CIs, Brown-Forsythe and Mann-Whitney p-values (scipy, in stats.py); the goal check as PASS/FAIL
lines. Written to <sweep-dir>/validation.{md,csv,json} and logged on the validation parent run.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from t4bench.sweep import stats

PROG = "python -m t4bench.sweep.validate"


class ValidationError(Exception):
    """Bad input: reported as one line, exit status 2."""


def parse_seeds(text: str) -> list[int]:
    """'100-109' or '100,101,105' or '100-104,200'."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = part.split("-", 1)
                seeds.extend(range(int(lo), int(hi) + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise ValidationError(f"--seeds {text!r}: expected e.g. 100-109 or 100,101,105") from None
    if not seeds:
        raise ValidationError(f"--seeds {text!r} names no seed")
    return seeds


def command(storage: str, study_name: str | None, seeds: Sequence[int], extra: Sequence[str]) -> list[str]:
    import optuna

    from t4bench.sweep.storage import normalize, open_storage

    store = open_storage(storage)
    names = optuna.get_all_study_names(store)
    if study_name is None:
        if len(names) != 1:
            raise ValidationError(f"{storage} holds studies {names}: name one with --study")
        study_name = names[0]
    if study_name not in names:
        raise ValidationError(f"no study {study_name!r} in {storage} (it holds {names})")
    study = optuna.load_study(study_name=study_name, storage=store)
    attrs = study.user_attrs
    tuned_on = sorted(set(seeds) & {int(s) for s in attrs.get("t4bench_seeds", [])})
    if tuned_on:
        raise ValidationError(f"--seeds {tuned_on} were used while tuning study {study_name!r}: choose held-out seeds")
    task = list(attrs.get("t4bench_task_overrides", []))
    hydra = [
        o
        for o in attrs.get("t4bench_hydra_overrides", [])
        if not o.startswith(("hydra.sweeper.storage=", "hydra.sweeper.study_name="))
    ]
    if not any(o.startswith("hydra/sweeper=") for o in hydra) and not any(o.startswith("+sweeps=") for o in task):
        hydra.append("hydra/sweeper=optuna")
    pinned = [f"hydra.sweeper.study_name={study_name}", f"hydra.sweeper.storage='{normalize(storage)}'"]
    return [
        sys.executable,
        "-m",
        "t4bench",
        "--multirun",
        *task,
        *hydra,
        *pinned,
        f"hydra.sweeper.validate_seeds=[{','.join(map(str, seeds))}]",
        *extra,
    ]


# ---- the comparison ------------------------------------------------------------------------------
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
    from t4bench.sweep import mlflow_runs
    from t4bench.sweep.summary import _json_safe

    out_dir.mkdir(parents=True, exist_ok=True)
    text = render(report)
    paths = [out_dir / "validation.md", out_dir / "validation.csv", out_dir / "validation.json"]
    paths[0].write_text(text)
    write_csv(report, paths[1])
    paths[2].write_text(json.dumps(_json_safe(dict(report)), indent=2, default=str))
    values = metrics(report)
    mlflow_runs.log_metrics(mlflow, parent_id, values)
    if "goal" in report:
        mlflow_runs.set_tags(mlflow, parent_id, {"t4bench.goal": "PASS" if report["goal"]["pass"] else "FAIL"})
    for path in paths:
        mlflow.log_artifact(parent_id, str(path))
    if sweep_parent:
        keys = ("tuned_epochs_mean", "tuned_epochs_std", "reference_epochs_mean", "reference_epochs_std")
        mlflow_runs.log_metrics(mlflow, sweep_parent, {f"validation_{k}": values[k] for k in keys})
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--sweep-dir", type=Path, help="the sweep's hydra.sweep.dir (storage: <dir>/optuna.journal)")
    parser.add_argument("--storage", help="the study's storage (journal path or SQLAlchemy URL) instead of --sweep-dir")
    parser.add_argument("--study", help="study name (default: the only study in the storage)")
    parser.add_argument("--seeds", default="100-119", help="held-out seeds, e.g. 100-119 (default) or 100,101")
    parser.add_argument("--dry-run", action="store_true", help="print the command only")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every validation run")
    args = parser.parse_args(argv)
    try:
        if args.storage is None:
            if args.sweep_dir is None:
                raise ValidationError("give --sweep-dir or --storage")
            args.storage = str(args.sweep_dir / "optuna.journal")
            if not Path(args.storage).exists():
                raise ValidationError(f"no study journal at {args.storage}")
        cmd = command(args.storage, args.study, parse_seeds(args.seeds), args.overrides)
    except ValidationError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    print(" ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    return subprocess.run(cmd, env=os.environ.copy()).returncode


if __name__ == "__main__":
    sys.exit(main())
