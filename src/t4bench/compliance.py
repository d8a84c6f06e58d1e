"""`t4bench check <mllog>`: is a run's MLPerf log compliant, in one line.

The benchmark is read from the log's `submission_benchmark`; the official checker
(mlperf_logging.compliance_checker, in-process) runs with the newest training ruleset that knows
it (`t4bench.mlperf.ruleset`). No ruleset parses NCF (it left MLPerf Training after v0.7): for
it the line says so, and t4bench's own structural checks run instead — the lines parse, the keys
every ruleset's common rules require are there, the run starts before it stops, epochs open and
close in pairs, time never runs backwards, and the run ends with a status.

Exit status: 0 compliant, 1 not, 2 bad input (no such file, not an MLPerf log).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from t4bench.errors import T4BenchError

#: what every ruleset's common.yaml requires once or more (epoch_* stand in for block_*)
REQUIRED = (
    "submission_benchmark",
    "submission_division",
    "submission_org",
    "submission_platform",
    "submission_status",
    "cache_clear",
    "init_start",
    "init_stop",
    "run_start",
    "run_stop",
    "global_batch_size",
    "eval_accuracy",
)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The `:::MLLOG {...}` lines as dicts; a T4BenchError (one line) for anything else."""
    if not path.is_file():
        raise T4BenchError(f"{path}: no such file (give the mlperf.log of a run)")
    events = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.startswith(":::MLLOG "):
            continue
        try:
            events.append(json.loads(line.removeprefix(":::MLLOG ")))
        except json.JSONDecodeError as err:
            raise T4BenchError(f"{path}:{number}: not a valid :::MLLOG line ({err.msg})") from None
    if not events:
        raise T4BenchError(f"{path}: no :::MLLOG lines (not an MLPerf log)")
    return events


def benchmark_of(events: Sequence[dict[str, Any]], path: Path) -> str:
    for event in events:
        if event.get("key") == "submission_benchmark":
            return str(event.get("value"))
    raise T4BenchError(f"{path}: no submission_benchmark line: which benchmark it logs is unknown")


def structural_problems(events: Sequence[dict[str, Any]]) -> list[str]:
    """t4bench's own checks of a log that no ruleset parses."""
    problems = []
    keys = [str(e.get("key")) for e in events]
    problems += [f"no {key}" for key in REQUIRED if key not in keys]
    for key in ("run_start", "run_stop", "init_start", "init_stop"):
        if keys.count(key) > 1:
            problems.append(f"{key} logged {keys.count(key)} times")
    if "run_start" in keys and "run_stop" in keys and keys.index("run_start") > keys.index("run_stop"):
        problems.append("run_stop before run_start")
    if keys.count("epoch_start") != keys.count("epoch_stop"):
        problems.append(f"{keys.count('epoch_start')} epoch_start but {keys.count('epoch_stop')} epoch_stop")
    times = [e.get("time_ms", 0) for e in events]
    if any(b < a for a, b in itertools.pairwise(times)):
        problems.append("time_ms goes backwards")
    stops = [e for e in events if e.get("key") == "run_stop"]
    if stops and "status" not in (stops[-1].get("metadata") or {}):
        problems.append("run_stop has no status")
    return problems


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().strip())


def official(path: Path, ruleset: str) -> list[str]:
    """The official checker's complaints (none: compliant)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    collect = _Collect()
    root = logging.getLogger()
    root.addHandler(collect)
    try:
        checker = mlp_compliance.make_checker("training", ruleset, True, False)
        valid, *_ = mlp_compliance.main(str(path), f"training_{ruleset}/common.yaml", checker)
    finally:
        root.removeHandler(collect)
    return [] if valid else ([m for m in collect.messages if m != "FAILED"] or ["the checker says FAILED"])


def check(path: Path) -> tuple[bool, str]:
    """(compliant, the one line that says so)."""
    from t4bench.mlperf import ruleset as ruleset_of

    events = read_log(path)
    benchmark = benchmark_of(events, path)
    ruleset = ruleset_of(benchmark)
    if ruleset is None:
        problems = structural_problems(events)
        head = f"{path.name}: {benchmark}: no mlperf-logging ruleset parses {benchmark}; t4bench's structural checks"
    else:
        problems = official(path, ruleset)
        head = f"{path.name}: {benchmark}: mlperf-logging training ruleset {ruleset}"
    if not problems:
        return True, f"{head}: PASSED ({len(events)} lines)"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return False, f"{head}: FAILED: {problems[0]}{more}"
