"""Bad stores and config values in-process (issue 17): the tracking/storage/working-directory
probes against real HTTP servers, SQLite files and folders, and the config rules on every shipped
model x scale; each failure is one `T4BenchError` line naming the key and what is allowed."""

from __future__ import annotations

import contextlib
import http.server
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from t4bench.errors import T4BenchError
from t4bench.preflight import config as validation
from t4bench.preflight import places
from t4bench.spec import build_spec
from t4bench.tracking import store_probe as probe

REPO = Path(__file__).resolve().parents[1]


def one_line(err: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------ probes


@contextlib.contextmanager
def http_server(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _NotMlflow(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>hello</html>")

    def log_message(self, *args: object) -> None:
        pass


class _Mlflowish(_NotMlflow):
    """Answers like MLflow's REST API does for a missing experiment."""

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no"}')


class _Locked(_NotMlflow):
    def do_GET(self) -> None:
        self.send_response(401)
        self.end_headers()


def test_probe_http_servers() -> None:
    with http_server(_NotMlflow) as url, pytest.raises(T4BenchError, match="not an MLflow tracking server"):
        probe.tracking(url)
    with http_server(_Mlflowish) as url:
        probe.tracking(url)
    with http_server(_Locked) as url, pytest.raises(T4BenchError, match=r"refused the credentials \(HTTP 401\)"):
        probe.tracking(url)


def test_probe_sqlite_stores(tmp_path: Path) -> None:
    probe.tracking(f"sqlite:///{tmp_path / 'new.db'}")  # created by MLflow later
    optuna_db = tmp_path / "optuna.db"
    with sqlite3.connect(optuna_db) as conn:
        conn.executescript("CREATE TABLE studies(x); CREATE TABLE trials(x); CREATE TABLE version_info(x);")
    with pytest.raises(T4BenchError, match="is a SQLite database but not an MLflow tracking store"):
        probe.tracking(f"sqlite:///{optuna_db}")
    places.optuna_storage(f"sqlite:///{optuna_db}")
    with pytest.raises(T4BenchError, match=r"folder .*nowhere does not exist"):
        probe.tracking(f"sqlite:///{tmp_path / 'nowhere' / 'mlflow.db'}")


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ("redis://localhost:6379", "unknown storage; use journal:<file>"),
        ("sqlite://", "in-memory SQLite is lost"),
        ("postgresql://user:secret@127.0.0.1:9/db", "postgresql://user:***@127.0.0.1:9/db: cannot connect"),
    ],
)
def test_probe_optuna_storage(storage: str, expected: str) -> None:
    with pytest.raises(T4BenchError) as err:
        places.optuna_storage(storage)
    assert expected in one_line(err) and "secret" not in str(err.value)


def test_probe_journal_in_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(T4BenchError, match="is not a directory"):
        places.optuna_storage(f"journal:{blocker / 'optuna.journal'}")
    places.optuna_storage(str(tmp_path / "sweep" / "optuna.journal"))  # made on first write


def test_probe_working_dir_skipped_when_output_moved(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(T4BenchError, match=r"working directory: .* is not a directory"):
        places.working_dir([], cwd=blocker)
    places.working_dir([f"hydra.run.dir={tmp_path}"], cwd=blocker)


# ------------------------------------------------------------------------------ config rules


@pytest.fixture(scope="module")
def compose_cfg():  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        yield lambda *overrides: compose("config", overrides=list(overrides))


@pytest.mark.parametrize("model", ["ncf", "resnet50", "ssd", "maskrcnn", "gnmt", "transformer"])
@pytest.mark.parametrize("scale", ["mini", "reference"])
def test_shipped_configs_validate(compose_cfg, model: str, scale: str) -> None:  # type: ignore[no-untyped-def]
    validation.validate(compose_cfg(f"model={model}", f"scale={scale}"))


@pytest.mark.parametrize("scale", ["mini", "reference"])
def test_tensorflow_schedule_is_its_own(compose_cfg, scale: str) -> None:  # type: ignore[no-untyped-def]
    """framework=tensorflow brings the TF reference's polynomial decay; the PyTorch loop has none."""
    validation.validate(compose_cfg("model=resnet50", f"scale={scale}", "framework=tensorflow"))
    with pytest.raises(T4BenchError, match=r"model\.schedule\.kind=polynomial: must be one of constant, step"):
        validation.validate(compose_cfg("model=resnet50", f"scale={scale}", "model.schedule.kind=polynomial"))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["model.optimizer.betas=[0.9]"], "model.optimizer.betas=[0.9]: must be a list of 2 numbers"),
        (["model.optimizer.name=rmsprop"], "model.optimizer.name=rmsprop: must be one of adam, adamw, sgd"),
        (["model.schedule.kind=cosine"], "model.schedule.kind=cosine: must be one of constant, step, inverse_sqrt"),
        (["seed=1.5"], "seed=1.5: must be an integer"),
        (["hw.threads=0"], "hw.threads=0: must be an integer >= 1, or null"),
        (["model=ssd", "model.data.hflip=2"], "model.data.hflip=2: must be a finite number >= 0 and <= 1"),
        (["model=gnmt", "model.target.bleu=120"], "model.target.bleu=120: must be a finite number > 0 and <= 100"),
        (
            ["model=maskrcnn", "scale=reference", "scale.target_version=v9"],
            "scale.target_version=v9: must be one of v0_5, v0_6",
        ),
        (["model.optimizer.lr=inf"], "model.optimizer.lr=inf: must be a finite number > 0"),
        (["model.arch.init_std=0"], "model.arch.init_std=0: must be a finite number > 0"),
        (["input=synthetic", "input.steps=0"], "input.steps=0: must be an integer >= 1"),
    ],
)
def test_config_rules(compose_cfg, overrides: list[str], expected: str) -> None:  # type: ignore[no-untyped-def]
    cfg = compose_cfg(*overrides)
    with pytest.raises(T4BenchError) as err:
        validation.validate(cfg)
    assert expected in one_line(err)


def test_cpu_ranks_against_host(compose_cfg, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    limit, why = validation.max_cpu_ranks(build_spec(compose_cfg()))
    assert 1 <= limit <= validation.hardware.host_cores() and "cores" in why
    validation.validate(compose_cfg(f"hw.count={limit}"))
    with pytest.raises(T4BenchError, match=rf"hw.count={limit + 1}: must be 1..{limit} CPU ranks on this host"):
        validation.validate(compose_cfg(f"hw.count={limit + 1}"))
    # a rank needing more memory than the host has: one rank at most
    cfg = compose_cfg("hw.count=2", "+hw.rank_memory_gb=100000")
    with pytest.raises(T4BenchError, match=r"must be 1\.\.1 CPU ranks"):
        validation.validate(cfg)
