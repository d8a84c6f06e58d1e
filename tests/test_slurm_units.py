"""Runs and sweeps on Slurm without a cluster (docs/cluster.md): the job and launcher tags, hw.nodes
against the allocation, the submitit presets' resources and checks, what a re-run of a sweep
reuses, and a SIGTERM that lands in a weakref callback. The real-Slurm cases are in test_slurm.py."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import compose, compose_spec

from t4bench.errors import T4BenchError
from t4bench.sweep import slurm


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

    cfg = compose_spec(["hw.count=2", "hw.nodes=2"])
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


def test_resume_reads_completed_results_by_overrides_and_resubmits_the_gaps(tmp_path: Path) -> None:
    """What a re-run of a sweep takes from the .submitit folder: completed JobReturns by their
    overrides; failed, errored, unfinished and half-written results are not reused."""
    from hydra.core.utils import JobReturn, JobStatus
    from submitit.core.utils import cloudpickle_dump

    from t4bench.sweep import slurm_resume as resume

    def job(name: str, outcome: str, status: JobStatus | None, seed: int) -> None:
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}_submitted.pkl").write_bytes(b"")
        ret = JobReturn(overrides=["model=ncf", f"seed={seed}"], status=status or JobStatus.COMPLETED)
        cloudpickle_dump((outcome, ret if status else "Traceback ..."), folder / f"{name}_0_result.pkl")

    job("7_0", "success", JobStatus.COMPLETED, 0)
    job("7_1", "success", JobStatus.FAILED, 1)  # raised in the job (e.g. its time limit)
    job("7_2", "error", None, 2)
    for name in ("7_3", "8_0"):  # queued, running, or gone without a result; 8_0 half-written
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}_submitted.pkl").write_bytes(b"")
    (tmp_path / "8_0" / "8_0_0_result.pkl").write_bytes(b"\x80half")
    (tmp_path / "7").mkdir()  # the array's sbatch script folder: not a job
    (tmp_path / "7" / "7_submission.sh").write_text("#!/bin/bash")
    assert resume.folder_root(str(tmp_path / "%j")) == tmp_path
    done = resume.completed(tmp_path)
    assert list(done) == [("model=ncf", "seed=0")]
    assert resume.unfinished(tmp_path) == ["7_3", "8_0"]
    found = [done.get(("model=ncf", f"seed={s}")) for s in range(5)]
    assert resume.gaps(found) == [(1, 5)]
    assert resume.gaps([None, found[0], None, None, found[0]]) == [(0, 1), (2, 4)]
    assert resume.gaps([]) == [] and resume.in_slurm([]) == []


def test_a_sigterm_that_lands_in_a_weakref_callback_still_stops_the_run() -> None:
    """A scancel'ed job's SIGTERM whose handler ran inside a weakref callback (here: at `del
    thing`; in a CI run of the controller-stop test below: while the job's run started, in a
    WeakKeyDictionary's `remove`): Python prints such an exception as "Exception ignored" and goes
    on, so the run trained to the end and closed FINISHED. It must still raise where the run is,
    at once, not only when the block ends."""
    import weakref

    from t4bench.errors import RunTerminated
    from t4bench.signals import sigterm_raises

    class Thing:
        pass

    def on_collect(_ref: object) -> None:
        signal.raise_signal(signal.SIGTERM)  # the handler raises in here: Python drops it

    before = signal.getsignal(signal.SIGTERM), sys.unraisablehook
    started = time.monotonic()
    with pytest.raises(RunTerminated), sigterm_raises():
        thing = Thing()
        ref = weakref.ref(thing, on_collect)  # kept: its callback runs when thing goes
        del thing
        while time.monotonic() < started + 3:  # a run training on
            time.sleep(0.01)
    assert ref() is None
    assert time.monotonic() - started < 2, "raised only when the block ended, not where the run was"
    assert (signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before


def test_job_progress_says_submitted_jobs_then_job_i_of_n_with_an_eta_as_results_appear(tmp_path: Path) -> None:
    """The controller's lines come from the files submitit's jobs write in .submitit: an earlier
    run's job (reused) is counted as done and never reported again; a job without a result is not
    counted; every finished job is reported once, the last one at the end of the launch."""
    from t4bench.sweep.submitit_progress import JobProgress

    def job(name: str, result: bool) -> None:
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}_submitted.pkl").write_bytes(b"")
        if result:
            (folder / f"{name}_0_result.pkl").write_bytes(b"")

    job("3_0", result=True)  # an earlier run's completed job: reused, one of the 3
    lines: list[str] = []
    with JobProgress(tmp_path, total=3, already_done=1, say=lines.append, poll_s=3600) as progress:
        job("7_0", result=False)
        job("7_1", result=False)
        progress.tick()
        assert lines == ["[t4bench] 2 job(s) submitted to Slurm (7_0 ... 7_1)"]
        time.sleep(0.05)
        (tmp_path / "7_1" / "7_1_0_result.pkl").write_bytes(b"")
        progress.tick()
        progress.tick()  # nothing new: nothing said
        assert len(lines) == 2 and lines[1].startswith("[t4bench] sweep job 2/3 done (")
        assert "; sweep ETA " in lines[1] and lines[1].endswith(" (Slurm job 7_1)")
        (tmp_path / "7_0" / "7_0_0_result.pkl").write_bytes(b"")
    assert len(lines) == 3 and lines[2].startswith("[t4bench] sweep job 3/3 done (")
    assert lines[2].endswith("; sweep done (Slurm job 7_0)")
