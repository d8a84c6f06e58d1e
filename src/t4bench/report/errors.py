"""The report's one error kind (no heavy imports, so `--help` and bad arguments stay fast)."""

from __future__ import annotations

from t4bench.errors import T4BenchError


class ReportError(T4BenchError):
    """Bad input or nothing to report: one line `t4bench: error: ...`, exit status 2."""
