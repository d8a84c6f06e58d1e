"""What makes a run repeat itself: its seeds and, with `deterministic=true`, deterministic kernels.

One `seed` drives Python, NumPy, the framework and the data order. Python's and NumPy's
generators are seeded here for every framework; each framework's rank session seeds its own
(`seed_torch` for PyTorch), so a TensorFlow run never imports torch.

`deterministic=true`, the framework-neutral part: which perf options it refuses (before any run
exists) and the environment its ranks need before CUDA starts. The framework switches themselves
are each wing's (`t4bench.pytorch.determinism`, `t4bench.tf.rank`), which tag what they set. Why
a switch at all: GPU training is not bitwise reproducible run to run by default (cuDNN
autotuning, atomics in the embedding and LSTM backward passes), so two runs of one seed can end
epochs apart (docs/convergence.md, "The schedule-unit experiment"). With the switch on, two runs
of one seed on the same GPU and software are the same run; what differs between seeds is then
the seed's doing.

Only the standard library and OmegaConf load here (the preflight checks import it).
"""

from __future__ import annotations

import os
import random
from collections.abc import MutableMapping
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec
from t4bench.tracking import names


def seed_python(seed: int) -> None:
    """Python's and NumPy's global generators, and hashing in processes started from here."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    os.environ["PYTHONHASHSEED"] = str(seed)


def seed_torch(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def seed_everything(seed: int) -> None:
    """Python, NumPy and torch at once (scripts that train PyTorch outside a rank)."""
    seed_python(seed)
    seed_torch(seed)


#: cuBLAS's deterministic workspace setting (NVIDIA's cuBLAS docs, "Results reproducibility"):
#: read when the process's first cuBLAS handle is made, so it is set before CUDA starts
CUBLAS_WORKSPACE_CONFIG = ":4096:8"
#: the two values cuBLAS and torch accept as deterministic (":16:8" uses less memory)
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")
#: perf options that cannot be deterministic, with why. cuDNN's autotuner picks each
#: convolution's algorithm by timing it, so two runs may pick different ones. Everything else
#: is allowed: torch.compile (Inductor's deterministic mode is switched on with it), CUDA graphs
#: (a replay runs the captured kernels), fused/foreach optimizers (elementwise), bf16/fp16/tf32
#: (same kernels, same rounding), prefetch and gpu_data (copies and seeded generators), and
#: cudnn_sdp (an attention backend without a deterministic backward raises like any other op:
#: one line, see t4bench.pytorch.determinism; which backends pass is to be seen on the GPU)
REFUSED_PERF = {
    "cudnn_benchmark": "cuDNN's autotuner picks kernels by timing them, so runs of one seed may differ",
}


def perf_option(spec: RunSpec, option: str) -> Any:
    """perf.<option> as `PerfOptions.from_config` resolves it (its value, else the model's entry)."""
    value = OmegaConf.select(spec.config, f"perf.{option}", default=None)
    if value is None and spec.model.name:
        value = OmegaConf.select(spec.config, f"perf.models.{spec.model.name}.{option}", default=None)
    return value


def check_deterministic(spec: RunSpec) -> None:
    """deterministic=true with a perf option that cannot be deterministic: one line, before any run."""
    if not spec.deterministic:
        return
    for option, why in REFUSED_PERF.items():
        if perf_option(spec, option):
            raise T4BenchError(
                f"deterministic=true and perf.{option}=true cannot go together ({why}); "
                f"set perf.{option}=false or deterministic=false"
            )


def deterministic_environment(on: bool, environ: MutableMapping[str, str] | None = None) -> None:
    """deterministic=true: CUBLAS_WORKSPACE_CONFIG (and Inductor's deterministic mode) in this
    process's environment before any CUDA context exists; ranks spawned from here inherit it (ranks
    an outer launcher started, torchrun or srun, each run this themselves). A value already
    deterministic is left alone. `on`: the run's `deterministic`."""
    if not on:
        return
    environ = os.environ if environ is None else environ
    if environ.get("CUBLAS_WORKSPACE_CONFIG") not in CUBLAS_DETERMINISTIC:
        environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG
    # read when torch._inductor.config is first imported; the PyTorch rank also sets it in place
    environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"


def deterministic_tags(on: bool) -> dict[str, str]:
    """The run's t4bench.deterministic tag, from what the framework reports it set."""
    return {names.DETERMINISTIC: str(bool(on)).lower()}
