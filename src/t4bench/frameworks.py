"""The frameworks a run can train with, by the name a benchmark class declares
(`Benchmark.framework`, "pytorch" by default): each wing's `Framework` (t4bench.framework), imported
here like any module. Those are light: a wing's torch or TensorFlow loads only when `join`, `spawn`
or `resume` of the run's own framework is called, so a TensorFlow run never loads torch and a
PyTorch run never loads TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from t4bench.errors import T4BenchError
from t4bench.framework import Framework, Join, RankSession, Resume, Spawn
from t4bench.pytorch.framework import PYTORCH
from t4bench.tf.framework import TENSORFLOW
from t4bench.tracking import names

if TYPE_CHECKING:
    from t4bench.benchmark import Benchmark
    from t4bench.run_env import RunEnvironment
    from t4bench.spec import RunSpec

# Spawn: the type of `spawner`'s answer, named here for the runner
__all__ = [
    "FRAMEWORKS",
    "Spawn",
    "entry",
    "framework_of",
    "join",
    "preflight",
    "restore_finished",
    "resumed_run",
    "spawner",
]

T = TypeVar("T")

#: name -> wing; a framework of one's own is one more entry (tests/test_frameworks.py adds NumPy's)
FRAMEWORKS: dict[str, Framework] = {wing.name: wing for wing in (PYTORCH, TENSORFLOW)}


def _part(framework: str, what: str, part: Callable[[Framework], T | None]) -> T:
    """`part` of `framework`'s wing; one line naming the frameworks that have one when it has none."""
    wing = FRAMEWORKS.get(framework)
    found = part(wing) if wing is not None else None
    if found is None:
        known = ", ".join(name for name, other in FRAMEWORKS.items() if part(other) is not None)
        raise T4BenchError(f"framework {framework!r} has no {what}; known: {known}")
    return found


def entry(framework: str) -> Join:
    """The `join` function of `framework`."""
    return _part(framework, "rank entry", lambda wing: wing.join)


def spawner(framework: str) -> Spawn:
    """The `spawn` function of `framework` (for hw.count=N without an outer launcher)."""
    return _part(framework, "rank spawner", lambda wing: wing.spawn)


def preflight(framework: str, env: RunEnvironment) -> None:
    """`framework`'s check of its ranks' backends (torch.distributed, horovod.torch), if it has one."""
    wing = FRAMEWORKS.get(framework)
    if wing is not None and wing.preflight is not None:
        wing.preflight(env)


def _resume(framework: str) -> Resume:
    return _part(framework, "resume (checkpoints)", lambda wing: wing.resume)


def resumed_run(framework: str, cfg: RunSpec, env: RunEnvironment) -> Any:
    """`resume=...`: the checkpoint's MLflow run as it was before this attempt, reopened by
    `framework` (None without resume)."""
    if cfg.get("resume") in (None, ""):
        return None
    return _resume(framework).reopened_run(cfg, env)


def restore_finished(framework: str, cfg: RunSpec, run: Any) -> None:
    """After a failed attempt to train the FINISHED `run` further: its status and outcome as they were."""
    from t4bench.tracking.client import mlflow_client

    client = mlflow_client(str(cfg.tracking.uri))
    _resume(framework).restore(client, run.info.run_id, names.FINISHED, run.data.tags.get(names.OUTCOME))


def framework_of(cfg: RunSpec, bench_cls: type[Benchmark]) -> str:
    """The framework `bench_cls` declares; a `model.framework` in the config must agree with it."""
    declared = str(bench_cls.framework)
    configured = cfg.model.get("framework")
    if configured is not None and str(configured) != declared:
        raise T4BenchError(
            f"model.framework={configured} but model.benchmark={cfg.model.benchmark} is a {declared} benchmark"
        )
    return declared


def join(cfg: RunSpec, env: RunEnvironment, bench_cls: type[Benchmark]) -> RankSession:
    """Join this rank's group with the framework `bench_cls` declares."""
    return entry(framework_of(cfg, bench_cls))(cfg, env)
