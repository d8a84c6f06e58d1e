"""Starting ranks (`hw.count=N`) and joining ranks an outer launcher started.

- `hw.count=N`, no outer launcher: this process starts N local ranks through PyTorch's own
  launcher API (`torch.distributed.launcher.api.elastic_launch`, what torchrun runs: c10d
  rendezvous, worker monitoring, the whole group torn down when one rank fails), or through
  `horovod.run` (gloo controller) for `dist=horovod`. The ranks run a function; Hydra ran once here.
- An outer launcher already started the ranks: torchrun, horovodrun, mpirun (Open MPI or PMI) or
  SLURM srun. Which one, and this rank's place in it, is read once by `t4bench.run_env` and
  arrives here as a `RunEnvironment`; nothing here reads launcher variables or sets any.

torch is imported inside the functions that need it: the runner calls `preflight` before torch
has loaded, so a bad `dist=` choice fails in about a second.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from t4bench import run_env
from t4bench.errors import RanksFailed, RunTerminated, T4BenchError
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec


def preflight(env: RunEnvironment) -> None:
    """Fail fast (before any run exists) when the chosen backend cannot work here."""
    if env.dist_backend == "horovod":
        from t4bench.pytorch import distributed

        distributed.import_horovod()
    elif env.world_size > 1:
        import torch.distributed as dist

        available = {"nccl": dist.is_nccl_available(), "gloo": dist.is_gloo_available()}
        if env.process_group in available and not available[env.process_group]:
            raise T4BenchError(
                f"dist.process_group={env.process_group}: this torch build has no {env.process_group} backend"
            )


# --------------------------------------------------------------------------------------------
# this process starts the ranks


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(cfg: RunSpec, env: RunEnvironment, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run `fn(*args)` on `env.world_size` local ranks; return rank 0's result.

    `fn` must be importable by name (the ranks are fresh interpreters); each joins the group with
    `init_process_group(cfg, env.for_spawned_rank(os.environ))`.
    """
    count = env.world_size
    if env.launcher == run_env.HOROVOD_RUN:
        return _spawn_horovod(fn, args, count)
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
        rank = getattr(failure, "global_rank", getattr(failure, "rank", local))
        parts.append(f"rank {rank} (exit code {failure.exitcode}): {last}")
    return f"{len(parts)} of the launched ranks failed: " + "; ".join(parts)


def _spawn_horovod(fn: Callable[..., Any], args: tuple[Any, ...], count: int) -> Any:
    from t4bench.pytorch import distributed

    distributed.import_horovod()  # fails with the install hint
    import horovod

    try:
        results = horovod.run(fn, args=args, np=count, use_gloo=True, verbose=0)
    except Exception as err:  # horovod.run raises RuntimeError with the failing ranks
        raise RanksFailed(f"horovod ranks failed: {str(err).strip().splitlines()[-1]}") from None
    return results[0]


# --------------------------------------------------------------------------------------------
# every rank: join the group


def _first_host(nodelist: str) -> str:
    """The first host of a SLURM node list ("gpu[01-04]" -> "gpu01"), as scontrol expands it."""
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30)
        hosts = out.stdout.split() if out.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        hosts = []
    return hosts[0] if hosts else nodelist.split(",")[0]


def _init_method(env: RunEnvironment) -> str:
    """torchrun and our elastic launcher serve a store `env://` finds (their variables); other
    launchers' ranks meet at rank 0's address, given as MASTER_ADDR/PORT or (srun) the first node."""
    if env.launcher in (run_env.TORCHRUN, run_env.ELASTIC_LAUNCH):
        return "env://"
    addr = env.master_addr or (_first_host(env.nodelist) if env.nodelist else None)
    if addr is None or env.master_port is None:
        raise T4BenchError(
            f"dist=ddp under {env.launcher} needs MASTER_ADDR and MASTER_PORT in the environment "
            "(or use dist=horovod, or torchrun)"
        )
    return f"tcp://{addr}:{env.master_port}"


def init_process_group(cfg: RunSpec, env: RunEnvironment) -> None:
    """Join the group of `env`'s ranks (nothing in a single process)."""
    import torch
    import torch.distributed as dist

    from t4bench.pytorch import distributed

    if distributed.active():
        return
    if env.dist_backend == "horovod":
        hvd = distributed.import_horovod()
        hvd.init()
        distributed.use_horovod(hvd, str(cfg.dist.get("compression", "none")))
        if env.device_kind == "cuda":
            torch.cuda.set_device(int(hvd.local_rank()) % torch.cuda.device_count())
        return
    if env.world_size <= 1:
        return
    if env.process_group == "nccl":
        torch.cuda.set_device(env.local_rank % torch.cuda.device_count())
    dist.init_process_group(
        backend=env.process_group,
        init_method=_init_method(env),
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=int(cfg.dist.get("timeout_s", 600))),
    )
