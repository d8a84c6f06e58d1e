"""A single run's Hydra job, composed once.

`@hydra.main` composes the config twice for one run (once to read its mode, once for the job), and
the command-line checks composed it before that, to refuse bad input while nothing exists yet:
three compositions, ~0.3 s each. For a single run the checks compose it here the way
`@hydra.main` does (the same config search path, job name and command-line parsing), check that
config, and `run` starts Hydra's job from it: the run folder, `.hydra/` record, job logging and
callbacks come from Hydra's own `run_job`, as in `Hydra.run`. Sweeps, `--cfg`, `--info` and the
other flags keep `@hydra.main`: their jobs are composed by Hydra's launcher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

#: the app's primary config (t4bench/conf/config.yaml), config folder (relative to the app's file)
#: and Hydra version base, as `@hydra.main` in t4bench.__main__ names them
CONFIG_NAME = "config"
CONFIG_PATH = "conf"
VERSION_BASE = "1.3"


@dataclass(frozen=True)
class Composed:
    """A single run's config with Hydra's node, and the Hydra instance that composed it."""

    config: DictConfig
    hydra: Any  # hydra._internal.hydra.Hydra: its config loader serves the job


def compose(overrides: Sequence[str]) -> Composed:
    """The config `@hydra.main` would compose for `t4bench OVERRIDES` (a single run)."""
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_automatic_config_search_path, detect_task_name
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    version.setbase(VERSION_BASE)
    app = str(Path(__file__).with_name("__main__.py"))  # the file @hydra.main reads both from
    search_path = create_automatic_config_search_path(app, None, CONFIG_PATH)
    lines = list(overrides)
    if not any(line.split("=", 1)[0].lstrip("+~") == "hydra.mode" for line in lines):
        lines.append("hydra.mode=RUN")  # what Hydra adds (and records) for a run whose config names no mode
    hydra = Hydra.create_main_hydra2(task_name=detect_task_name(app, None), config_search_path=search_path)
    try:
        config = hydra.compose_config(
            config_name=CONFIG_NAME, overrides=lines, run_mode=RunMode.RUN, with_log_configuration=True
        )
    finally:
        # the job needs only the composition and its loader (HydraContext): the process is left as
        # it was found, so a later composition in it (a test, a preflight) can initialize Hydra again
        GlobalHydra.instance().clear()
    return Composed(config, hydra)


def run(composed: Composed, task_function: Callable[[DictConfig], Any]) -> Any:
    """Hydra's job for `composed` (what `Hydra.run` does after its composition); the task's
    return value, or its exception raised again."""
    from hydra._internal.callbacks import Callbacks
    from hydra.core.utils import run_job
    from hydra.types import HydraContext, RunMode
    from omegaconf import read_write

    config = composed.config
    if config.hydra.mode is None:  # as Hydra.run sets it, before the job copies the config
        with read_write(config.hydra):
            config.hydra.mode = RunMode.RUN
    callbacks = Callbacks(config)
    callbacks.on_run_start(config=config, config_name=CONFIG_NAME)
    context = HydraContext(config_loader=composed.hydra.config_loader, callbacks=callbacks)
    job = run_job(
        hydra_context=context,
        task_function=task_function,
        config=config,
        job_dir_key="hydra.run.dir",
        job_subdir_key=None,
        configure_logging=True,
    )
    callbacks.on_run_end(config=config, config_name=CONFIG_NAME, job_return=job)
    return job.return_value  # raises the task's exception, as Hydra.run does
