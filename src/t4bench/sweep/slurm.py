"""What Slurm adds to a run: the job it ran in and the sweep launcher that put it there (MLflow tags,
so that one experiment's Slurm and local sweeps are told apart), and the node count of a multi-node
run checked against the allocation.

Rank, world size and rendezvous under `srun` are read in `t4bench.run_env` (SLURM_PROCID,
SLURM_NTASKS, SLURM_JOB_NODELIST); this module only reads the job's identity and node count.
Nothing here imports Slurm or submitit: it runs the same on a laptop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from t4bench.tracking import names

if TYPE_CHECKING:
    from t4bench.spec import RunSpec

#: how much earlier than asked Slurm may send a job's --signal (its event resolution; man sbatch)
SIGNAL_SLACK_S = 60
#: t4bench.sweep_launcher when the run was not one job of a --multirun
NO_SWEEP = "none"


def job_id(environ: Mapping[str, str]) -> str | None:
    """The Slurm job this process runs in, as `squeue`/`sacct` show it: `<array job>_<task>` for a
    task of a job array (what hydra/launcher=submitit_slurm submits), else the job id; None outside
    Slurm."""
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return environ.get("SLURM_JOB_ID") or None


def sweep_launcher() -> str:
    """The hydra/launcher of the --multirun this run is a job of (basic, packed, joblib,
    submitit_slurm, submitit_local); `NO_SWEEP` for a single run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return NO_SWEEP
    return str(HydraConfig.get().runtime.choices.get("hydra/launcher") or "basic")


def tags(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """t4bench.sweep_launcher and, inside a Slurm job, t4bench.slurm.job_id: tags every run of this
    process carries from its creation."""
    environ = os.environ if environ is None else environ
    found = {names.SWEEP_LAUNCHER: sweep_launcher()}
    job = job_id(environ)
    if job:
        found[names.SLURM_JOB_ID] = job
    return found


def nodes_error(nodes: int, count: int, world_size: int, environ: Mapping[str, str]) -> str | None:
    """Why hw.nodes=`nodes` with hw.count=`count` (ranks per node) cannot run where `world_size`
    ranks were started; None when it can. hw.nodes>1 needs one rank per GPU started by srun (or
    torchrun) on every node of the allocation: t4bench starts ranks on its own node only."""
    if nodes < 1:
        return f"hw.nodes={nodes}: must be 1 or more"
    if nodes == 1:
        return None
    allocated = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES")
    if world_size <= 1:
        where = f"this Slurm job has {allocated} node(s)" if allocated else "no Slurm allocation here"
        return (
            f"hw.nodes={nodes}: a multi-node run is started by srun, one task per GPU "
            f"(srun --nodes={nodes} --ntasks-per-node={count} python -m t4bench ...); {where}"
        )
    if allocated and int(allocated) != nodes:
        return f"hw.nodes={nodes} but this Slurm job step runs on {allocated} node(s)"
    if count > 1 and world_size != nodes * count:
        return f"hw.nodes={nodes} x hw.count={count} = {nodes * count} ranks, but srun started {world_size}"
    return None


def signal_error(timeout_min: int, signal_delay_s: int) -> str | None:
    """Why a submitit Slurm job with this time limit and pre-timeout signal delay cannot run; None
    when it can. Slurm may send the signal up to 60 s earlier than asked (sbatch --signal), and
    submitit's USR2 at the job's start stops it at once: the plugin's default of 120 s does that
    to every job of a 2-minute limit (and a 1-minute job got it after 19 s here)."""
    if timeout_min <= 0:
        return f"hydra.launcher.timeout_min={timeout_min}: a Slurm job's time limit must be positive"
    if signal_delay_s + SIGNAL_SLACK_S >= timeout_min * 60:
        return (
            f"hydra.launcher.signal_delay_s={signal_delay_s} is too close to the time limit "
            f"timeout_min={timeout_min} ({timeout_min * 60} s): Slurm may send submitit's pre-timeout "
            f"signal up to {SIGNAL_SLACK_S} s early, which would stop the jobs at their start; "
            f"keep signal_delay_s + {SIGNAL_SLACK_S} below {timeout_min * 60}"
        )
    return None


def launcher_error(spec: RunSpec) -> str | None:
    """The sweep's Slurm launcher settings checked before the sweep starts (None: fine, or not a
    Slurm launcher)."""
    if not spec.sweep.target("launcher").endswith("SlurmLauncher"):
        return None
    launcher = spec.sweep.launcher
    return signal_error(int(launcher.get("timeout_min", 0)), int(launcher.get("signal_delay_s", 0)))
