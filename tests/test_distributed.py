"""Data parallel with real processes (issue 5): `hw=cpu hw.count=2` starts two gloo ranks through
torch's elastic launcher; `torchrun --nproc_per_node=2 -m t4bench` joins ranks an outer launcher
started. Either way: exactly one MLflow run, global batch and global throughput, MLPerf log from
rank 0 only, one Hydra output directory."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, all_runs, start_cli

from t4bench.__main__ import rank_overrides
from t4bench.pytorch import distributed
from t4bench.tracking.tags import run_tags

FAST = ("max_epochs=1", "model.batch_size=4096", "progress=plain")


def test_helpers_are_no_ops_in_one_process() -> None:
    import torch

    cpu = torch.device("cpu")
    assert distributed.rank() == 0 and distributed.world_size() == 1
    assert distributed.all_reduce_sum([1.0, 2.0], cpu) == [1.0, 2.0]
    assert distributed.all_reduce_max([3.0], cpu) == [3.0]
    assert distributed.broadcast_object({"a": 1}) == {"a": 1}
    model = torch.nn.Linear(2, 2)
    assert distributed.wrap_for_data_parallel(model, cpu) is model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert distributed.wrap_optimizer(opt, model) is opt
    distributed.barrier()


def _one_run(client, experiment: str, per_rank_batch: int):  # type: ignore[no-untyped-def]
    runs = all_runs(client, experiment)
    assert len(runs) == 1, [r.info.run_id for r in runs]
    (run,) = runs
    assert run.info.status == "FINISHED"
    tags, metrics = run_tags(client, run), run.data.metrics
    assert tags["t4bench.world_size"] == "2" and tags["t4bench.hw_count"] == "2"
    assert tags["t4bench.global_batch_size"] == str(2 * per_rank_batch)
    assert metrics["global_batch_size"] == 2 * per_rank_batch
    assert tags["t4bench.dist_backend"].endswith("gloo") or tags["t4bench.dist_backend"].startswith("horovod")
    # global throughput: samples of all ranks over the slowest rank's time
    assert metrics["throughput"] > 0 and metrics["avg_throughput"] > 0
    history = client.get_metric_history(run.info.run_id, "throughput")
    assert [m.step for m in history] == [1]
    assert "eval_quality" in metrics
    assert tags["t4bench.telemetry"].startswith("off: ")
    return run


def _one_output_dir(parent: Path) -> Path:
    """The one directory under `parent` (Hydra's, from rank 0) with one MLPerf log writer."""
    dirs = [p for p in parent.iterdir() if p.is_dir() and p.name != "mlartifacts"]
    assert len(dirs) == 1, dirs
    (run_dir,) = dirs
    starts = [line for line in (run_dir / "mlperf.log").read_text().splitlines() if '"run_start"' in line]
    assert len(starts) == 1, "one MLperf log writer (rank 0)"
    return run_dir


@pytest.mark.slow
def test_hw_count_2_on_cpu_starts_two_gloo_ranks(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_t4bench("model=ncf", "hw=cpu", "hw.count=2", *FAST)
    tags = run_tags(mlflow_client, _one_run(mlflow_client, "t4bench-ncf", 4096))
    assert tags["t4bench.launcher"] == "elastic_launch"
    assert tags["t4bench.dist_backend"] == "ddp/gloo"
    assert _one_output_dir(tmp_path) == tmp_path / "run"
    assert proc.stdout.count("ncf (mini) on cpu x2") == 1  # the summary from rank 0 only


#: one vision and one translation mini model on 2 ranks, shrunk to about a minute each on 2 cores
TWO_RANK_MINIS = [
    ("resnet50", 256, ("model.batch_size=256",)),
    # with the init-phase warm-up of two batch shapes: a forward + backward through DDP on each rank
    # (the same shapes on both, so the gradient all-reduces pair up; a mismatch would hang)
    (
        "transformer",
        128,
        ("model.batch_size=128", "model.data.max_len=16", "model.data.eval_max_sentences=50", "perf.warmup_shapes=2"),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "batch", "overrides"), TWO_RANK_MINIS, ids=[m for m, *_ in TWO_RANK_MINIS])
def test_vision_and_translation_minis_on_two_gloo_ranks(  # type: ignore[no-untyped-def]
    run_t4bench, mlflow_client, tmp_path: Path, model: str, batch: int, overrides: tuple[str, ...]
) -> None:
    proc = run_t4bench(f"model={model}", "hw=cpu", "hw.count=2", "max_epochs=1", "progress=plain", *overrides)
    assert proc.stdout.count("warm-up: 2 batch shapes") == (1 if "perf.warmup_shapes=2" in overrides else 0)
    run = _one_run(mlflow_client, f"t4bench-{model}", batch)
    assert run_tags(mlflow_client, run)["t4bench.dist_backend"] == "ddp/gloo"
    assert run.data.tags["t4bench.throughput_unit"] == ("tokens/s" if model == "transformer" else "samples/s")
    _one_output_dir(tmp_path)


@pytest.mark.slow
def test_torchrun_outer_launcher_gives_one_run(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # hw=auto under torchrun: detection picks cpu here and hw.count comes from the launcher.
    # Microseconds in the directory name: each rank's Hydra resolves its own, so only the fix
    # (ranks > 0 write nothing there, and drop their empty one) leaves a single directory.
    run_t4bench(
        "model=ncf",
        "hw=auto",
        *FAST,
        "hydra.run.dir='outputs/${now:%H-%M-%S-%f}'",
        module=("-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "t4bench"),
    )
    run = _one_run(mlflow_client, "t4bench-ncf", 4096)
    tags = run_tags(mlflow_client, run)
    assert tags["t4bench.launcher"] == "torchrun"
    assert tags["t4bench.hw"] == "cpu" and tags["t4bench.hw_requested"] == "auto"
    run_dir = _one_output_dir(tmp_path / "outputs")
    assert (run_dir / ".hydra" / "config.yaml").exists()


@pytest.mark.slow
def test_a_failing_rank_fails_the_run(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    proc = run_t4bench(
        "hw=cpu",
        "hw.count=2",
        *FAST,
        "+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch",
        "+callbacks.fail.epoch=1",
        "max_epochs=2",
        check=False,
    )
    assert proc.returncode != 0
    assert "t4bench: error:" in proc.stderr and "rank" in proc.stderr
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    assert run.info.status == "FAILED"


@pytest.mark.slow
def test_sigterm_to_the_launching_process_kills_ranks_and_run(tmp_path: Path, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    import psutil

    overrides = ("hw=cpu", "hw.count=2", "model.target.hr_at_10=0.99", "max_epochs=50", "model.batch_size=4096")
    # returned once rank 0 trains
    proc = start_cli(*overrides, "progress=plain", store=tmp_path, until="init took", stderr=subprocess.PIPE)
    ranks = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert re.fullmatch(
        r"t4bench: stopped by signal 15; MLflow run [0-9a-f]{32} is marked KILLED", stderr.strip().splitlines()[-1]
    )
    _, alive = psutil.wait_procs(ranks, timeout=30)
    assert not alive, f"ranks left running: {alive}"
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    assert run.info.status == "KILLED" and run.data.tags["t4bench.outcome"] == "killed"


def test_nonzero_ranks_keep_out_of_hydras_output_dir() -> None:
    argv = ["model=ncf", "--multirun"]
    assert rank_overrides(argv, 0) == argv
    assert rank_overrides(argv, 1) == [*argv, "hydra.output_subdir=null", "hydra/job_logging=stdout"]
    mine = ["hydra/job_logging=none", "hydra.output_subdir=.rank1"]
    assert rank_overrides(mine, 3) == mine  # what the user chose stays


def test_rank_1_of_a_launcher_composes_without_hydra_record() -> None:
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2"}
    proc = subprocess.run(
        [sys.executable, "-m", "t4bench", "--cfg", "hydra"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "  output_subdir: null" in proc.stdout and "hydra/job_logging: stdout" in proc.stdout
