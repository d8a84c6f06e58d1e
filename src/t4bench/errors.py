"""User-facing errors: printed as one line, exit status 2, nothing half-written."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class T4BenchError(Exception):
    """Bad input or a missing prerequisite that the user can fix (dataset path, hardware, extra)."""

    #: the MLflow run this error ended (closed as FAILED on the way out); empty: none existed yet
    run_id: str = ""


class DatasetMissingError(T4BenchError):
    """A configured dataset is not where the config says; the message names the expected files."""


class RanksFailed(T4BenchError):
    """A rank of a job this process launched failed; the message names the rank and the error."""


class RunTerminated(BaseException):
    """SIGTERM (or the launcher's signal), turned into an exception so the MLflow run is closed
    as KILLED; a BaseException so that `except Exception` in user code does not swallow it."""

    #: the MLflow run closed as KILLED on the way out (empty: none existed yet)
    run_id: str = ""
    #: what was closed on the way out when it was not one run (a sweep controller: its jobs);
    #: said instead of the run id
    closed: str = ""


class ArgumentParser(argparse.ArgumentParser):
    """argparse for t4bench's own commands: a usage error is one line and exit 2, as any other bad
    input (argparse prints the whole usage block first). Subcommand parsers are of this class too
    (`add_subparsers` makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        print(f"t4bench: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)
