"""User-facing errors: printed as one line, exit status 2, nothing half-written."""


class T4BenchError(Exception):
    """Bad input or a missing prerequisite that the user can fix (dataset path, hardware, extra)."""


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
