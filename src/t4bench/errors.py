"""User-facing errors: printed as one line, exit status 2, nothing half-written."""

from __future__ import annotations

import argparse
import errno
import subprocess
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

T = TypeVar("T")


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


#: an OSError of the place itself (the user's to fix, like bad input), even without a file name
_PLACE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})


def one_line(what: str, fn: Callable[[], T], where: object = "") -> tuple[T | None, int]:
    """`fn()` for a command line: (its result, 0), or, after one line `t4bench: error: WHAT: ...`
    (`t4bench: error: ...` when `what` is empty) on stderr, (None, exit status): 2 for bad input
    (a `T4BenchError`) and for a place it cannot read or write (an `OSError` with a file, or of
    permissions or space: a read-only or full folder, named by the error's file, else by `where`),
    1 for a command that failed (`CalledProcessError`, an `OSError` such as a download's)."""
    try:
        return fn(), 0
    except T4BenchError as err:
        message, status = str(err), 2
    except subprocess.CalledProcessError as err:  # pip download (no index reachable, ...)
        message, status = f"`{' '.join(map(str, err.cmd))}` failed (exit {err.returncode})", 1
    except OSError as err:
        place = err.filename is not None or err.errno in _PLACE_ERRNOS
        message, status = f"{err.strerror or err}: {err.filename or where}", 2 if place else 1
    print(f"t4bench: error: {what + ': ' if what else ''}{message}", file=sys.stderr)
    return None, status
