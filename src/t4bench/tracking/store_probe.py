"""Probe the MLflow tracking store before anything opens it (the SQLite and SQL-server checks are
shared with the Optuna storage's probe, `t4bench.preflight.places`). Each check is short (one
request with a timeout, one SQLite open) and raises one `T4BenchError` line saying what is wrong
and what to do, instead of MLflow's minutes of HTTP retries or a traceback from deep inside
SQLAlchemy.

Only the standard library loads here (SQLAlchemy only for a server database URL).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from t4bench.errors import T4BenchError

TIMEOUT_S = 5.0
#: tables every MLflow SQL store has (created by its migrations)
MLFLOW_TABLES = frozenset({"experiments", "runs", "alembic_version"})


#: free space a store's filesystem must have for a run (params, metrics, tags: a few MB at most)
MIN_FREE_MB = 16


def free_space_problem(folder: Path) -> str | None:
    """Why a store in `folder` would fill its disk (None when there is room)."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    free_mb = stats.f_bavail * stats.f_frsize / 2**20
    if free_mb < MIN_FREE_MB:
        return f"only {free_mb:.1f} MB free on the filesystem of {folder} (a run needs up to {MIN_FREE_MB} MB)"
    return None


def is_disk_full(err: BaseException) -> bool:
    """A write that failed for want of space (OSError ENOSPC, SQLite's "database or disk is full"),
    also when a library wrapped it."""
    import errno

    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        if "database or disk is full" in str(seen) or "No space left on device" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "reason", None) or err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def writable_dir_problem(folder: Path) -> str | None:
    """Why nothing can be created in `folder` (None when a file can and its disk has room): tried
    for real, since permission bits say nothing to root or on a read-only mount."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the folder will be made: its nearest existing parent decides
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".t4bench-probe-"):
            pass
    except OSError as err:
        return f"{existing} is not writable ({err.strerror or _first_line(err)})"
    # an empty file fits on a full disk: the outputs would fail later, after a run was made
    return free_space_problem(existing)


# --------------------------------------------------------------------------------------------
# MLflow tracking


def _auth_headers() -> dict[str, str]:
    """The credentials MLflow's own client would send (MLFLOW_TRACKING_TOKEN / _USERNAME+_PASSWORD)."""
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


def _probe_http(uri: str, timeout_s: float) -> None:
    """One GET of the REST API (not /health: any web server answers that) within `timeout_s`."""
    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default"
    request = urllib.request.Request(url, headers=_auth_headers())
    prefix = f"tracking.uri={uri}"
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(65536)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            raise T4BenchError(
                f"{prefix}: the server refused the credentials (HTTP {err.code}); set MLFLOW_TRACKING_TOKEN "
                "or MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD"
            ) from None
        body = err.read(65536)  # MLflow answers a missing experiment with 404 and a JSON error_code
        if not _is_mlflow_json(body):
            raise T4BenchError(
                f"{prefix}: not an MLflow tracking server (GET {url} answered HTTP {err.code})"
            ) from None
        return
    except (urllib.error.URLError, OSError) as err:  # refused, unreachable, DNS, timeout
        raise T4BenchError(
            f"{prefix}: no MLflow server answers ({_first_line(err)}; waited at most {timeout_s:g} s); "
            "start it, or unset MLFLOW_TRACKING_URI to use ./mlflow.db"
        ) from None
    if not _is_mlflow_json(body):
        raise T4BenchError(f"{prefix}: not an MLflow tracking server (GET {url} did not answer MLflow JSON)")


def _is_mlflow_json(body: bytes) -> bool:
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and ("experiment" in answer or "error_code" in answer)


def sqlite_path(url: str) -> Path | None:
    """The file of a `sqlite:///<path>` URL (SQLAlchemy form: four slashes for an absolute path)."""
    if not url.startswith("sqlite:///"):
        return None
    path = urllib.parse.unquote(url.removeprefix("sqlite:///").split("?", 1)[0])
    return None if path in ("", ":memory:") else Path(path)


def sqlite_tables(path: Path) -> set[str]:
    """Table names of an existing SQLite file, opened read-only; T4BenchError when it is no database."""
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=TIMEOUT_S)
        ) as db:
            rows = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    except sqlite3.Error as err:
        raise T4BenchError(f"{path}: not a usable SQLite database ({_first_line(err)})") from None
    return {str(name) for (name,) in rows}


def probe_sqlite(
    url: str,
    path: Path,
    key: str,
    expected: frozenset[str],
    kind: str,
    *,
    must_exist: bool = False,
    writes: bool = True,
) -> None:
    """An SQLite store, judged without writing a byte: read through the header and a read-only
    connection, never through the library that would create its schema in whatever file it is given."""
    folder = path.resolve().parent
    if not folder.is_dir():  # SQLite creates the file, never its folder
        raise T4BenchError(f"{key}={url}: folder {folder} does not exist")
    if not path.exists():
        if must_exist:  # a command that only reads must not leave an empty store behind
            raise T4BenchError(f"{key}={url}: {path} does not exist (nothing to read; check the path)")
    elif not path.is_file():
        raise T4BenchError(f"{key}={url}: {path} is not a file")
    if writes:
        problem = writable_dir_problem(folder) or free_space_problem(folder)  # SQLite's journal goes beside it
        if problem:
            raise T4BenchError(f"{key}={url}: {problem}; SQLite needs to write there")
    if not path.exists():
        return
    tables = _settled_tables(path, url, key, expected)
    advice = f"move it away or point {key} elsewhere"
    if not tables:
        raise T4BenchError(f"{key}={url}: {path} is an empty file, not {kind}; {advice}")
    if not expected <= tables:
        shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
        raise T4BenchError(f"{key}={url}: {path} is a SQLite database but not {kind} (tables: {shown}); {advice}")
    if writes and (not os.access(path, os.W_OK) or _read_only_mount(path)):
        raise T4BenchError(f"{key}={url}: {path} is not writable")


