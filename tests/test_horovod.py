"""Horovod backend (issue 5): a 2-rank gloo run under `horovodrun` leaves one MLflow run.
CI builds Horovod with scripts/build_horovod.sh (setup.sh --all); without it the run test skips."""

from __future__ import annotations

import importlib.util
import shutil
import sys

import pytest

from conftest import all_runs

FAST = ("max_epochs=1", "model.batch_size=4096", "progress=plain")


def _horovod_importable() -> bool:
    try:
        import horovod.torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_selecting_horovod_without_it_says_how_to_install(run_t4bench) -> None:  # type: ignore[no-untyped-def]
    if importlib.util.find_spec("horovod") is not None and _horovod_importable():
        pytest.skip("horovod is installed here; the missing-horovod message cannot show")
    proc = run_t4bench("dist=horovod", *FAST, check=False)
    assert proc.returncode == 2
    assert "scripts/build_horovod.sh" in proc.stderr.splitlines()[-1]


@pytest.mark.slow
def test_horovodrun_two_gloo_ranks_give_one_run(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    if not _horovod_importable() or shutil.which("horovodrun") is None:
        pytest.skip("horovod.torch not importable: build it with scripts/build_horovod.sh")
    # `python <horovodrun script> -np 2 --gloo python -m t4bench <overrides>`
    run_t4bench(
        "dist=horovod", "hw=cpu", *FAST,
        module=(shutil.which("horovodrun"), "-np", "2", "--gloo", sys.executable, "-m", "t4bench"),
    )
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.dist_backend"] == "horovod/horovod"
    assert run.data.tags["t4bench.launcher"] == "horovodrun"
    assert run.data.tags["t4bench.world_size"] == "2"
    assert run.data.metrics["global_batch_size"] == 8192
