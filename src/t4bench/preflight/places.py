"""Probe the places a run writes to besides the MLflow store (`t4bench.tracking.store_probe`,
whose SQLite and SQL-server checks these share): the sweeper's Optuna storage (the probe lives in
t4bench.sweep.storage_probe, beside the storage it opens), and the working directory, where Hydra
writes before any t4bench code runs. Each raises one `T4BenchError` line and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from t4bench.errors import T4BenchError
from t4bench.sweep.storage_probe import optuna_storage
from t4bench.tracking.store_probe import writable_dir_problem

__all__ = ["optuna_storage", "working_dir"]

#: Hydra options that move its output directory away from the working directory
_OUTPUT_OPTIONS = ("hydra.run.dir", "hydra.sweep.dir")


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
