"""Probe the places a run writes to besides the MLflow store (`t4bench.tracking.store_probe`,
whose SQLite and SQL-server checks these share): the sweeper's Optuna storage, and the working
directory, where Hydra writes before any t4bench code runs. Each raises one `T4BenchError` line
and writes nothing.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from t4bench.errors import T4BenchError
from t4bench.tracking.store_probe import (
    TIMEOUT_S,
    hide_password,
    probe_sql_server,
    probe_sqlite,
    sqlite_path,
    writable_dir_problem,
)

#: tables of an Optuna RDB storage
OPTUNA_TABLES = frozenset({"studies", "trials", "version_info"})
#: Hydra options that move its output directory away from the working directory
_OUTPUT_OPTIONS = ("hydra.run.dir", "hydra.sweep.dir")


# --------------------------------------------------------------------------------------------
# Optuna storage


def optuna_storage(storage: str, timeout_s: float = TIMEOUT_S) -> None:
    """The storage string of the sweeper (`journal:<path>`, `<path>.journal`, or an SQLAlchemy URL):
    a known scheme, a reachable server, an SQLite file that is an Optuna one (or new)."""
    key = "hydra.sweeper.storage"
    if storage.startswith("journal:") or storage.endswith(".journal"):
        path = Path(storage.removeprefix("journal:")).expanduser()
        problem = writable_dir_problem(path.resolve().parent)
        if problem:
            raise T4BenchError(f"{key}={storage}: {problem}")
        if path.exists() and not path.is_file():
            raise T4BenchError(f"{key}={storage}: {path} is not a file")
        return
    scheme = urllib.parse.urlsplit(storage).scheme.lower()
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        db = sqlite_path(storage)
        if db is None:
            raise T4BenchError(f"{key}={storage}: give a file, sqlite:///<path> (an in-memory SQLite is lost at exit)")
        probe_sqlite(storage, db, key, OPTUNA_TABLES, "an Optuna storage")
        return
    if base in ("postgresql", "mysql"):
        probe_sql_server(storage, key, timeout_s)
        return
    raise T4BenchError(
        f"{key}={hide_password(storage)}: unknown storage; use journal:<file>, <file>.journal, "
        "sqlite:///<file>, postgresql://user@host/db or mysql://user@host/db"
    )


# --------------------------------------------------------------------------------------------
# the working directory (Hydra writes outputs/ there before any t4bench code runs)


def working_dir(argv: Sequence[str], cwd: Path | None = None) -> None:
    """Before Hydra starts: it makes `outputs/` (or `multirun/`) in the working directory, or the
    folder `hydra.run.dir` / `hydra.sweep.dir` names, and fails with a traceback when it cannot
    (a read-only mount, a path under a regular file)."""
    folder = cwd or Path.cwd()
    given = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep:
            given[key.lstrip("+~")] = value.strip("'\"")
    explicit = [(option, given[option]) for option in _OUTPUT_OPTIONS if option in given]
    for option, value in explicit:
        # the fixed part of the path: an interpolation such as ${now:...} is filled in later
        fixed = Path(value.split("${", 1)[0] or ".")
        target = fixed if fixed.is_absolute() else folder / fixed
        problem = writable_dir_problem(target)
        if problem:
            raise T4BenchError(f"{option}={value}: {problem}; Hydra writes the run's outputs there")
    if explicit:
        return
    problem = writable_dir_problem(folder)
    if problem:
        raise T4BenchError(
            f"working directory: {problem}; Hydra writes outputs/ there: run from a writable directory "
            "or give hydra.run.dir=<writable dir> (and MLFLOW_TRACKING_URI for the runs)"
        )
