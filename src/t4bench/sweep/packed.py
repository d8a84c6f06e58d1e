"""Hydra callback of `hw.runs_per_gpu=N` sweeps (docs/sweeps.md "Several runs on one GPU"): before
the sweep starts anything, check that N runs fit (t4bench.packing.check) and that the launcher can
run N at once; with `hw.mps=true` start CUDA MPS for the sweep and stop it at its end.

Listed first in conf/hydra/callbacks/sweep_summary.yaml so a refusal comes before the sweep's
MLflow parent run exists."""

from __future__ import annotations

import atexit
import logging
import shutil
import subprocess
import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from t4bench import packing
from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec, build_spec

log = logging.getLogger(__name__)

MPS_CONTROL = "nvidia-cuda-mps-control"


def _packed(spec: RunSpec) -> bool:
    """Runs of this sweep share a GPU through the joblib launcher (Optuna's own workers do not)."""
    return packing.runs_per_gpu(spec) > 1 and not _is_optuna(spec)


def _is_optuna(spec: RunSpec) -> bool:
    return spec.sweep.target("sweeper").startswith("hydra_plugins.t4bench_sweeper")


def launcher_error(spec: RunSpec) -> str | None:
    """A seed sweep with Hydra's basic launcher runs one job at a time: packing needs the packed one.
    Also the Slurm launcher's time limit and signal delay (t4bench.sweep.slurm)."""
    from t4bench.sweep import slurm

    slurm_error = slurm.launcher_error(spec)
    if slurm_error:
        return slurm_error
    runs = packing.runs_per_gpu(spec)
    if runs == 1 or _is_optuna(spec):
        return None
    if spec.sweep.target("launcher").endswith("BasicLauncher"):
        return f"hw.runs_per_gpu={runs}: Hydra's basic launcher runs one job at a time; add hydra/launcher=packed"
    return None


def start_mps() -> bool:
    """Start the MPS control daemon; True when this call started it (False: one runs already)."""
    if shutil.which(MPS_CONTROL) is None:
        raise T4BenchError(f"hw.mps=true: {MPS_CONTROL} is not on PATH (it comes with the NVIDIA driver)")
    done = subprocess.run([MPS_CONTROL, "-d"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        text = (done.stdout + done.stderr).strip()
        if "already running" in text.lower():
            log.info("CUDA MPS already runs: the sweep uses it and leaves it running")
            return False
        raise T4BenchError(f"hw.mps=true: {MPS_CONTROL} -d failed: {text or done.returncode}")
    log.info("started CUDA MPS (%s -d)", MPS_CONTROL)
    return True


#: how long `quit` may wait for the daemon's clients to end before the sweep gives up on it
MPS_QUIT_TIMEOUT_S = 120


def release_workers() -> None:
    """End the launcher's idle worker processes now. joblib keeps its loky workers alive for five
    minutes after the last job, each holding its CUDA context: MPS's `quit` waits for every client,
    so a packed GNMT sweep whose 16 runs took 2 minutes sat 7 more idle before it returned (and its
    runs-per-hour read 106 instead of ~470). Only called after a packed sweep, whose joblib
    launcher made the process's one reusable executor: this call returns that one."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)


def stop_mps() -> None:
    release_workers()
    try:
        subprocess.run(
            [MPS_CONTROL], input="quit\n", text=True, capture_output=True, check=False, timeout=MPS_QUIT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:  # a client that does not end: the sweep's result is kept anyway
        log.warning(
            "CUDA MPS did not stop within %d s (a client still runs); stop it with `echo quit | %s`",
            MPS_QUIT_TIMEOUT_S,
            MPS_CONTROL,
        )
        return
    log.info("stopped CUDA MPS")


class PackingCallback(Callback):
    def __init__(self) -> None:
        self.started_mps = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            spec = build_spec(config)
            error = launcher_error(spec)
            if error:
                raise T4BenchError(error)
            packing.check(spec)
            worker = int(spec.sweep.sweeper.get("worker_index", 0) or 0)
            if bool(spec.hw.get("mps", False)) and worker == 0:  # Optuna workers > 0 share worker 0's
                self.started_mps = start_mps()
                if self.started_mps:  # a sweep that dies still stops the daemon it started
                    atexit.register(self.on_multirun_end, config)
        except T4BenchError as err:
            print(f"t4bench: error: {err}", file=sys.stderr)
            sys.exit(2)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.started_mps:
            stop_mps()  # releases the workers first: MPS waits for them
            self.started_mps = False
        elif _packed(build_spec(config)):  # idle workers would hold GPU memory for minutes after the sweep returned
            release_workers()
