"""Held-out validation of a robust sweep: the best trial's hyperparameters ("tuned") and the
reference ones (the config's own values), each re-run on seeds the sweep never used, compared with
statistics.

    python -m t4bench.sweep.holdout --sweep-dir multirun/sweeps/ncf_stable [--seeds 100-119]

It reads the study's recorded command-line overrides from the storage and runs

    python -m t4bench --multirun <the sweep's overrides> hydra.sweeper.validate_seeds=[...]

so the runs are composed exactly as the sweep's trials were, with the Optuna sweeper launching the
validation jobs (t4bench.sweep.holdout.runs) instead of trials. Seeds the sweep tuned on are refused.

The comparison (holdout/report.py): per arm n, converged fraction, mean, std, olympic
mean of epochs-to-converge, where a run that did not converge enters as its max_epochs (a right-
censored lower bound: said in the report); tuned/reference ratios of mean and std with bootstrap
95% CIs, Brown-Forsythe and Mann-Whitney p-values (scipy, in stats.py); the goal check as PASS/FAIL
lines. Written to <sweep-dir>/validation.{md,csv,json} and logged on the validation parent run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from t4bench.errors import ArgumentParser

PROG = "python -m t4bench.sweep.holdout"


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


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    parser = ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
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
        print(f"t4bench: error: {err}", file=sys.stderr)
        return 2
    print(" ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    return subprocess.run(cmd, env=os.environ.copy()).returncode


if __name__ == "__main__":
    sys.exit(main())
