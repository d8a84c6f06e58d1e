"""`python -m t4bench.runs list|repair [--tracking-uri URI] [--experiment NAME]` (also `t4bench runs
...`): the MLflow runs still RUNNING, and whether the process of each is alive (`list`); those whose
process is gone marked KILLED (`repair`, `t4bench.tracking.liveness.repair`). Bad input is one line
`t4bench: error: ...` and exit status 2."""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from t4bench.errors import ArgumentParser, T4BenchError, one_line
from t4bench.tracking import experiments, names
from t4bench.tracking.client import mlflow_client
from t4bench.tracking.liveness import STALE_INTERVALS, repair, stale_reason


def _client_and_experiments(args: argparse.Namespace, writes: bool) -> tuple[Any, list[str] | None]:
    """The store's client (the store checked first: a dead server, a damaged or missing file is
    one line; a missing store is not made) and the ids of --experiment (None: every experiment)."""
    from t4bench.tracking import store_probe as probe

    probe.tracking(args.tracking_uri, must_exist=True, writes=writes)
    client = mlflow_client(args.tracking_uri)
    if not args.experiment:
        return client, None
    ids = []
    for name in args.experiment:
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise T4BenchError(f"--experiment {name}: no such experiment in {args.tracking_uri}")
        ids.append(experiment.experiment_id)
    return client, ids


def _state(tags: dict[str, str], now: float, host: str, stale_intervals: int) -> str:
    """What `repair` would make of a RUNNING run with these tags, in words."""
    beat = tags.get(names.HEARTBEAT, "")
    if not beat.isdigit():
        return "no heartbeat (not a t4bench run, or one from before heartbeats): left alone"
    where = f"{tags.get(names.HOST, '?')} pid {tags.get(names.PID, '?')}, heartbeat {now - int(beat):.0f} s ago"
    reason = stale_reason(tags, now, host, stale_intervals)
    return f"{where}: alive" if reason is None else f"{where}: gone ({reason})"


def _list_command(args: argparse.Namespace) -> int:
    from t4bench.tracking import search

    client, ids = _client_and_experiments(args, writes=False)
    ids = [e.experiment_id for e in client.search_experiments()] if ids is None else ids
    host, now = socket.gethostname(), time.time()
    running = list(search.all_runs(client, ids, f"attributes.status = '{names.RUNNING}'")) if ids else []
    gone = 0
    for run in running:
        state = _state(run.data.tags, now, host, args.stale_intervals)
        gone += ": gone (" in state
        print(f"run {run.info.run_id} ({run.info.run_name or ''}, experiment {run.info.experiment_id}): {state}")
    hint = "; `t4bench runs repair` marks those KILLED" if gone else ""
    print(f"{len(running)} run(s) RUNNING, {gone} with their process gone{hint}")
    return 0


def _repair_command(args: argparse.Namespace) -> int:
    client, ids = _client_and_experiments(args, writes=not args.dry_run)
    verdicts = repair(client, ids, dry_run=args.dry_run, stale_intervals=args.stale_intervals)
    for verdict in verdicts:
        text = verdict.describe()
        print(text.replace("marked KILLED", "would be marked KILLED") if args.dry_run else text)
    print(f"{len(verdicts)} stale run(s) {'found' if args.dry_run else 'marked KILLED'}")
    return 0


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        default=experiments.default_tracking_uri(),
        help="default: $MLFLOW_TRACKING_URI or ./mlflow.db",
    )
    parser.add_argument("--experiment", action="append", help="only this experiment (repeatable; default: all)")
    parser.add_argument(
        "--stale-intervals",
        type=int,
        default=STALE_INTERVALS,
        help="missed heartbeats before a run on another host counts as gone",
    )


def main(argv: Sequence[str] | None = None, prog: str = "python -m t4bench.runs") -> int:
    parser = ArgumentParser(prog=prog, description="MLflow runs left RUNNING by a process that is gone")
    commands = parser.add_subparsers(dest="command", required=True)
    shown = commands.add_parser("list", help="the RUNNING runs and whether each one's process is alive")
    _store_options(shown)
    shown.set_defaults(handler=_list_command)
    fix = commands.add_parser("repair", help="mark RUNNING runs whose process is gone KILLED")
    _store_options(fix)
    fix.add_argument("--dry-run", action="store_true", help="list them, change nothing")
    fix.set_defaults(handler=_repair_command)
    args = parser.parse_args(argv)
    result, status = one_line("", lambda: args.handler(args), args.tracking_uri)
    return result if result is not None else status


if __name__ == "__main__":
    sys.exit(main())
