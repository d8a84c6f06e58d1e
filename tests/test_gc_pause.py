"""t4bench.gc_pause: the collector off through start-up, back on (with start-up's objects frozen) at
the MLPerf run_start that both framework loops write, whichever loop it is."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlperf_logging.mllog import constants

from t4bench import gc_pause
from t4bench.rank import WindowedLog


@pytest.fixture
def collector_restored() -> Iterator[None]:
    yield
    gc.enable()
    gc.unfreeze()


def test_run_start_turns_the_paused_collector_back_on(tmp_path: Path, collector_restored: None) -> None:
    gc_pause.pause()
    assert not gc.isenabled()
    log = WindowedLog(tmp_path / "mlperf.log", "ncf")
    log.start(constants.INIT_START)
    assert not gc.isenabled()  # start-up goes on uncollected
    log.start(constants.RUN_START)
    assert gc.isenabled() and gc.get_freeze_count() > 0


# the command in this process up to the point named, then what the collector is doing there
PROBE = """
import gc, runpy, sys
import t4bench.app_job as app_job
def stop_here(composed, task_function):
    print("at the job", gc.isenabled())
    raise SystemExit(0)
app_job.run = stop_here
sys.argv = ["t4bench", *sys.argv[1:]]
try:
    runpy.run_module("t4bench", run_name="__main__")
except SystemExit:
    pass
print("after", gc.isenabled())
"""


def _probe(tmp_path: Path, *args: str) -> list[str]:
    import os

    from conftest import DATA_ROOT, REPO

    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "T4BENCH_DATA_DIR": str(DATA_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


def test_a_single_run_reaches_its_job_with_the_collector_paused(tmp_path: Path) -> None:
    assert _probe(tmp_path, "max_epochs=1")[-2:] == ["at the job False", "after False"]


def test_a_command_that_is_not_one_run_collects_as_usual(tmp_path: Path) -> None:
    # `--cfg job` prints the config; a sweep's parent process likewise turns collection back on
    assert _probe(tmp_path, "--cfg", "job")[-1] == "after True"
