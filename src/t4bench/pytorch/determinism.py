"""`deterministic=true` in a PyTorch rank: the process-wide switches, and the error torch raises for
an op without a deterministic kernel turned into one line.

    determinism.apply(on, compiled)     # every run, on or off: the switches are process-wide, and a
                                        # Hydra multirun may run jobs of both arms in one process
    determinism.active()                # what torch says is on (the run's t4bench.deterministic tag)
    with determinism.explained(): ...   # RuntimeError "<op> does not have a deterministic
                                        # implementation" -> T4BenchError naming <op>

warn_only stays False: a run asked to be deterministic must never be silently non-deterministic,
so an op without a deterministic implementation ends the run (FAILED, its MLflow run and logs
kept) with one line naming the op, rather than a warning nobody reads in a sweep's logs.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

import torch

from t4bench.errors import T4BenchError
from t4bench.seeding import CUBLAS_DETERMINISTIC, CUBLAS_WORKSPACE_CONFIG

#: torch's message for an op without a deterministic implementation: "<op> does not have a
#: deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'..."
_NO_DETERMINISTIC_OP = re.compile(r"^\s*(?P<op>\S+) does not have a deterministic implementation")
#: torch's message for a cuBLAS call whose workspace setting is not deterministic
_CUBLAS_NOT_SET = "CUBLAS_WORKSPACE_CONFIG"


def apply(on: bool, compiled: bool = False) -> None:
    """Deterministic algorithms and cuDNN on (and cuDNN autotuning off), or both off. `compiled`:
    also Inductor's deterministic mode (no on-device benchmarking that changes numerics)."""
    if on and os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in CUBLAS_DETERMINISTIC:
        # t4bench.seeding.deterministic_environment set it before CUDA started; a rank reached
        # without it (a launcher of its own) still gets it before its first cuBLAS handle
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG
    if on or torch.are_deterministic_algorithms_enabled():
        # torch (2.14) imports Inductor's config inside this call, ~1 s of a default run's start-up:
        # a process that never turned them on needs no call to keep them off
        torch.use_deterministic_algorithms(on, warn_only=False)
    torch.backends.cudnn.deterministic = on
    if on:
        torch.backends.cudnn.benchmark = False  # perf.cudnn_benchmark=true was refused at preflight
    if compiled:
        import torch._inductor.config as inductor_config

        inductor_config.deterministic = on


def active() -> bool:
    """Whether this process trains with deterministic kernels (torch's and cuDNN's switches)."""
    return torch.are_deterministic_algorithms_enabled() and bool(torch.backends.cudnn.deterministic)


def explain(err: RuntimeError) -> T4BenchError | None:
    """The one line for torch's refusal of a non-deterministic op; None for any other error."""
    text = str(err)
    found = _NO_DETERMINISTIC_OP.match(text)
    if found:
        return T4BenchError(
            f"deterministic=true: {found['op']} has no deterministic CUDA implementation in torch "
            f"{torch.__version__}; this model cannot train deterministically here (use deterministic=false)"
        )
    if _CUBLAS_NOT_SET in text and "deterministic" in text.lower():
        return T4BenchError(
            "deterministic=true: cuBLAS started before CUBLAS_WORKSPACE_CONFIG was set "
            f"({os.environ.get('CUBLAS_WORKSPACE_CONFIG')!r}); set CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE_CONFIG} "
            "in the environment that starts the run"
        )
    return None


@contextlib.contextmanager
def explained() -> Iterator[None]:
    """Run the block; torch's refusal of a non-deterministic op leaves it as one T4BenchError line."""
    try:
        yield
    except RuntimeError as err:
        line = explain(err)
        if line is None:
            raise
        raise line from err
