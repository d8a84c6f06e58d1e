"""Fault injection, for testing how runs end.

`+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch +callbacks.fail.epoch=2` raises a real
exception inside the loop after epoch 2's evaluation; the run must end FAILED, never RUNNING.

`T4BENCH_KILL_AT=<step>` SIGKILLs the process at one named step of a run's start
(`TRIAL_START_STEPS`); whatever it leaves RUNNING must be closed by the next run of the same
command or by `t4bench runs repair`. `T4BENCH_TERM_AT=<step>` sends SIGTERM there instead (a
scheduler's stop, which the process handles: nothing may be left RUNNING at all).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping


class InjectedFault(RuntimeError):
    pass


class RaiseAtEpoch:
    def __init__(self, epoch: int = 1) -> None:
        self.epoch = epoch

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> None:
        if epoch >= self.epoch:
            raise InjectedFault(f"fault injected after epoch {epoch}")


#: `T4BENCH_KILL_AT=<step>`: the process SIGKILLs itself on reaching `kill_point(<step>)`, so a test
#: stops it exactly between two writes of a run's start (no sleeps, no guessing when to signal)
KILL_AT_ENV = "T4BENCH_KILL_AT"
#: `T4BENCH_TERM_AT=<step>`: SIGTERM to this process at `kill_point(<step>)`
TERM_AT_ENV = "T4BENCH_TERM_AT"
#: the steps a sweep's trial goes through as it starts, in order (docs/reliability.md)
TRIAL_START_STEPS = (
    "parent.created",  # the sweep's parent run exists in MLflow, the study does not know it yet
    "trial.claimed",  # Optuna's trial is asked and claimed by this worker, no MLflow run yet
    "trial.run_created",  # the trial's MLflow run exists, the Optuna trial does not know it yet
    "trial.run_recorded",  # the trial knows its run; its params are not logged yet
    "training.run_created",  # a seed's training run exists, its heartbeat has not started (owner unknown)
)


def kill_point(step: str) -> None:
    """SIGKILL this process here when `T4BENCH_KILL_AT` names `step`, SIGTERM it when
    `T4BENCH_TERM_AT` does (a no-op otherwise)."""
    if os.environ.get(KILL_AT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(TERM_AT_ENV) == step:
        os.kill(os.getpid(), signal.SIGTERM)
