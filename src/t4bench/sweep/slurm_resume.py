"""A submitit sweep stopped and run again with the same command: what the earlier run's jobs left in
the sweep's `.submitit` folder decides what is submitted again.

- A job whose result pickle (written by the job itself, also after its controller died) says it
  completed is not submitted again: its `JobReturn` is read back and counts as this run's result,
  so the seed sweep's summary and an Optuna trial see it as if it had run now. It must have had
  the same overrides (the whole command line of the job), so a changed setting runs again.
- Jobs of the earlier run still queued or running in Slurm (their controller was killed with
  SIGKILL, or lost its login node) are waited for first, then read the same way: submitting their
  runs a second time would train every such seed twice.
- SIGTERM or Ctrl-C of the controller cancels its jobs still queued or running (`scancel`): their
  runs close KILLED (the run's own SIGTERM handling), the next run of the command submits them again.

Only submitit's files and Slurm's `squeue`/`scancel` are read; nothing here knows MLflow.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

#: a submitit job folder's name: a Slurm job id, `<array job>_<task>` for an array's task
_JOB_DIR = re.compile(r"^\d+(_\d+)?$")
#: how often the jobs of an earlier run are polled while waiting for them
POLL_S = 5.0


def folder_root(submitit_folder: str) -> Path:
    """The sweep's submitit folder without the per-job `%j` part."""
    return Path(submitit_folder.replace("/%j", "").replace("%j", ""))


def job_dirs(root: Path) -> list[Path]:
    """The folders of submitted jobs (an array's own folder holds only its sbatch script)."""
    if not root.is_dir():
        return []
    return [
        path for path in root.iterdir() if _JOB_DIR.match(path.name) and (path / f"{path.name}_submitted.pkl").exists()
    ]


def with_result(root: Path) -> set[str]:
    """The jobs of the sweep's folder that have written their result (completed or failed; one
    cancelled or killed before its end writes none). Only looked for, not read: polled often."""
    return {d.name for d in job_dirs(root) if (d / f"{d.name}_0_result.pkl").exists()}


def _result(job_dir: Path) -> Any:
    """The (outcome, value) pair submitit pickled for the job's task 0; None before it exists."""
    from submitit.core.utils import pickle_load

    path = job_dir / f"{job_dir.name}_0_result.pkl"
    if not path.exists():
        return None
    try:
        return pickle_load(path)
    except Exception:  # written while the job was killed: as if there were none
        return None


def completed(root: Path) -> dict[tuple[str, ...], JobReturn]:
    """The earlier jobs of this sweep that completed, by their overrides."""
    found: dict[tuple[str, ...], JobReturn] = {}
    for job_dir in job_dirs(root):
        result = _result(job_dir)
        if not result or result[0] != "success":
            continue
        ret = result[1]
        if isinstance(ret, JobReturn) and ret.status == JobStatus.COMPLETED and ret.overrides is not None:
            found[tuple(str(o) for o in ret.overrides)] = ret
    return found


def unfinished(root: Path) -> list[str]:
    """Job ids in the sweep's folder without a result (running, queued, or gone without one)."""
    return sorted((d.name for d in job_dirs(root) if _result(d) is None), key=job_order)


def job_order(job: str) -> tuple[int, int]:
    head, _, task = job.partition("_")
    return int(head), int(task or -1)


def in_slurm(jobs: Iterable[str], env: dict[str, str] | None = None) -> list[str]:
    """Those of `jobs` that Slurm still has queued or running (squeue, one line per array task)."""
    wanted = set(jobs)
    if not wanted:
        return []
    done = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, timeout=60, env=env)
    if done.returncode != 0:  # squeue not answering: nothing is known to be alive
        return []
    return sorted(wanted & set(done.stdout.split()), key=job_order)


def wait_for_earlier(root: Path, say: Any = print) -> None:
    """Wait until no job of an earlier run of this sweep is queued or running in Slurm."""
    alive = in_slurm(unfinished(root))
    if alive:
        say(
            f"[t4bench] waiting for {len(alive)} job(s) of an earlier run of this sweep still in Slurm "
            f"({', '.join(alive[:8])}{' ...' if len(alive) > 8 else ''}): their results are reused"
        )
    while alive:
        time.sleep(POLL_S)
        alive = in_slurm(alive)


def cancel_unfinished(root: Path) -> list[str]:
    """scancel the sweep's jobs still queued or running; the ids cancelled."""
    alive = in_slurm(unfinished(root))
    if alive:
        subprocess.run(["scancel", *alive], capture_output=True, timeout=60, check=False)
    return alive


def gaps(found: Sequence[JobReturn | None]) -> list[tuple[int, int]]:
    """(start, stop) of each stretch of jobs without a result: what is still to be submitted, kept
    in runs so that each job keeps its index (its output folder <sweep dir>/<index>)."""
    stretches: list[tuple[int, int]] = []
    start = None
    for i, ret in enumerate([*found, JobReturn()]):
        missing = i < len(found) and ret is None
        if missing and start is None:
            start = i
        elif not missing and start is not None:
            stretches.append((start, i))
            start = None
    return stretches
