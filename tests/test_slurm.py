"""Runs and sweeps on Slurm (docs/cluster.md): the job and launcher tags, hw.nodes against the
allocation, the submitit presets' resources and checks, and, against a real single-host Slurm
(tests/slurm_cluster.py), a 3-seed NCF sweep through hydra/launcher=submitit_slurm, a scancel'ed
job and a 2-rank srun run."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA_ROOT, REPO, compose
from mlflow.tracking import MlflowClient
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401  # the fixture

from t4bench import mlflow_names as names
from t4bench.errors import T4BenchError
from t4bench.sweep import slurm

NCF_MINI = ("model=ncf", "max_epochs=1", "progress=plain", "tracking.system_metrics_interval_s=0")


# --- in-process ---------------------------------------------------------------------------------


def test_job_id_is_the_array_task_as_squeue_shows_it() -> None:
    assert slurm.job_id({"SLURM_JOB_ID": "41", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "1"}) == "40_1"
    assert slurm.job_id({"SLURM_JOB_ID": "41"}) == "41"
    assert slurm.job_id({}) is None


def test_nodes_need_an_srun_with_one_task_per_gpu_on_each_node() -> None:
    assert slurm.nodes_error(1, 4, 1, {}) is None
    assert slurm.nodes_error(2, 2, 4, {"SLURM_JOB_NUM_NODES": "2"}) is None
    outside = slurm.nodes_error(2, 2, 1, {})
    assert outside and "srun --nodes=2 --ntasks-per-node=2" in outside
    assert "runs on 3 node(s)" in (slurm.nodes_error(2, 2, 4, {"SLURM_JOB_NUM_NODES": "3"}) or "")
    assert "= 4 ranks, but srun started 6" in (slurm.nodes_error(2, 2, 6, {"SLURM_JOB_NUM_NODES": "2"}) or "")
    assert slurm.nodes_error(0, 1, 1, {})


def test_resolve_takes_count_as_ranks_per_node_under_srun() -> None:
    from t4bench import hardware, run_env

    cfg = compose(["hw.count=2", "hw.nodes=2"])
    srun = {"SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2"}
    srun |= {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_ID": "7"}
    env = run_env.resolve(cfg, srun, hardware.Found((), "none"))
    assert (env.launcher, env.rank, env.world_size, env.local_rank, env.spawn) == ("slurm", 3, 4, 1, False)
    assert env.nodelist == "n[1-2]" and env.master_port == 20007
    with pytest.raises(T4BenchError, match=r"hw\.nodes=2: a multi-node run is started by srun"):
        run_env.resolve(cfg, {}, hardware.Found((), "none"))


def test_slurm_preset_takes_gpus_from_hw_and_refuses_a_signal_after_the_limit() -> None:
    from hydra_plugins.t4bench_slurm import launcher

    cfg = compose(["hw=t4", "hw.count=2"])
    params = launcher._gpu_params({"gpus_per_node": None, "cpus_per_gpu": 6, "cpus_per_task": None}, cfg)
    assert (params["gpus_per_node"], params["cpus_per_task"]) == (2, 12) and "cpus_per_gpu" not in params
    cpu = launcher._gpu_params({"gpus_per_node": None, "cpus_per_gpu": 6, "cpus_per_task": None}, compose([]))
    assert cpu["gpus_per_node"] is None and cpu["cpus_per_task"] is None
    with pytest.raises(T4BenchError, match=r"signal_delay_s=120 is too close to the time limit timeout_min=2"):
        launcher.SlurmLauncher(timeout_min=2, signal_delay_s=120, submitit_folder="x")
    assert slurm.signal_error(5, 30) is None and slurm.signal_error(1, 20)
    assert launcher._varying([["model=ncf", "seed=0"], ["model=ncf", "seed=1"]]) == {"seed"}


# --- a real Slurm -------------------------------------------------------------------------------


def _env(cluster: SlurmCluster, tmp_path: Path) -> dict[str, str]:
    return {
        **cluster.env,
        "PYTHONPATH": str(REPO / "src"),
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }


def _sweep(tmp_path: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "t4bench",
        "--multirun",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.timeout_min=5",
        "hydra.launcher.signal_delay_s=30",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *NCF_MINI,
        *overrides,
    ]


def _runs(tmp_path: Path) -> list:  # type: ignore[type-arg]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("t4bench-ncf")
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id])
    return [run for run in runs if run.data.tags.get("t4bench.sweep_role") != "parent" and names.SEED in run.data.tags]


def test_seed_sweep_through_slurm_finishes_every_run_with_its_job_id(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        _sweep(tmp_path, "seed=0,1,2"),
        env=_env(slurm_cluster, tmp_path),
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = _runs(tmp_path)
    assert sorted(run.data.tags[names.SEED] for run in runs) == ["0", "1", "2"]
    assert {run.info.status for run in runs} == {"FINISHED"}
    assert {run.data.tags[names.SWEEP_LAUNCHER] for run in runs} == {"submitit_slurm"}
    jobs = {run.data.tags[names.SLURM_JOB_ID] for run in runs}
    accounted = slurm_cluster.run("sacct", "-n", "-X", "-P", "-o", "JobID,JobName").stdout.split()
    # every run's job is in Slurm's accounting, named after its seed
    names_of = dict(line.split("|", 1) for line in accounted)
    assert jobs <= set(names_of), (jobs, names_of)
    assert {names_of[run.data.tags[names.SLURM_JOB_ID]] for run in runs} == {f"t4bench-ncf:seed={s}" for s in "012"}
    assert list((tmp_path / "sweep" / ".submitit").rglob("*_log.out")), "job logs under the sweep dir"


def test_scancel_of_a_running_job_ends_the_sweep_in_one_line_with_a_killed_run(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    sweep = subprocess.Popen(
        [*_sweep(tmp_path, "seed=5"), "max_epochs=50"],
        env=_env(slurm_cluster, tmp_path),
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not _runs(tmp_path) and time.monotonic() < deadline and sweep.poll() is None:
            time.sleep(1)
        runs = _runs(tmp_path)
        assert runs, "the job's MLflow run never started"
        time.sleep(3)  # into training
        slurm_cluster.run("scancel", runs[0].data.tags[names.SLURM_JOB_ID])
        _, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 2, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("t4bench: error:")]
    assert len(errors) == 1 and "CANCELLED" in errors[0] and "run the same command again" in errors[0], stderr
    assert "Traceback" not in stderr
    (run,) = _runs(tmp_path)
    assert run.info.status == "KILLED"


def test_two_ranks_started_by_srun_train_one_run_over_gloo(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """What a multi-node job step does on each node, on one: srun starts the ranks, t4bench reads
    rank, world size and rendezvous from SLURM_* (no torchrun)."""
    done = subprocess.run(
        ["srun", "--ntasks=2", "--nodes=1", "--cpus-per-task=1", sys.executable, "-m", "t4bench", *NCF_MINI],
        env=_env(slurm_cluster, tmp_path),
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = _runs(tmp_path)
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert (tags[names.LAUNCHER], tags[names.WORLD_SIZE], tags[names.DIST_BACKEND]) == ("slurm", "2", "ddp/gloo")
    assert tags[names.SLURM_JOB_ID].isdigit() and tags[names.SWEEP_LAUNCHER] == slurm.NO_SWEEP
