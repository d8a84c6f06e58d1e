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


def test_the_command_pauses_the_collector_before_anything_heavy_loads() -> None:
    # `python -m t4bench --cfg job`: the app's own start-up, no run (nothing reaches run_start)
    probe = (
        "import gc, runpy, sys; sys.argv = ['t4bench', '--cfg', 'job']\n"
        "try:\n    runpy.run_module('t4bench', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('enabled', gc.isenabled())"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "enabled False"
