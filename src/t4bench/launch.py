"""Starting ranks (`hw.count=N`) and joining ranks an outer launcher started.

- `hw.count=N`, no outer launcher: this process starts N local ranks through PyTorch's own
  launcher API (`torch.distributed.launcher.api.elastic_launch`, what torchrun runs: c10d
  rendezvous, worker monitoring, the whole group torn down when one rank fails), or through
  `horovod.run` (gloo controller) for `dist=horovod`. The ranks run a function; Hydra ran once here.
- An outer launcher already started the ranks: torchrun / torch.distributed.run (RANK, WORLD_SIZE,
  LOCAL_RANK, MASTER_ADDR/PORT), horovodrun or mpirun (HOROVOD_* / OMPI_COMM_WORLD_*), SLURM srun
  (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the first node of SLURM_JOB_NODELIST as master).

torch is imported inside the functions that need it: the runner calls `preflight` before torch
has loaded, so a bad `dist=` choice fails in about a second.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from omegaconf import DictConfig

from t4bench import hardware
from t4bench.errors import RunTerminated, T4BenchError

#: the variables that say which launcher started this process, checked in this order
_LOCAL_RANK_VARS = ("LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")


class RanksFailed(T4BenchError):
    """A rank of a job this process launched failed; the message names the rank and the error."""


def launched_world_size() -> int:
    """Ranks an outer launcher started (1 when run directly)."""
    return hardware.outer_world_size()


def local_rank() -> int:
    for var in _LOCAL_RANK_VARS:
        if os.environ.get(var):
            return int(os.environ[var])
    return 0


def launcher() -> str:
    """Who started this process: torchrun | horovodrun | mpirun | slurm | none."""
    if os.environ.get("TORCHELASTIC_RUN_ID") or (os.environ.get("WORLD_SIZE") and os.environ.get("MASTER_ADDR")):
        return "torchrun"
    if os.environ.get("HOROVOD_RANK") is not None:
        return "horovodrun"
    if os.environ.get("OMPI_COMM_WORLD_SIZE"):
        return "mpirun"
    if os.environ.get("SLURM_PROCID") is not None and int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return "slurm"
    return "none"


def should_spawn(cfg: DictConfig) -> bool:
    return int(cfg.hw.count) > 1 and launched_world_size() == 1


def dist_backend(cfg: DictConfig) -> str:
    return str(cfg.dist.get("backend", "ddp"))


def process_group_backend(cfg: DictConfig) -> str:
    chosen = str(cfg.dist.get("process_group", "auto"))
    if chosen == "auto":
        return "nccl" if hardware.uses_gpu(cfg) else "gloo"
    return chosen


def preflight(cfg: DictConfig) -> None:
    """Fail fast (before any run exists) when the chosen backend cannot work here."""
    backend = dist_backend(cfg)
    if backend == "horovod":
        from t4bench import distributed

        distributed.import_horovod()
    elif backend != "ddp":
        raise T4BenchError(f"dist.backend={backend!r}: choose ddp or horovod")
    if backend == "ddp" and (int(cfg.hw.count) > 1 or launched_world_size() > 1):
        import torch.distributed as dist

        group = process_group_backend(cfg)
        available = {"nccl": dist.is_nccl_available(), "gloo": dist.is_gloo_available()}
        if group in available and not available[group]:
            raise T4BenchError(f"dist.process_group={group}: this torch build has no {group} backend")


# --------------------------------------------------------------------------------------------
# this process starts the ranks


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(cfg: DictConfig, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run `fn(*args)` on `hw.count` local ranks; return rank 0's result.

    `fn` must be importable by name (the ranks are fresh interpreters); it joins the group with
    `init_process_group`, which reads the environment the launcher set.
    """
    count = int(cfg.hw.count)
    if dist_backend(cfg) == "horovod":
        return _spawn_horovod(cfg, fn, args, count)
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # the launcher's INFO lines (rendezvous, worker group state) are noise in a benchmark's output
    logging.getLogger("torch.distributed.elastic").setLevel(logging.WARNING)
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=count,
        run_id=f"t4bench-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        rdzv_endpoint=f"127.0.0.1:{_free_port()}",
        max_restarts=int(cfg.dist.get("max_restarts", 0)),
        monitor_interval=0.5,
        start_method="spawn",
    )
    try:
        results = elastic_launch(config, fn)(*args)
    except ChildFailedError as err:
        raise RanksFailed(_describe_failures(err)) from None
    except SignalException as err:  # the agent's own SIGTERM/SIGINT handler; it stopped the ranks
        raise RunTerminated(f"signal {int(err.sigval)}") from None
    return results[0]