#: how long a store that holds only some of the expected tables is given to finish being created
CREATING_WAIT_S = 10.0
_SQLITE_MAGIC = b"SQLite format 3\x00"


def cut_short(path: Path) -> str | None:
    """Why an SQLite file is shorter than its own header says (a copy or a disk that stopped half-way),
    None when it is whole or empty. SQLite itself opens such a file and fails only on the first
    page it misses, deep inside a query."""
    with path.open("rb") as file:
        header = file.read(100)
    if not header:
        return None
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return "not a SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # the page count is valid only when the change counter (24) equals version-valid-for (92)
    if header[24:28] != header[92:96] or pages == 0:
        return None
    size = path.stat().st_size
    if size < pages * page_size:
        return f"truncated ({size} bytes where its header counts {pages * page_size})"
    return None


def _creator_done(path: Path) -> None:
    """Wait while another process holds the store's creation lock (`t4bench.tracking.store_lock`): an empty
    file with the lock held is a store that process is creating. Only an existing lock file is
    taken (taking it makes the file otherwise), and only briefly."""
    lock = path.with_name(path.name + ".lock")
    if not lock.exists():
        return
    from filelock import FileLock, Timeout

    with contextlib.suppress(Timeout, OSError), FileLock(str(lock), timeout=CREATING_WAIT_S):
        pass


def _settled_tables(path: Path, url: str, key: str, expected: frozenset[str]) -> set[str]:
    """The store's tables; while it holds some but not all of the expected ones, another process is
    creating it (two runs started on a fresh file): read again until complete or CREATING_WAIT_S.
    An empty file is read again once its creator (if any) has let the lock go."""
    deadline = time.monotonic() + CREATING_WAIT_S
    waited_for_creator = False
    while True:
        try:
            damage = cut_short(path)
            if damage:
                raise T4BenchError(f"{path}: not a usable SQLite database ({damage})")
            tables = set(sqlite_tables(path))
        except (T4BenchError, OSError) as err:
            raise T4BenchError(f"{key}={url}: {err}; move it away or point {key} elsewhere") from None
        if not tables and not waited_for_creator:
            waited_for_creator = True
            _creator_done(path)
            continue
        being_created = bool(tables & expected) and not expected <= tables
        if not being_created or time.monotonic() >= deadline:
            return tables
        time.sleep(0.25)


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def probe_sql_server(url: str, key: str, timeout_s: float) -> None:
    """postgresql://, mysql://, ...: connect once with a connect timeout."""
    try:
        import sqlalchemy
    except ImportError:
        return  # the store's own client will say what is missing
    args = {"connect_timeout": int(timeout_s)} if url.startswith(("postgresql", "mysql")) else {}
    try:
        engine = sqlalchemy.create_engine(url, connect_args=args, poolclass=sqlalchemy.pool.NullPool)
        with engine.connect():
            pass
    except Exception as err:  # driver missing, refused, auth: all one line for the user
        raise T4BenchError(f"{key}={hide_password(url)}: cannot connect ({_first_line(err)})") from None


def hide_password(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def tracking(uri: str, timeout_s: float = TIMEOUT_S, *, must_exist: bool = False, writes: bool = True) -> None:
    """Fail in `timeout_s` with one line when the MLflow tracking store cannot serve the command:
    by default take a run (a missing store is made later); `must_exist` for a command that reads
    runs (a missing store is refused, not made); `writes=False` for one that only reads. Nothing
    here writes to the store, so a refused file is left as it was."""
    scheme = urllib.parse.urlsplit(uri).scheme.lower()
    if scheme in ("http", "https"):
        _probe_http(uri, timeout_s)
        return
    path = sqlite_path(uri)
    if path is not None:
        probe_sqlite(
            uri, path, "tracking.uri", MLFLOW_TABLES, "an MLflow tracking store", must_exist=must_exist, writes=writes
        )
        return
    if scheme in ("", "file"):  # MLflow's file store: a folder
        folder = Path(urllib.parse.unquote(urllib.parse.urlsplit(uri).path) if scheme else uri)
        if must_exist and not folder.is_dir():
            raise T4BenchError(
                f"tracking.uri={uri}: no MLflow file store at {folder} (nothing to read; check the path)"
            )
        problem = writable_dir_problem(folder) if writes else None
        if problem:
            raise T4BenchError(f"tracking.uri={uri}: {problem}")
        return
    if scheme.startswith(("postgresql", "mysql", "mssql")):
        probe_sql_server(uri, "tracking.uri", timeout_s)
    # databricks, custom plugins: their client decides
