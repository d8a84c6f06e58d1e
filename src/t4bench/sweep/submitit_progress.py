"""What a seed sweep on Slurm (or submitit_local) prints while its controller waits: the jobs it
submitted, then a line per finished job with job i/n and the sweep's ETA (`t4bench.sweep.talk.Pace`),
the lines a local sweep prints after each of its jobs.

The controller does not see its jobs end (submitit waits for them one by one, in order): a thread
watches the sweep's `.submitit` folder for the result file each job writes when it ends, and says
when new ones appear. A job cancelled or killed before its end writes none, and the launcher says
so in its error line instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from t4bench.sweep import slurm_resume as resume
from t4bench.sweep.talk import Pace

#: how often the folder is looked at (a directory listing: cheap, also on a shared filesystem)
POLL_S = 2.0


class JobProgress:
    """`with JobProgress(root, total, already_done):` around the launch that waits for the jobs."""

    def __init__(
        self,
        root: Path,
        total: int,
        already_done: int = 0,
        scheduler: str = "Slurm",
        say: Callable[[str], None] = lambda line: print(line, flush=True),
        poll_s: float = POLL_S,
    ) -> None:
        self.root, self.scheduler, self.say, self.poll_s = root, scheduler, say, poll_s
        self.pace = Pace(total, already_done=already_done)
        self._before: set[str] = set()
        self._submitted: set[str] = set()
        self._reported: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="t4bench-job-progress", daemon=True)

    def __enter__(self) -> JobProgress:
        # the jobs of an earlier run of this sweep (reused or left without a result) are not this one's
        self._before = {path.name for path in resume.job_dirs(self.root)}
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if kind is None:
            self.tick()  # jobs that ended after the last look: every line is out before the summary

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.tick()

    def tick(self) -> None:
        """Say what changed since the last look: jobs submitted, jobs ended."""
        jobs = {path.name for path in resume.job_dirs(self.root)} - self._before
        new = sorted(jobs - self._submitted, key=resume.job_order)
        if new:
            self._submitted |= jobs
            listed = new[0] if len(new) == 1 else f"{new[0]} ... {new[-1]}"
            self.say(f"[t4bench] {len(new)} job(s) submitted to {self.scheduler} ({listed})")
        ended = sorted((resume.with_result(self.root) & jobs) - self._reported, key=resume.job_order)
        for job in ended:
            self._reported.add(job)
            self.say(f"{self.pace.job_done()} ({self.scheduler} job {job})")
