"""Entry points of the MLproject file: `mlflow run . -e main -P overrides="model=ncf seed=3"`.

MLflow Projects hands each parameter over as ONE shell-quoted word and has already created a run
(MLFLOW_RUN_ID, in the experiment of `--experiment-name`). This module splits the parameter the
way a shell would (shlex) and makes the job use that run instead of leaving it empty beside a run
of its own:

    main      python -m t4bench <overrides>; the training run IS the project's run
              (`tracking.run_id`), so it carries the config, metrics and artifacts. Without
              --experiment-name MLflow made that run in `Default`, which no run can leave: the
              training then makes its run in the benchmark's experiment (t4bench-<model>), with
              the project run's source tags, and the project's run, left empty, is deleted once
              `mlflow run` has ended it (no orphan in `Default`)
    sweep     python -m t4bench --multirun <overrides>; the project's run records the launch
              (deleted like main's when MLflow made it in `Default`)
    validate  python -m t4bench.sweep.holdout <args>; likewise
    report    python -m t4bench.report <args>; the report's folder goes into the project's run

The job replaces this process (exec), so `mlflow run`'s signals and exit status reach it directly;
only the `Default` cases above wait for it (forwarding SIGTERM, `mlflow run`'s cancel) to delete
the project's run after it.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from t4bench.tracking import names

PROG = "python -m t4bench.mlproject"
ENTRY_POINTS = ("main", "sweep", "validate", "report")
#: tagged on a project run that launched a sweep or a validation: reports and sweep summaries
#: skip runs that carry t4bench.sweep_role
LAUNCHER_ROLE = "launcher"
#: the experiment `mlflow run` uses when no --experiment-name is given
DEFAULT_EXPERIMENT = "Default"
#: the tags `mlflow run` gives its run that say where a run came from: a training run made in
#: place of the project's run carries them, so it shows as the project's run would
SOURCE_TAGS = (
    "mlflow.user",
    "mlflow.source.name",
    "mlflow.source.type",
    "mlflow.source.git.commit",
    "mlflow.source.git.branch",
    "mlflow.gitRepoURL",
    "mlflow.project.entryPoint",
    "mlflow.project.env",
    "mlflow.project.backend",
)


#: the internal command of the detached process that deletes an empty project run
DELETE = "_delete_project_run"
#: seconds a project run waits after `mlflow run` exited before it is deleted (its last write)
RELEASE_GRACE_S = 2.0


@dataclass(frozen=True)
class Job:
    """The command an entry point runs, and the project run it leaves behind: None when the job
    uses that run (the command then replaces this process), else the run id to delete after it."""

    command: list[str]
    deletes: str | None = None


class EntryError(Exception):
    """Bad input: one line, exit status 2."""


def split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as err:
        raise EntryError(f"cannot split {text!r}: {err}") from None


def _given(args: Sequence[str], key: str) -> bool:
    return any(a.lstrip("+~").split("=", 1)[0] == key for a in args)


def _experiment_name(run_id: str) -> str:
    from t4bench.tracking.client import mlflow_client

    client = mlflow_client()
    return str(client.get_experiment(client.get_run(run_id).info.experiment_id).name)


def main_command(overrides: Sequence[str], run_id: str | None) -> Job:
    """`python -m t4bench` adopting `run_id`; the run's experiment becomes tracking.experiment, so
    the logged config says where the run really is.

    `mlflow run` without --experiment-name makes its run in `Default`, and a run cannot move to
    another experiment: the training then goes to the benchmark's own experiment (t4bench-<model>,
    as `python -m t4bench` does) in a run of its own that carries the project run's source tags,
    and the project's run is deleted once the training ended."""
    args = list(overrides)
    if any(a in ("-m", "--multirun") for a in args):
        raise EntryError("the main entry point trains one run; use -e sweep for --multirun")
    command = [sys.executable, "-m", "t4bench", *args]
    if not run_id:
        return Job(command)
    experiment = _experiment_name(run_id)
    if experiment == DEFAULT_EXPERIMENT and not _given(args, "tracking.experiment"):
        from t4bench.sweep.space import format_value

        carried = _source_tags(run_id)
        if carried:  # merged into the user's own tracking.tags (Hydra merges a dict given with ++)
            command.append(f"++tracking.tags={format_value(carried)}")
        return Job(command, deletes=run_id)
    command.append(f"++tracking.run_id={run_id}")
    if not _given(args, "tracking.experiment"):
        command.append(f"++tracking.experiment={experiment}")
    return Job(command)


def _source_tags(run_id: str) -> dict[str, str]:
    from t4bench.tracking.client import mlflow_client

    tags: Mapping[str, str] = mlflow_client().get_run(run_id).data.tags
    return {key: tags[key] for key in SOURCE_TAGS if key in tags}


