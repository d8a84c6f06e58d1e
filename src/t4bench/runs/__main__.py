"""`python -m t4bench.runs repair [--tracking-uri URI] [--experiment NAME] [--dry-run]`: mark the
MLflow runs left RUNNING by a process that is gone KILLED (`t4bench.runs.liveness.repair`); also
`t4bench runs ...`. Bad input is one line `t4bench: error: ...` and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from t4bench import experiments
from t4bench.errors import ArgumentParser, T4BenchError, one_line
from t4bench.runs.liveness import STALE_INTERVALS, repair


def _repair_command(args: argparse.Namespace) -> int:
    from t4bench.preflight import storage as probe

    probe.tracking(args.tracking_uri)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(args.tracking_uri)
    ids = None
    if args.experiment:
        ids = []
        for name in args.experiment:
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise T4BenchError(f"--experiment {name}: no such experiment in {args.tracking_uri}")
            ids.append(experiment.experiment_id)
    verdicts = repair(client, ids, dry_run=args.dry_run, stale_intervals=args.stale_intervals)
    for verdict in verdicts:
        text = verdict.describe()
        print(text.replace("marked KILLED", "would be marked KILLED") if args.dry_run else text)
    print(f"{len(verdicts)} stale run(s) {'found' if args.dry_run else 'marked KILLED'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m t4bench.runs", description="MLflow runs left RUNNING")
    commands = parser.add_subparsers(dest="command", required=True)
    fix = commands.add_parser("repair", help="mark RUNNING runs whose process is gone KILLED")
    fix.add_argument(
        "--tracking-uri",
        default=experiments.default_tracking_uri(),
        help="default: $MLFLOW_TRACKING_URI or ./mlflow.db",
    )
    fix.add_argument("--experiment", action="append", help="only this experiment (repeatable; default: all)")
    fix.add_argument("--dry-run", action="store_true", help="list them, change nothing")
    fix.add_argument(
        "--stale-intervals",
        type=int,
        default=STALE_INTERVALS,
        help="missed heartbeats before a run on another host counts as gone",
    )
    args = parser.parse_args(argv)
    result, status = one_line("", lambda: _repair_command(args), args.tracking_uri)
    return result if result is not None else status


if __name__ == "__main__":
    sys.exit(main())
