"""The report's one error kind (no heavy imports, so `--help` and bad arguments stay fast)."""

from __future__ import annotations


class ReportError(Exception):
    """Bad input or nothing to report: one line `t4bench: error: ...`, exit status 2."""
