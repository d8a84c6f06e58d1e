"""Hydra's submitit launchers (hydra-submitit-launcher, a core dependency) with what t4bench sweeps
need on top, selected by conf/hydra/launcher/submitit_slurm.yaml and submitit_local.yaml:

- GPUs per job from the sweep's hardware (hw.count, none on hw=cpu) and CPUs per GPU;
- `signal_delay_s` checked below the time limit (submitit's pre-timeout signal at or before the
  job's start kills it: the plugin's default 120 s does that to a 2-minute job);
- each running job renamed after its overrides (`t4bench-ncf:seed=3`), so `squeue` says which
  run is which, not only the array's common name;
- a seed sweep prints each job's end as it happens, with job i/n and the sweep's ETA, as a local
  sweep does (`t4bench.sweep.submitit_progress`);
- a job that ends without a result (scancel, time limit, node failure, the controller gone) is
  one `t4bench: error:` line (exit 2) naming the job and its state instead of submitit's
  multi-line report; the job's MLflow run is closed KILLED/FAILED by the run itself, and an Optuna
  sweep continues when the same command runs again (docs/sweeps.md).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher as _Local
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _Slurm
from t4bench.errors import RunTerminated, T4BenchError
from t4bench.preflight import slurm as slurm_probe
from t4bench.signals import sigterm_raises
from t4bench.sweep import slurm
from t4bench.sweep import slurm_resume as resume
from t4bench.sweep.submitit_progress import JobProgress

#: the t4bench Optuna sweeper's classes (hydra/sweeper=optuna)
_OPTUNA = "hydra_plugins.t4bench_sweeper"
#: the longest job name kept (Slurm allows more; squeue's default NAME column shows 8)
_NAME_LIMIT = 120


def _quiet_schema_warning() -> None:
    """In the job (submitit's own entry point, not t4bench's __main__): the presets extend the
    plugin's of the same name on purpose; Hydra's deprecation warning about that is noise."""
    warnings.filterwarnings("ignore", message=r"(?s).*validated against ConfigStore schema with the same name")


def _gpu_params(params: dict[str, Any], config: Any) -> dict[str, Any]:
    """The resources of one job from the sweep's config when the preset leaves them null:
    hw.count GPUs on its node (none with hw=cpu) and `cpus_per_gpu` CPU cores each, as one task
    (t4bench starts a run's ranks itself when hw.count>1)."""
    params = dict(params)
    cpus_per_gpu = params.pop("cpus_per_gpu", None)  # submitit wants gpus_per_task with it: folded in here
    gpus = params.get("gpus_per_node")
    if gpus is None and str(config.hw.name) != "cpu":
        gpus = params["gpus_per_node"] = int(config.hw.count)
    if gpus and cpus_per_gpu and params.get("cpus_per_task") is None:
        params["cpus_per_task"] = int(cpus_per_gpu) * int(gpus)
    return params


def _failed_line(err: Exception, folder: str) -> str:
    """submitit's report of a job without a result, in one line (its first two lines name the job
    and its Slurm state; the rest is the job's stderr, which stays in the log folder)."""
    head = " ".join(line.strip() for line in str(err).splitlines()[:2])
    if "timed-out" in head:  # raised in the job by submitit's pre-timeout signal handler
        head = f"a job reached its time limit (hydra.launcher.timeout_min) and was stopped: {head}"
    return (
        f"a sweep job ended without a result: {head}; its MLflow run is closed KILLED/FAILED, logs in "
        f"{folder.replace('/%j', '')}; run the same command again to continue (completed jobs are reused)"
    )


class _SbatchWordsHeld(io.TextIOBase):
    """sys.stderr while jobs are submitted: submitit prints a failed sbatch's stderr before it
    raises with the same words, which then go shortened into t4bench's one line; all else passes."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._held_last = False

    def write(self, text: str) -> int:
        lines = text.strip().splitlines()
        held = bool(lines) and all(line.startswith(("sbatch: ", "scontrol: ")) for line in lines)
        if held or (self._held_last and text == "\n"):  # print()'s end after the held words
            self._held_last = held
            return len(text)
        self._held_last = False
        return int(self.stream.write(text))

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        """The real stream is not this wrapper's: when the wrapper goes (IOBase.__del__ closes it),
        the stream is neither flushed nor closed, whatever state it is in by then."""

    # the jobs may run for hours under it: whatever asks what stderr is gets the real one's answer
    def fileno(self) -> int:
        return int(self.stream.fileno())

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.stream, "encoding", "utf-8"))


def _submit_failed(err: Exception) -> bool:
    """submitit's FailedJobError of an sbatch that refused the jobs (not a job that ran and failed)."""
    return str(err).lstrip().startswith("sbatch: ")


def _varying(job_overrides: Sequence[Sequence[str]]) -> set[str]:
    """The override keys whose values are not the same in every job."""
    values: dict[str, set[str]] = {}
    for overrides in job_overrides:
        for override in overrides:
            key, _, value = override.partition("=")
            values.setdefault(key, set()).add(value)
    return {key for key, seen in values.items() if len(seen) > 1}


class _Named:
    """Mixin: the resources, checks, job names and one-line failures shared by both executors."""

    params: dict[str, Any]
    varying: set[str]

    def _rename(self, sweep_overrides: Sequence[str]) -> None:
        """Inside the job: give this Slurm job the name of its run (best effort: a failed rename
        only leaves the array's name)."""
        # <array>_<task>: the task's own SLURM_JOB_ID may be the array's id (Slurm gives it to one
        # of the tasks), and renaming that renames every task of the array
        job = slurm.job_id(os.environ)
        if not job or os.environ.get("SUBMITIT_EXECUTOR") != "slurm":
            return
        varying = getattr(self, "varying", None)
        chosen = [o for o in filter_overrides(sweep_overrides) if not varying or o.split("=", 1)[0] in varying]
        name = f"{self.params.get('name', 't4bench')}:{','.join(chosen)}"[:_NAME_LIMIT]
        subprocess.run(
            ["scontrol", "update", f"JobId={job}", f"JobName={name}"], capture_output=True, check=False, timeout=30
        )

    def _launch_or_explain(self, launch: Any, job_overrides: Sequence[Sequence[str]], initial: int) -> Any:
        config = getattr(self, "config")  # noqa: B009  # set by Hydra's setup()
        self.params = _gpu_params(self.params, config)
        # the keys whose values differ between the jobs (seed, a trial's parameters): the job names
        self.varying = _varying(job_overrides)
        folder = str(self.params.get("submitit_folder", ""))
        root = resume.folder_root(folder)
        # an Optuna sweep resumes through its study (its jobs carry their trial run's id, so no earlier
        # result could match), and its other workers' jobs in this folder are not an earlier run's
        seeds = not str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).startswith(_OPTUNA)
        with self._cancelled_when_stopped(root):
            if seeds and self._slurm:  # a killed controller's jobs run on: wait, rather than train them twice
                resume.wait_for_earlier(root)
            done = resume.completed(root) if seeds else {}
            returns: list[JobReturn | None] = [done.get(tuple(str(o) for o in job)) for job in job_overrides]
            reused = sum(ret is not None for ret in returns)
            if reused:
                print(
                    f"[t4bench] {reused} of {len(returns)} jobs completed in an earlier run of this sweep: "
                    f"reused, not submitted again",
                    flush=True,
                )
            # a seed sweep's job i/n and ETA while the jobs run (an Optuna sweep says trial i/n itself)
            scheduler = "Slurm" if self._slurm else "submitit_local"
            watch = JobProgress(root, len(returns), reused, scheduler) if seeds else contextlib.nullcontext()
            with watch:
                for start, stop in resume.gaps(returns):
                    try:
                        with contextlib.redirect_stderr(_SbatchWordsHeld(sys.stderr)):
                            returns[start:stop] = launch(job_overrides[start:stop], initial + start)
                    except _uncompleted() as err:
                        if _submit_failed(err):
                            raise T4BenchError(
                                f"hydra/launcher=submitit_slurm: sbatch refused the sweep's jobs "
                                f"({slurm_probe.shorten(str(err))}); sbatch scripts in {root}"
                            ) from None
                        raise T4BenchError(_failed_line(err, folder)) from None
        for ret in returns:
            assert ret is not None
            # a job at its time limit: submitit's USR2 handler raises in the job, the run closes
            # FAILED, and Hydra would re-raise it here with a traceback
            if ret.status == JobStatus.FAILED:
                try:
                    ret.return_value  # noqa: B018  # re-raises the job's exception
                except _uncompleted() as err:
                    raise T4BenchError(_failed_line(err, folder)) from None
        return returns

    @property
    def _slurm(self) -> bool:
        return isinstance(self, _Slurm)

    @contextmanager
    def _cancelled_when_stopped(self, root: Path) -> Iterator[None]:
        """SIGTERM or Ctrl-C while the sweep's jobs run (or while waiting for an earlier run's):
        cancel those still in Slurm first, then stop with one line (exit 143)."""
        try:
            with sigterm_raises():
                yield
        except (RunTerminated, KeyboardInterrupt) as stop:
            if not self._slurm:
                raise
            cancelled = resume.cancel_unfinished(root)
            listed = ", ".join(cancelled[:8]) + (" ..." if len(cancelled) > 8 else "")
            stopped = RunTerminated(f"{str(stop) or 'Ctrl-C'} (the sweep's controller)")
            stopped.closed = (
                f"{len(cancelled)} Slurm job(s) still queued or running cancelled ({listed}), their runs "
                "closed KILLED; run the same command again to continue (completed jobs are reused)"
            )
            raise stopped from None


