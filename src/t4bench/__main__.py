"""`python -m t4bench`: the `t4bench` command, whose `run` and `sweep` are the Hydra app below.
`t4bench.cli.app_argv` answers `--help` and the other subcommands before Hydra is imported (so
`python -m t4bench --help` is as fast as `t4bench --help`); heavy imports (torch, mlflow) happen
only inside the task, after the preflight checks, so `--cfg job` and bad input stay fast too."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from t4bench.cli import app_argv

    sys.argv[1:] = app_argv(sys.argv[1:])  # exits unless it is the Hydra app's command line
    from t4bench import gc_pause

    gc_pause.pause()  # until training starts (t4bench.gc_pause)
    from t4bench import run_env
    from t4bench.errors import T4BenchError
    from t4bench.tracking import process

    try:
        launched = run_env.launched_rank()
    except T4BenchError:
        launched = -1  # a launcher variable that is not a number: main() says so in one line
    # MLflow imported on another core meanwhile (one run's rank 0: t4bench.tracking.process)
    process.prestart(sys.argv[1:], launched)

import contextlib
import os
import shutil
import signal
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from t4bench import app_job, gc_pause, run_env
from t4bench.errors import RunTerminated, T4BenchError
from t4bench.preflight import command_line, overrides, places
from t4bench.tracking import process as tracking_process
from t4bench.tracking import store_probe as probe

#: what ranks > 0 of an outer launcher add to their command line: no `.hydra/` record and no job
#: log file, so Hydra's output directory is written once (by rank 0), not once per rank
QUIET_RANK_OVERRIDES = {
    "hydra.output_subdir": "hydra.output_subdir=null",
    "hydra/job_logging": "hydra/job_logging=stdout",
}

#: the disk filled up after the preflight's check: the run (if one was made) is left to `runs repair`
DISK_FULL = (
    "t4bench: error: the disk is full (tracking store or run folder); free space and run "
    "`python -m t4bench.runs repair` to close a run left RUNNING"
)


def rank_overrides(argv: Sequence[str], outer_rank: int) -> list[str]:
    """`argv` plus, on a non-zero rank, the overrides that keep it out of Hydra's output
    directory (an option the user set already is left to them)."""
    if outer_rank == 0:
        return list(argv)
    given = {arg.split("=", 1)[0].removeprefix("override ").lstrip("+~") for arg in argv}
    return [*argv, *(override for key, override in QUIET_RANK_OVERRIDES.items() if key not in given)]


def _only_hydras_record(folder: Path, job_name: str) -> bool:
    """Whether `folder` holds nothing but what Hydra wrote when this job started (its `.hydra`
    record, an empty job log): a folder this job made, not one a user pointed it at."""
    log = folder / f"{job_name}.log"
    entries = {path.name for path in folder.iterdir()} if folder.is_dir() else set()
    return entries <= {".hydra", log.name} and (not log.exists() or log.stat().st_size == 0)


def _after_error(folder: Path, made_here: bool, run_id: str) -> str:
    """What becomes of the run folder when the run ends with one error line. An MLflow run was
    made: the folder stays (its log and MLPerf log), and the line names both. None was: the
    folder held only Hydra's record of a command that did nothing, so it is removed (with the
    parents this left empty, up to the working directory) when this job made it."""
    if run_id:
        return f" (MLflow run {run_id}, folder {folder})"
    cwd = Path(HydraConfig.get().runtime.cwd).resolve()
    apart = cwd != folder.resolve() and folder.resolve() not in cwd.parents  # never the cwd (hydra.run.dir=.)
    if made_here and apart and run_env.launched_rank() == 0:  # other ranks may share rank 0's folder
        shutil.rmtree(folder, ignore_errors=True)
        for parent in folder.resolve().parents:
            if parent == cwd or cwd not in parent.parents:
                break
            with contextlib.suppress(OSError):  # not empty: something else lives there
                parent.rmdir()
    return ""


def task_for(checked: command_line.Checked | None) -> Callable[[], Any]:
    """The Hydra app whose task function receives `checked`, what the command-line preflight of
    this process passed, and hands it to the runner (which then skips the checks already made for
    the same task overrides). Made per call, so the value travels as an argument, not module state.
    A checked single run's job starts from the config the preflight composed (t4bench.app_job);
    anything else goes through `@hydra.main`."""
    if checked is not None:
        composed = checked.composed
        return lambda: app_job.run(composed, lambda cfg: task(cfg, checked))

    # t4bench/conf: resources.conf_dir()
    @hydra.main(version_base=app_job.VERSION_BASE, config_path=app_job.CONFIG_PATH, config_name=app_job.CONFIG_NAME)
    def app(cfg: DictConfig) -> dict[str, Any]:
        return task(cfg, checked)

    return app


def task(cfg: DictConfig, checked: command_line.Checked | None) -> dict[str, Any]:
    """One Hydra job: a run, or the study matrix's dry run; an error is one line and exit 2."""
    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    made_here = _only_hydras_record(output_dir, str(hydra_cfg.job.name))
    try:
        from t4bench.preflight.study_matrix import gate
        from t4bench.runner import run
        from t4bench.spec import build_spec

        spec = build_spec(cfg)
        if gate(spec):  # +experiment=study_r740: a dry run printed, or a run outside its matrix refused
            return {}
        return run(spec, output_dir, checked)
    except T4BenchError as err:
        print(f"t4bench: error: {err}{_after_error(output_dir, made_here, err.run_id)}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:  # here, not in main(): Hydra would print "Error executing job ..." first
        if not probe.is_disk_full(err):
            raise
        print(DISK_FULL, file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """Console entry (`t4bench ...`, `python -m t4bench ...`)."""
    # conf/hydra/launcher/submitit_*.yaml extend the plugin's presets of the same name on purpose
    # (its schema checks their keys); Hydra warns that this matching is deprecated
    warnings.filterwarnings("ignore", message=r"(?s).*validated against ConfigStore schema with the same name")
    try:
        rank = run_env.launched_rank()
        places.working_dir(sys.argv[1:])  # Hydra makes its output folder before any t4bench code runs
        # `--multirun` after overrides is Hydra's argparse usage error: put the switch first
        switches = [arg for arg in sys.argv[1:] if arg in command_line.MULTIRUN_FLAGS]
        rest = [arg for arg in sys.argv[1:] if arg not in command_line.MULTIRUN_FLAGS]
        sys.argv = [sys.argv[0], *switches, *rank_overrides(rest, rank)]
        # the command line composed and checked as Hydra will compose it: nothing exists yet
        checked = command_line.check(sys.argv[1:])
    except T4BenchError as err:  # a launcher variable that is not a number, an unwritable cwd, bad input
        print(f"t4bench: error: {err}", file=sys.stderr)
        sys.exit(2)
    if checked is None:  # a sweep's process may live for hours without a run_start of its own
        gc_pause.resume()
        tracking_process.discard()  # nor a run of its own to track
    # Hydra's errors reach us as exceptions (not its multi-line report and exit 1), so that every
    # mistake on the command line is one line and exit 2; an unexpected error keeps its traceback
    os.environ["HYDRA_FULL_ERROR"] = "1"
    from hydra.errors import HydraException

    try:
        task_for(checked)()
    except T4BenchError as err:  # raised outside the task, e.g. by the sweeper's checks
        print(f"t4bench: error: {err}", file=sys.stderr)
        sys.exit(2)
    except HydraException as err:  # composition, override grammar, instantiation
        print(f"t4bench: error: {overrides.explain(err, sys.argv[1:])}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:
        if not probe.is_disk_full(err):
            raise
        print(DISK_FULL, file=sys.stderr)
        sys.exit(2)
    except RunTerminated as stop:  # the run is closed as KILLED already; exit as a signal would
        closed = stop.closed or (
            f"MLflow run {stop.run_id} is marked KILLED" if stop.run_id else "no MLflow run had been created"
        )
        print(f"t4bench: stopped by {stop}; {closed}", file=sys.stderr)
        sys.exit(128 + int(signal.SIGTERM))
    finally:
        # atexit, thread joins and flushes still run; the last collections skip the run's objects.
        # Not in a rank of an outer launcher (torchrun, srun): its process group's objects are left
        # to the collector, as the distributed library expects at exit
        if run_env.read_launcher(os.environ).world_size == 1:
            gc_pause.at_exit()


if __name__ == "__main__":
    main()