def _describe_failures(err: Any) -> str:
    parts = []
    for local, failure in sorted(err.failures.items()):
        raw = failure.message
        if isinstance(raw, dict):  # the @record error file: {"message": {"message": ..., ...}} or a str
            inner = raw.get("message", raw)
            raw = inner.get("message", str(inner)) if isinstance(inner, dict) else inner
        text = str(raw or "").strip()
        last = text.splitlines()[-1] if text else f"exit code {failure.exitcode}"
        parts.append(f"rank {getattr(failure, 'global_rank', getattr(failure, 'rank', local))} (exit code {failure.exitcode}): {last}")
    return f"{len(parts)} of the launched ranks failed: " + "; ".join(parts)


def _spawn_horovod(cfg: DictConfig, fn: Callable[..., Any], args: tuple[Any, ...], count: int) -> Any:
    from t4bench import distributed

    distributed.import_horovod()  # fails with the install hint
    import horovod

    try:
        results = horovod.run(fn, args=args, np=count, use_gloo=True, verbose=0)
    except Exception as err:  # horovod.run raises RuntimeError with the failing ranks
        raise RanksFailed(f"horovod ranks failed: {str(err).strip().splitlines()[-1]}") from None
    return results[0]


# --------------------------------------------------------------------------------------------
# every rank: join the group


def _slurm_env() -> None:
    """srun sets SLURM_*; torch.distributed's env:// wants RANK, WORLD_SIZE, MASTER_ADDR/PORT."""
    if os.environ.get("RANK") or os.environ.get("SLURM_PROCID") is None:
        return
    os.environ["RANK"] = os.environ["SLURM_PROCID"]
    os.environ["WORLD_SIZE"] = os.environ.get("SLURM_NTASKS", "1")
    os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
    if "MASTER_ADDR" not in os.environ:
        nodes = os.environ.get("SLURM_JOB_NODELIST", "127.0.0.1")
        try:
            out = subprocess.run(
                ["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, timeout=30
            )
            first = out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else nodes
        except (OSError, subprocess.TimeoutExpired):
            first = nodes.split(",")[0]
        os.environ["MASTER_ADDR"] = first
    # a port every task of the job computes alike, away from the usual 29500
    os.environ.setdefault("MASTER_PORT", str(20000 + int(os.environ.get("SLURM_JOB_ID", "0")) % 20000))


def _mpi_env() -> None:
    """dist=ddp under mpirun/horovodrun: map the MPI rank variables (MASTER_ADDR must be given)."""
    if os.environ.get("RANK"):
        return
    for rank_var, size_var, local_var in (
        ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ):
        if os.environ.get(rank_var) is not None and os.environ.get(size_var):
            os.environ["RANK"] = os.environ[rank_var]
            os.environ["WORLD_SIZE"] = os.environ[size_var]
            os.environ.setdefault("LOCAL_RANK", os.environ.get(local_var, "0"))
            if "MASTER_ADDR" not in os.environ:
                raise T4BenchError(
                    "dist=ddp under mpirun/horovodrun needs MASTER_ADDR and MASTER_PORT in the "
                    "environment (or use dist=horovod, or torchrun)"
                )
            return


def init_process_group(cfg: DictConfig) -> None:
    """Join the group the launcher described in the environment (nothing in a single process)."""
    import torch
    import torch.distributed as dist

    from t4bench import distributed

    if distributed.active():
        return
    backend = dist_backend(cfg)
    if backend == "horovod":
        hvd = distributed.import_horovod()
        hvd.init()
        distributed.use_horovod(hvd, str(cfg.dist.get("compression", "none")))
        if hardware.uses_gpu(cfg):
            torch.cuda.set_device(int(hvd.local_rank()) % torch.cuda.device_count())
        return
    if launched_world_size() <= 1:
        return
    _slurm_env()
    _mpi_env()
    group = process_group_backend(cfg)
    if group == "nccl":
        torch.cuda.set_device(local_rank() % torch.cuda.device_count())
    dist.init_process_group(backend=group, timeout=timedelta(seconds=int(cfg.dist.get("timeout_s", 600))))