def _uncompleted() -> type[Exception]:
    import submitit

    return submitit.core.utils.UncompletedJobError


class SlurmLauncher(_Named, _Slurm):
    """hydra/launcher=submitit_slurm: each job of the sweep a task of one Slurm job array."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        # checked before the sweep starts too (t4bench.sweep.packed's callback); here for a
        # configuration without that callback
        error = slurm.signal_error(int(self.params.get("timeout_min", 0)), int(self.params.get("signal_delay_s", 0)))
        if error:
            raise T4BenchError(error)

    def __call__(self, sweep_overrides: list[str], *args: Any, **kwargs: Any) -> JobReturn:
        _quiet_schema_warning()
        self._rename(sweep_overrides)
        return super().__call__(sweep_overrides, *args, **kwargs)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        return self._launch_or_explain(super().launch, job_overrides, initial_job_idx)


class LocalLauncher(_Named, _Local):
    """hydra/launcher=submitit_local: the same jobs as processes on this machine (all at once)."""

    def __call__(self, sweep_overrides: list[str], *args: Any, **kwargs: Any) -> JobReturn:
        _quiet_schema_warning()
        return super().__call__(sweep_overrides, *args, **kwargs)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        return self._launch_or_explain(super().launch, job_overrides, initial_job_idx)
