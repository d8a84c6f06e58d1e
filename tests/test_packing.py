"""hw.runs_per_gpu=N (t4bench.packing, docs/sweeps.md): the memory check refuses an N that does not
fit in one line, before anything starts; packed runs are tagged; emulate.world_size tags too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import all_runs, compose, compose_spec
from omegaconf import open_dict

from t4bench import hardware, packing
from t4bench.errors import T4BenchError
from t4bench.spec import build_spec
from t4bench.tracking import names
from t4bench.tracking.tags import run_tags

H200_GIB = [139.8]  # what NVML reports for an H200 (the pure check's input here: no NVML on CPU)


def test_the_memory_check_refuses_an_n_that_does_not_fit() -> None:
    # 16 x (4.4 + 0.6) = 80 GiB fits in 90% of 139.8; 32 x 5 = 160 does not, and says how many do
    assert packing.fit_error(16, 4.4, H200_GIB, 0.1, 0.6, "gnmt_ding") is None
    error = packing.fit_error(32, 4.4, H200_GIB, 0.1, 0.6, "gnmt_ding")
    assert error is not None and "\n" not in error
    assert "hw.runs_per_gpu=32" in error and "at most 25 fit" in error
    # the smallest GPU decides
    assert packing.fit_error(16, 4.4, [139.8, 40.0], 0.1, 0.6, "gnmt_ding") is not None
    assert packing.fit_error(1, 500.0, H200_GIB, 0.1, 0.6, "gnmt_ding") is None  # alone: nothing to check


def test_an_unknown_peak_refuses_and_says_how_to_measure_it() -> None:
    cfg = compose_spec(
        ["model=gnmt", "scale=ding", "hw=h200", "hw.runs_per_gpu=8", "hw.peak_memory_gib.gnmt_ding=null"]
    )
    with pytest.raises(T4BenchError, match=r"peak_memory_gib\.gnmt_ding=null.*NVML shows in use"):
        packing.check(cfg, totals_gib=H200_GIB)
    fits = compose_spec(
        ["model=gnmt", "scale=ding", "hw=h200", "hw.runs_per_gpu=24", "hw.peak_memory_gib.gnmt_ding=4.0"]
    )
    packing.check(fits, totals_gib=H200_GIB)
    too_many = compose_spec(
        [
            "model=gnmt",
            "scale=ding",
            "hw=h200",
            "hw.runs_per_gpu=40",
            "hw.peak_memory_gib.gnmt_ding=4.0",
            "hw.context_gib=0.6",
        ]
    )
    with pytest.raises(T4BenchError, match="at most 27 fit"):
        packing.check(too_many, totals_gib=H200_GIB)


def test_optuna_workers_default_to_runs_per_gpu_and_spread_round_robin() -> None:
    cfg = compose_spec(["hw.runs_per_gpu=1"])
    assert packing.sweep_jobs(cfg, None) == 1 and packing.sweep_jobs(cfg, 3) == 3
    assert [packing.visible_gpu(i, 2, {}) for i in range(4)] == ["0", "1", "0", "1"]
    assert [packing.visible_gpu(i, 2, {"CUDA_VISIBLE_DEVICES": "2,5"}) for i in range(3)] == ["2", "5", "2"]


def test_cpu_refuses_more_runs_than_cores_in_one_line_before_anything_starts(run_t4bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    too_many = hardware.host_cores() + 1
    proc = run_t4bench(
        "--multirun", "model=ncf", "hydra/launcher=packed", f"hw.runs_per_gpu={too_many}", "seed=0,1", check=False
    )
    assert proc.returncode == 2, proc.stderr
    cores = too_many - 1
    assert proc.stderr.strip().splitlines() == [
        f"t4bench: error: hw.runs_per_gpu={too_many} on hw=cpu: only {cores} cores here, one run per core at most"
    ]
    assert not (tmp_path / "mlflow.db").exists()  # refused before the sweep's parent run


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two runs at once need two cores")
def test_a_packed_seed_sweep_runs_two_at_once_and_tags_them(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    # emulate.world_size rides along: one subprocess checks both features' tags
    proc = run_t4bench(
        "--multirun", "model=ncf", "max_epochs=1", "progress=off", "hydra/launcher=packed",
        "hw.runs_per_gpu=2", "emulate.world_size=2", "seed=0,1",
    )  # fmt: skip
    # each worker process holds its own copy of the callbacks: the count comes from the store
    counted = sorted(
        line.split(" done")[0].rsplit(" ", 1)[-1] for line in proc.stdout.splitlines() if "sweep job" in line
    )
    assert counted == ["1/2", "2/2"], proc.stdout
    runs = [r for r in all_runs(mlflow_client, "t4bench-ncf") if names.SEED in r.data.tags]
    assert len(runs) == 2
    for run in runs:
        tags = run_tags(mlflow_client, run)
        assert (tags[names.GPU_SHARE], tags[names.MPS]) == ("2", "off")
        assert (tags[names.EMULATED_WORLD_SIZE], tags[names.WORLD_SIZE], tags[names.HW_COUNT]) == ("2", "1", "1")
        assert tags[names.GLOBAL_BATCH_SIZE] == str(2 * int(compose(["model=ncf"]).model.batch_size))
    first, second = sorted(runs, key=lambda r: r.info.start_time)
    assert second.info.start_time < first.info.end_time  # they overlapped: ran at once


def test_a_packed_run_caps_its_allocator_at_its_share_of_the_gpu() -> None:
    """t4bench.packing.memory_fraction, which the PyTorch rank passes to
    torch.cuda.set_per_process_memory_fraction on CUDA: none alone, (1 - pack_margin) / N packed,
    hw.gpu_memory_fraction when given (several packed sweeps on one GPU), a bad value in one line."""
    cfg = compose(["model=transformer", "scale=ding", "hw=h100"])
    assert packing.memory_fraction(build_spec(cfg).hw, share=1) is None
    with open_dict(cfg):
        assert packing.memory_fraction(build_spec(cfg).hw, share=24) == pytest.approx(0.9 / 24)
        cfg.hw.pack_margin = 0.2
        assert packing.memory_fraction(build_spec(cfg).hw, share=24) == pytest.approx(0.8 / 24)
        cfg.hw.gpu_memory_fraction = 0.03
        assert packing.memory_fraction(build_spec(cfg).hw, share=24) == pytest.approx(0.03)
        cfg.hw.gpu_memory_fraction = 1.5
        with pytest.raises(T4BenchError, match=r"^hw.gpu_memory_fraction=1.5: give a share") as err:
            packing.memory_fraction(build_spec(cfg).hw, share=24)
        assert "\n" not in str(err.value)


def test_a_packed_sweep_ends_its_idle_workers() -> None:
    """joblib keeps idle loky workers for minutes, each with its CUDA context, and CUDA MPS's quit
    waits for them: the sweep's end releases them (t4bench.sweep.packed.release_workers)."""
    import psutil
    from joblib import Parallel, delayed

    from t4bench.sweep.packed import release_workers

    pids = set(Parallel(n_jobs=2, backend="loky")(delayed(os.getpid)() for _ in range(4)))
    assert pids and os.getpid() not in pids
    assert any(psutil.pid_exists(pid) for pid in pids)  # idle, kept for the next batch of jobs
    release_workers()
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_pack_check_counts_the_runs_of_every_sweep_started_side_by_side() -> None:
    """scripts/pack_check.py (run by scripts/gpu/arms.sh before any arm starts): two arms of 12
    Transformer runs fit one 80 GiB GPU at the table's figure, three do not, in one line."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "pack_check.py"
    one_run = ["model=transformer", "scale=ding", "hparams=tuned", "hw=h100"]

    def check(runs: int, *extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(script), str(runs), "--total-gib", "80", *one_run, *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    assert check(24).returncode == 0
    refused = check(36)
    assert refused.returncode == 2 and refused.stdout == ""
    assert (
        refused.stderr.count("\n") == 1
        and "all 36 runs at once" in refused.stderr
        and "at most 32 fit" in refused.stderr
    )
    bad = check(2, "no_such_key=1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no_such_key" in bad.stderr
