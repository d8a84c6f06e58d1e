"""Where a model's seed-to-seed spread comes from: the epochs-to-converge variance of a crossed seed
sweep split into the weights seed, the data seed, their pairing and the repeat (run-to-run noise),
each part's variance and share with a bootstrap CI (t4bench.report.seed_variance).

The sweep runs every `seed` (initial weights, dropout) with every `data_seed` (data order, NCF's
negatives), R times each; `+tracking.tags.repeat` only gives Hydra R distinct jobs of one pair:

    t4bench sweep model=ncf hparams=reference eval_every=0.25 'seed=range(7000,7004)' \\
        'data_seed=range(8000,8004)' '+tracking.tags.repeat=range(0,2)' tracking.sweep_id=ncf_ref_sources
    python -m t4bench.report.seed_sources --sweep-id reference=ncf_ref_sources \\
        --sweep-id tuned=ncf_tuned_sources --experiment t4bench-ncf --out docs/convergence/seed_sources/ncf_mini

A run that did not converge enters at its max_epochs (right-censored: the true value is larger, so
the parts it lands in are lower bounds); each is counted and named. Writes seed_sources.csv (one
row per arm and part), seed_sources_runs.csv (one row per run), seed_sources.md and
seed_sources.png into --out; prints the markdown.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from t4bench.errors import ArgumentParser, T4BenchError, one_line
from t4bench.report import seed_sources_output, seed_variance
from t4bench.report.seed_sources_output import Arm
from t4bench.sweep import stats
from t4bench.tracking import experiments, names

#: the user tag `+tracking.tags.repeat` as a logged param (no training code reads it)
REPEAT_PARAM = "tracking.tags.repeat"


def open_store(uri: str) -> Any:
    """A client of a tracking store that exists, checked read-only before MLflow opens it (MLflow
    would create its schema in a path that is not a store)."""
    from t4bench.tracking import store_probe as probe
    from t4bench.tracking.client import mlflow_client

    path = probe.sqlite_path(uri)
    if path is not None and not path.exists():
        raise T4BenchError(f"no tracking store at {uri} (set --tracking-uri or MLFLOW_TRACKING_URI)")
    probe.tracking(uri, must_exist=True, writes=False)
    return mlflow_client(uri)


def _int_param(params: dict[str, str], key: str) -> int | None:
    value = params.get(key, "None")
    return int(value) if value.lstrip("-").isdigit() else None


def sweep_runs(client: Any, exp_id: str, sweep_id: str) -> tuple[pd.DataFrame, list[str]]:
    """(one row per FINISHED training run of the sweep, the runs of it that did not finish). The
    repeat of a run is its place among the runs of its (seed, data_seed) pair, oldest first."""
    from t4bench.tracking import sweep_layout
    from t4bench.tracking.tags import run_tags

    found = sweep_layout.find_runs(client, exp_id, sweep_id, None)
    if not found:
        raise T4BenchError(f"no training runs with sweep id {sweep_id!r} in this experiment")
    unfinished = [f"{r.info.run_id} ({r.info.status})" for r in found if r.info.status != names.FINISHED]
    rows = []
    for run in found:
        if run.info.status != names.FINISHED:
            continue
        params = run.data.params
        result = sweep_layout.run_result(run)
        weights, data = _int_param(params, "seed"), _int_param(params, "data_seed")
        if weights is None or data is None:
            raise T4BenchError(
                f"run {run.info.run_id} of sweep {sweep_id!r} has seed={params.get('seed')} "
                f"data_seed={params.get('data_seed')}: with data_seed unset the data follow `seed`, so "
                "the two cannot be told apart; sweep data_seed as well (e.g. 'data_seed=range(8000,8004)')"
            )
        rows.append(
            {
                "run_id": run.info.run_id,
                "weights": weights,
                "data": data,
                "repeat_tag": params.get(REPEAT_PARAM, ""),
                "epochs": stats.censored_epochs([result], default_max_epochs=float("nan"))[0],
                "converged": result["outcome"] == names.OUTCOME_CONVERGED,
                "outcome": result["outcome"],
                "max_epochs": result["max_epochs"],
                "start_time": run.info.start_time or 0,
                "commit": run.data.tags.get(names.MLFLOW_GIT_COMMIT, ""),
                # t4bench's own tags are in the run's tag file (t4bench.tracking.tags.store_tags)
                "device": run_tags(client, run).get(names.DEVICE, ""),
                "settings": " ".join(
                    f"{key}={params[key]}"
                    for key in ("model.name", "scale.name", "hparams.name", "hw.name", "eval_every", "max_epochs")
                    if key in params
                ),
            }
        )
    table = pd.DataFrame(rows).sort_values(["weights", "data", "start_time"], kind="stable")
    table["repeat"] = table.groupby(["weights", "data"]).cumcount()
    return table.reset_index(drop=True), unfinished


def _about(client: Any, exp_id: str, sweep_id: str, runs: pd.DataFrame) -> dict[str, str]:
    from t4bench.tracking import sweep_layout
    from t4bench.tracking.tags import run_tags

    parents = sweep_layout.find_runs(client, exp_id, sweep_id, "parent")
    overrides = run_tags(client, parents[0]).get(names.SWEEP_OVERRIDES, "") if parents else ""
    return {
        "overrides": overrides,
        "commit": ", ".join(sorted({c[:10] for c in runs["commit"] if c})) or "unknown",
        "device": ", ".join(sorted({d for d in runs["device"] if d})) or "unknown",
        "settings": ", ".join(sorted(set(runs["settings"]))),
    }


def analyse(
    client: Any,
    exp_id: str,
    label: str,
    sweep_id: str,
    *,
    n_resamples: int = 999,
    seed: int = 0,
    only: tuple[set[int] | None, set[int] | None] = (None, None),
) -> Arm:
    """The split of one sweep; `only`: the weights seeds and data seeds to keep (None: all), e.g.
    the complete crossed part of a sweep still under way."""
    runs, unfinished = sweep_runs(client, exp_id, sweep_id)
    for column, keep in zip(("weights", "data"), only, strict=True):
        if keep is not None:
            runs = runs[runs[column].isin(keep)].reset_index(drop=True)
    try:
        cube = seed_variance.as_cube(runs)
    except T4BenchError as err:
        left = f"; runs that did not finish: {', '.join(unfinished[:8])}" if unfinished else ""
        raise T4BenchError(f"sweep {sweep_id!r}: {err}{left}") from None
    split = seed_variance.split(cube, n_resamples=n_resamples, seed=seed)
    return Arm(label, sweep_id, runs, split, _about(client, exp_id, sweep_id, runs))


def parse_sweep(text: str) -> tuple[str, str]:
    """`LABEL=SWEEP_ID` or `SWEEP_ID` (then labelled by itself)."""
    label, _, sweep_id = text.rpartition("=")
    if not sweep_id:
        raise T4BenchError(f"--sweep-id {text!r}: expected LABEL=SWEEP_ID or SWEEP_ID")
    return (label or sweep_id), sweep_id


def _int_set(text: str) -> set[int]:
    try:
        return {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def make_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="python -m t4bench.report.seed_sources",
        description=(__doc__ or "").split("\n\n")[0].replace("\n", " "),
    )
    parser.add_argument(
        "--sweep-id",
        action="append",
        required=True,
        metavar="[LABEL=]ID",
        help="a crossed seed sweep (repeatable: one arm each, e.g. reference=ID1 --sweep-id tuned=ID2)",
    )
    parser.add_argument("--experiment", default="t4bench-ncf", help="MLflow experiment (default: t4bench-ncf)")
    parser.add_argument("--tracking-uri", default=experiments.default_tracking_uri())
    parser.add_argument("--out", type=Path, default=None, help="folder for seed_sources.{csv,md,png}")
    parser.add_argument("--seeds", type=_int_set, default=None, help="only these weights seeds, e.g. 7000,7001")
    parser.add_argument("--data-seeds", type=_int_set, default=None, help="only these data seeds")
    parser.add_argument("--resamples", type=int, default=999, help="bootstrap resamples (default 999)")
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="the bootstrap's own RNG seed")
    return parser


def run(argv: Sequence[str] | None) -> str:
    args = make_parser().parse_args(argv)
    sweeps = [parse_sweep(text) for text in args.sweep_id]
    if args.resamples < 100:
        raise T4BenchError(f"--resamples {args.resamples}: at least 100 for a 95% interval")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise T4BenchError(f"--out {args.out}: not a folder")
    client = open_store(args.tracking_uri)
    exp = client.get_experiment_by_name(args.experiment)
    if exp is None:
        raise T4BenchError(f"no experiment {args.experiment!r} in {args.tracking_uri}")
    arms = [
        analyse(
            client,
            exp.experiment_id,
            label,
            sweep_id,
            n_resamples=args.resamples,
            seed=args.bootstrap_seed,
            only=(args.seeds, args.data_seeds),
        )
        for label, sweep_id in sweeps
    ]
    command = shlex.join(["python", "-m", "t4bench.report.seed_sources", *(sys.argv[1:] if argv is None else argv)])
    text = seed_sources_output.markdown(arms, args.experiment, command)
    if args.out is not None:
        seed_sources_output.write(arms, text, args.out)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")  # a dead server: one line soon
    text, status = one_line("", lambda: run(argv))
    if text is not None:
        print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