def end_project_run(run_id: str, returncode: int) -> int:
    """End the project's run as its job ended (it holds nothing: the training run is elsewhere);
    the end time it was given, in ms."""
    from t4bench.tracking.client import mlflow_client

    client = mlflow_client()
    client.set_tag(run_id, "mlflow.note.content", "Empty: the training run is in the benchmark's own experiment.")
    client.set_terminated(run_id, names.FINISHED if returncode == 0 else names.FAILED)
    return int(client.get_run(run_id).info.end_time or 0)


def delete_when_released(run_id: str, launcher_pid: int, ended_ms: int) -> None:
    """Delete the project's run once `mlflow run` let go of it. MLflow 3.17 ends the run again
    after the entry point exits (its `_maybe_set_run_terminated` compares the status string with
    RunStatus's ints, so it never sees it ended) and fails on a deleted run: the run goes only
    when that second end time is written, or `mlflow run` (launcher_pid) has exited."""
    import time

    from t4bench.tracking.client import mlflow_client
    from t4bench.tracking.liveness import process_alive

    client = mlflow_client()
    gone_since: float | None = None
    while True:
        if int(client.get_run(run_id).info.end_time or 0) != ended_ms:
            break  # mlflow run ended it again: it touches the run no more
        if not process_alive(launcher_pid):
            gone_since = gone_since or time.monotonic()
            if time.monotonic() - gone_since > RELEASE_GRACE_S:
                break
        time.sleep(0.2)
    client.delete_run(run_id)


def run_then_delete(job: Job) -> int:
    """Run the job as a child, end the project's run as it ended, and leave a detached process
    that deletes the run once `mlflow run` let go of it; the child's exit status is ours. SIGTERM
    (`mlflow run`'s cancel) is passed on, so the training closes its run KILLED; Ctrl-C reaches
    the child from the terminal (one process group), so it is not sent twice."""
    assert job.deletes is not None
    child = subprocess.Popen(job.command)

    def forward(signum: int, frame: FrameType | None) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    returncode = child.wait()
    ended_ms = end_project_run(job.deletes, returncode)
    subprocess.Popen(
        [sys.executable, "-m", "t4bench.mlproject", DELETE, job.deletes, str(os.getppid()), str(ended_ms)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives this process and `mlflow run`, and no Ctrl-C of theirs reaches it
    )
    print(
        f"t4bench: `mlflow run` made run {job.deletes} in experiment {DEFAULT_EXPERIMENT}; the runs are in the "
        "benchmark's experiment, so that empty run is deleted (give --experiment-name to use it)",
        flush=True,
    )
    return returncode


def _tag_launcher(run_id: str, command: Sequence[str]) -> None:
    from t4bench.tracking.client import mlflow_client

    client = mlflow_client()
    client.set_tag(run_id, names.SWEEP_ROLE, LAUNCHER_ROLE)
    # as typed (a space between words), not shell-quoted: the UI shows it as a plain string
    client.set_tag(run_id, names.LAUNCHED, " ".join(command[1:])[:5000])


def job_for(entry: str, text: str, run_id: str | None) -> Job:
    args = split(text)
    if entry == "main":
        return main_command(args, run_id)
    if entry == "sweep":
        command = [sys.executable, "-m", "t4bench", "--multirun", *args]
    elif entry == "validate":
        command = [sys.executable, "-m", "t4bench.sweep.holdout", *args]
    elif entry == "report":
        extra = ["--run-id", run_id] if run_id and "--run-id" not in args else []
        return Job([sys.executable, "-m", "t4bench.report", *args, *extra])
    else:
        raise EntryError(f"unknown entry point {entry!r}: expected one of {', '.join(ENTRY_POINTS)}")
    if not run_id:
        return Job(command)
    if _experiment_name(run_id) == DEFAULT_EXPERIMENT:  # the sweep's runs are in its own experiment
        return Job(command, deletes=run_id)
    _tag_launcher(run_id, command)
    return Job(command)


def command_for(entry: str, text: str, run_id: str | None) -> list[str]:
    """The command line of `entry` (see `job_for`)."""
    return job_for(entry, text, run_id).command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {PROG} {{{','.join(ENTRY_POINTS)}}} [ARGS...]\n\n{__doc__}")
        return 0 if argv else 2
    entry, rest = argv[0], argv[1:]
    if entry == DELETE:  # run_then_delete's detached process: RUN_ID LAUNCHER_PID ENDED_MS
        delete_when_released(rest[0], int(rest[1]), int(rest[2]))
        return 0
    run_id = os.environ.get("MLFLOW_RUN_ID") or None
    try:
        job = job_for(entry, " ".join(shlex.quote(a) for a in rest) if len(rest) != 1 else rest[0], run_id)
    except EntryError as err:
        print(f"t4bench: error: {err}", file=sys.stderr)
        return 2
    # jobs use the run id they are given explicitly; none may pick the project's run up by itself
    os.environ.pop("MLFLOW_RUN_ID", None)
    sys.stdout.flush()
    if job.deletes is not None:
        return run_then_delete(job)
    os.execv(sys.executable, job.command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
