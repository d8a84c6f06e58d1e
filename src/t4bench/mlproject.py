"""Entry points of the MLproject file: `mlflow run . -e main -P overrides="model=ncf seed=3"`.

MLflow Projects hands each parameter over as ONE shell-quoted word and has already created a run
(MLFLOW_RUN_ID, in the experiment of `--experiment-name`). This module splits the parameter the
way a shell would (shlex) and makes the job use that run instead of leaving it empty beside a run
of its own:

    main      python -m t4bench <overrides>; the training run IS the project's run
              (`tracking.run_id`), so it carries the config, metrics and artifacts
    sweep     python -m t4bench --multirun <overrides>; the project's run records the launch
    validate  python -m t4bench.sweep.holdout <args>; likewise
    report    python -m t4bench.report <args>; the report's folder goes into the project's run

The job replaces this process (exec), so `mlflow run`'s signals and exit status reach it directly.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence

from t4bench import mlflow_names as names

PROG = "python -m t4bench.mlproject"
ENTRY_POINTS = ("main", "sweep", "validate", "report")
#: tagged on a project run that launched a sweep or a validation: reports and sweep summaries
#: skip runs that carry t4bench.sweep_role
LAUNCHER_ROLE = "launcher"
#: the experiment `mlflow run` uses when no --experiment-name is given
DEFAULT_EXPERIMENT = "Default"
#: conf/config.yaml's default model (what `python -m t4bench` trains without model=)
DEFAULT_MODEL = "ncf"


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
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    return str(client.get_experiment(client.get_run(run_id).info.experiment_id).name)


def main_command(overrides: Sequence[str], run_id: str | None) -> list[str]:
    """`python -m t4bench` adopting `run_id`; the run's experiment becomes tracking.experiment, so
    the logged config says where the run really is.

    `mlflow run` without --experiment-name makes its run in `Default`: the training then goes to
    the benchmark's own experiment (t4bench-<model>, as `python -m t4bench` does) in a run of its
    own, and the project's run records the launch and says where the training run is."""
    args = list(overrides)
    if any(a in ("-m", "--multirun") for a in args):
        raise EntryError("the main entry point trains one run; use -e sweep for --multirun")
    command = [sys.executable, "-m", "t4bench", *args]
    if run_id:
        experiment = _experiment_name(run_id)
        if experiment == DEFAULT_EXPERIMENT and not _given(args, "tracking.experiment"):
            _tag_launcher(run_id, command)
            _describe(run_id, f"Launched `{' '.join(args)}`; the training run is in experiment `{_benchmark(args)}`.")
            return command
        command.append(f"++tracking.run_id={run_id}")
        if not _given(args, "tracking.experiment"):
            command.append(f"++tracking.experiment={experiment}")
    return command


def _benchmark(args: Sequence[str]) -> str:
    """t4bench-<model> of the overrides (the last `model=` wins, as in Hydra), else of conf's default."""
    models = [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] == "model"]
    return f"t4bench-{models[-1] if models else DEFAULT_MODEL}"


def _describe(run_id: str, text: str) -> None:
    from mlflow.tracking import MlflowClient

    MlflowClient().set_tag(run_id, "mlflow.note.content", text)


def _tag_launcher(run_id: str, command: Sequence[str]) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    client.set_tag(run_id, names.SWEEP_ROLE, LAUNCHER_ROLE)
    # as typed (a space between words), not shell-quoted: the UI shows it as a plain string
    client.set_tag(run_id, names.LAUNCHED, " ".join(command[1:])[:5000])


def command_for(entry: str, text: str, run_id: str | None) -> list[str]:
    args = split(text)
    if entry == "main":
        return main_command(args, run_id)
    if entry == "sweep":
        command = [sys.executable, "-m", "t4bench", "--multirun", *args]
    elif entry == "validate":
        command = [sys.executable, "-m", "t4bench.sweep.holdout", *args]
    elif entry == "report":
        extra = ["--run-id", run_id] if run_id and "--run-id" not in args else []
        return [sys.executable, "-m", "t4bench.report", *args, *extra]
    else:
        raise EntryError(f"unknown entry point {entry!r}: expected one of {', '.join(ENTRY_POINTS)}")
    if run_id:
        _tag_launcher(run_id, command)
    return command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {PROG} {{{','.join(ENTRY_POINTS)}}} [ARGS...]\n\n{__doc__}")
        return 0 if argv else 2
    entry, rest = argv[0], argv[1:]
    run_id = os.environ.get("MLFLOW_RUN_ID") or None
    try:
        command = command_for(entry, " ".join(shlex.quote(a) for a in rest) if len(rest) != 1 else rest[0], run_id)
    except EntryError as err:
        print(f"t4bench: error: {err}", file=sys.stderr)
        return 2
    # jobs use the run id they are given explicitly; none may pick the project's run up by itself
    os.environ.pop("MLFLOW_RUN_ID", None)
    sys.stdout.flush()
    os.execv(sys.executable, command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
