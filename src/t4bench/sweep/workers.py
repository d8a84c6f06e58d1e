"""`hydra.sweeper.n_jobs=N`: the sweep process (worker 0) starts N-1 more workers on this machine,
each the same command line with `hydra.sweeper.worker_index=i`, sharing the study's storage.
Their output goes to `<sweep dir>/worker-<i>.log`.

With `gpus` > 1 (hw.runs_per_gpu=N packing, docs/sweeps.md) worker i runs on GPU i mod gpus:
CUDA_VISIBLE_DEVICES narrowed to that one, so each GPU gets n_jobs / gpus workers."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from t4bench.packing import visible_gpu

log = logging.getLogger(__name__)

_OWN_OPTIONS = ("hydra.sweeper.n_jobs=", "hydra.sweeper.worker_index=")


class Workers:
    def __init__(self, n_jobs: int, worker_index: int, sweep_dir: Path, gpus: int = 1) -> None:
        self.n_jobs, self.worker_index, self.sweep_dir = n_jobs, worker_index, sweep_dir
        self.gpus = gpus
        self.children: list[subprocess.Popen[bytes]] = []

    def spawn(self) -> None:
        if self.n_jobs <= 1 or self.worker_index != 0:
            return
        argv = [a for a in sys.orig_argv if not a.startswith(_OWN_OPTIONS)]
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        gpu_of = {index: visible_gpu(index, self.gpus) for index in range(self.n_jobs)} if self.gpus > 1 else {}
        for index in range(1, self.n_jobs):
            cmd = [*argv, "hydra.sweeper.n_jobs=1", f"hydra.sweeper.worker_index={index}"]
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu_of[index]} if gpu_of else None
            with open(self.sweep_dir / f"worker-{index}.log", "ab") as out:
                child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=os.getcwd(), env=env)
            self.children.append(child)
            log.info("started worker %d (pid %d): log %s", index, child.pid, out.name)
        if gpu_of:  # this process runs its trials in-process: narrowed last, before CUDA starts here
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu_of[0]

    def wait(self) -> list[str]:
        """Wait for the other workers; one line for each that did not end well (killed, failed).
        A worker's trial in flight is left RUNNING when it dies: the next `TrialQueue.next_trial`
        of any worker fails it (its pid is dead) and queues its parameters again."""
        lost = []
        for index, child in enumerate(self.children, 1):
            code = child.wait()
            if code:
                how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                with contextlib.suppress(ValueError):  # a signal Python has no name for
                    how = f"killed by {signal.Signals(-code).name}" if code < 0 else how
                lost.append(f"sweep worker {index} (pid {child.pid}) {how}; log {self.sweep_dir}/worker-{index}.log")
        return lost

    def stop(self) -> None:
        """SIGTERM: each worker fails and re-enqueues its trial in flight, as this one does."""
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in self.children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
