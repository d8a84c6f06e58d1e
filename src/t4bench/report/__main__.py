"""`python -m t4bench.report`: the study's tables and figures from an MLflow tracking store.

    python -m t4bench.report --out report/ [--model ncf] [--sweep-id ID] [--tag t4bench.hw=t4]
        [--since 2026-12-01] [--until ...] [--baseline t4] [--price t4=0.35 --price v100-sxm2=2.48]
        [--optuna-storage multirun/sweeps/ncf_robust/optuna.journal --study ncf_robust]
    python -m t4bench.report export --out results/ ...   (MLPerf submission-style folder)

Writes report.md, report.html and PNG figures into --out, and logs the folder as the artifacts of
a run in the `t4bench-reports` experiment (--no-log to skip). Bad input or no matching runs: one
line `t4bench: error: ...` and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from t4bench.errors import ArgumentParser, one_line
from t4bench.report.errors import ReportError
from t4bench.tracking import experiments, names

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from t4bench.report.query import RunFilter

PROG = "python -m t4bench.report"
#: the command name in usage and error lines (`t4bench report` when the console script runs it)
_prog = PROG


def _filter_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI or sqlite:///./mlflow.db")
    parser.add_argument(
        "--experiment",
        action="append",
        default=[],
        help="experiment name (repeatable); default: every experiment (runs tagged t4bench.model)",
    )
    parser.add_argument("--model", action="append", default=[], help=f"{names.MODEL} tag (repeatable)")
    parser.add_argument("--sweep-id", help=f"{names.SWEEP_ID} tag; %% is a wildcard (e.g. ncf_robust-validate-%%)")
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="run tag (repeatable)")
    parser.add_argument("--since", help="runs started at or after this date/time (ISO, UTC)")
    parser.add_argument("--until", help="runs started at or before this date/time (ISO, UTC)")


def make_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=_prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _filter_args(parser)
    parser.add_argument("--out", type=Path, default=Path("report"), help="output folder (default: report/)")
    parser.add_argument("--baseline", default="t4", help="hw the speed-up table compares against (default: t4)")
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="HW=USD",
        help="price per GPU-hour for a hw (repeatable); overrides the runs' hw.price_per_gpu_hour",
    )
    parser.add_argument("--optuna-storage", help="Optuna storage of a sweep (journal file or SQL URL)")
    parser.add_argument("--study", help="study name in --optuna-storage (needed when it holds several)")
    parser.add_argument("--no-log", action="store_true", help="do not log the report as an MLflow run")
    parser.add_argument("--run-id", help="log the report into this existing run (as `mlflow run . -e report` does)")
    return parser


def export_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=f"{_prog} export",
        description="Lay runs' MLPerf logs out as "
        "results/<system>/<benchmark>/result_N.txt (the layout mlperf_logging's package checker "
        "and result summarizer read).",
    )
    _filter_args(parser)
    parser.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results/)")
    return parser


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    prices = {}
    for item in items:
        hw, sep, value = item.partition("=")
        try:
            prices[hw] = float(value)
        except ValueError:
            raise ReportError(f"--price {item!r}: expected HW=USD_PER_GPU_HOUR, e.g. t4=0.35") from None
        if not sep or not hw or prices[hw] < 0:
            raise ReportError(f"--price {item!r}: expected HW=USD_PER_GPU_HOUR, e.g. t4=0.35")
    return prices


def _shown(path: Path) -> str:
    """A path relative to the working directory (no absolute path in the output)."""
    return os.path.relpath(path)


#: MLflow's HTTP client retries a dead server for minutes (7 retries, backoff factor 2, 120 s a
#: request); a report is read once and its server was just probed, so a few seconds suffice
_HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}


def _client(uri: str, *, writes: bool) -> MlflowClient:
    """A client of a store that exists and is an MLflow one, checked read-only before MLflow opens
    it: MLflow creates its schema in any SQLite file it is given (another application's too)."""
    from t4bench.tracking import store_probe as probe

    path = probe.sqlite_path(uri)
    if path is not None and not path.exists():
        raise ReportError(f"no tracking store at {uri} (set --tracking-uri or MLFLOW_TRACKING_URI)")
    probe.tracking(uri, must_exist=True, writes=writes)
    for name, value in _HTTP_LIMITS.items():
        os.environ.setdefault(name, value)  # the user's own setting wins
    from t4bench.tracking.client import mlflow_client

    return mlflow_client(uri)


def _run_filter(args: argparse.Namespace) -> RunFilter:
    from t4bench.report.query import RunFilter, parse_date, parse_tag

    return RunFilter(
        experiments=args.experiment,
        models=args.model,
        sweep_id=args.sweep_id,
        tags=dict(parse_tag(t) for t in args.tag),
        since=parse_date(args.since) if args.since else None,
        until=parse_date(args.until) if args.until else None,
    )


def _writable_out(out: Path) -> None:
    """--out checked before the store is read (the report's folder is made only once it is known)."""
    from t4bench.tracking import store_probe as probe

    problem = probe.writable_dir_problem(out)
    if problem:
        raise ReportError(f"--out {out}: {problem}")


def report(argv: Sequence[str]) -> int:
    args = make_parser().parse_args(argv)
    _writable_out(args.out)
    uri = args.tracking_uri or experiments.default_tracking_uri()
    client = _client(uri, writes=not args.no_log)  # before pandas and the figures load: a bad store fails fast
    from t4bench.report import document, query
    from t4bench.report.build import Options, build, shown_uri
    from t4bench.report.publish import log_report

    flt = _run_filter(args)
    opts = Options(
        baseline=args.baseline, prices=parse_prices(args.price), optuna_storage=args.optuna_storage, study=args.study
    )
    selection = query.select(client, flt)
    args.out.mkdir(parents=True, exist_ok=True)
    doc, notes = build(selection, flt, opts, args.out, uri)
    md, page = document.write(doc, args.out)
    for note in notes:
        print(f"t4bench report: note: {note}", file=sys.stderr)
    print(f"{_shown(md)}\n{_shown(page)}\n{len(list(args.out.glob('*.png')))} figures, {len(selection.runs)} runs")
    if not args.no_log:
        run_id = log_report(
            client,
            args.out,
            {names.REPORT_FILTER: flt.describe()[:5000]},
            {"argv": " ".join(argv), "tracking_uri": shown_uri(uri)},
            run_id=args.run_id,
        )
        print(f"logged as MLflow run {run_id}")
    return 0


def export(argv: Sequence[str]) -> int:
    args = export_parser().parse_args(argv)
    _writable_out(args.out)
    from t4bench.report import query
    from t4bench.report.export import export_results

    client = _client(args.tracking_uri or experiments.default_tracking_uri(), writes=False)
    flt = _run_filter(args)
    selection = query.select(client, flt)
    written = export_results(client, selection.runs, args.out)
    for line in written:
        print(line)
    return 0


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    global _prog
    _prog = prog
    argv = list(sys.argv[1:] if argv is None else argv)
    result, status = one_line("", lambda: export(argv[1:]) if argv[:1] == ["export"] else report(argv))
    return result if result is not None else status


if __name__ == "__main__":
    sys.exit(main())
