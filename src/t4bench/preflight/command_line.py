"""The whole command line checked before Hydra starts, so that nothing exists yet when it is refused:
no run or sweep directory, no MLflow run, no Optuna study.

The config is composed here as Hydra will compose it (a --multirun twice: with every searched
parameter at the low end of its range and at the high end, so an unknown parameter or a range
reaching a bad value is named before the study exists), then checked: Hydra's composition errors,
`+` keys no code reads (t4bench.preflight.overrides), every config value (t4bench.preflight.config), the scale
(t4bench.preflight.hardware), a sweep's search ranges (t4bench.sweep.space), its output folder, its
Optuna storage and the tracking store (t4bench.tracking.store_probe), the data files' structure (the
benchmark's `check_inputs`). Each failure is one `T4BenchError` line.

Hydra, OmegaConf and the standard library load at import (~0.3 s per composition); the
benchmark's module only for the data check, once the config is known to be good.

A single run's command line that passed every check here is returned as a `Checked` value: its
task overrides, the `RunEnvironment` the hardware check made, and the config itself, composed the
way `@hydra.main` composes it (t4bench.app_job): `t4bench.__main__` starts Hydra's job from that
composition, so a run's config is composed once, and the runner skips its checks of places
(hardware, tracking store, data) for it. A --multirun's jobs differ from the two ends checked
here: Hydra's launcher composes each, and the runner checks each of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from omegaconf import DictConfig, OmegaConf

from t4bench import app_job
from t4bench.app_job import Composed
from t4bench.errors import T4BenchError
from t4bench.preflight import config as validation
from t4bench.preflight import hardware, overrides, places, slurm, study_matrix
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec
from t4bench.tracking import store_probe as probe

MULTIRUN_FLAGS = ("--multirun", "-m")


@dataclass(frozen=True)
class Checked:
    """A single run's command line that passed every check: its task overrides (Hydra composes the
    same config from them: same conf/, same environment) and the RunEnvironment made for it."""

    task_overrides: tuple[str, ...]
    env: RunEnvironment
    #: the run's config as `@hydra.main` composes it: the job starts from it (t4bench.app_job)
    composed: Composed

    def env_for(self, task_overrides: Sequence[str]) -> RunEnvironment | None:
        """The RunEnvironment when `task_overrides` (`HydraConfig.overrides.task`) are the ones
        checked; None otherwise: then the caller checks the config itself."""
        return self.env if tuple(task_overrides) == self.task_overrides else None


def _parse(lines: Sequence[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(lines))


def _sample(override: Any, high: bool) -> str:
    """`key=value` with the value at one end of a sweep override's range (first/last choice)."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    from t4bench.sweep.space import check_sweep, format_value

    value = override.value()
    if not isinstance(value, (ChoiceSweep, IntervalSweep, RangeSweep)):
        values = list(override.sweep_string_iterator())  # a plain list: a,b,c
        return f"{override.get_key_element()}={values[-1] if high else values[0]}"
    if override.key_or_group != "seed":
        check_sweep(override)
    if isinstance(value, ChoiceSweep):
        chosen = value.list[-1] if high else value.list[0]
    elif isinstance(value, RangeSweep):
        items = list(override.sweep_iterator())
        chosen = items[-1] if (high and items) else value.start
    else:
        chosen = value.end if high else value.start
    return f"{override.get_key_element()}={format_value(chosen)}"


def _compose(lines: Sequence[str], argv: Sequence[str]) -> DictConfig:
    """The config of `lines` (with Hydra's node), Hydra's errors as one line about `argv`."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    try:
        with initialize_config_dir(config_dir=str(hardware.CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(lines), return_hydra_config=True)
            task = [line for line in lines if not _is_hydra(line)]
            overrides.check_added_keys(task, cfg=cfg)
            return cfg
    except HydraException as err:
        message = overrides.explain(err, argv)
    raise T4BenchError(message)


def _compose_run(lines: Sequence[str], argv: Sequence[str]) -> Composed:
    """A single run's config, composed once for the checks and the job (t4bench.app_job)."""
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    try:
        composed = app_job.compose(lines)
        # a `+` key's schema is composed apart (only then, and only that group)
        with initialize_config_dir(config_dir=str(hardware.CONF_DIR), version_base=app_job.VERSION_BASE):
            overrides.check_added_keys([line for line in lines if not _is_hydra(line)], cfg=composed.config)
        return composed
    except HydraException as err:
        message = overrides.explain(err, argv)
    raise T4BenchError(message)


def _is_hydra(line: str) -> bool:
    key = line.split("=", 1)[0].lstrip("+~")
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def _check_scale(spec: RunSpec) -> RunSpec:
    hardware.check_scale(spec)
    return spec


def _check_places(spec: RunSpec) -> RunEnvironment:
    """The hardware, the tracking store and the data files' structure, resolved as the job will resolve them
    (Hydra's node set, so `${hydra:runtime.cwd}` is this directory). The benchmark's module (and
    torch) load here instead of later in the same process. Returns the run environment."""
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(spec.config)
    try:
        env = hardware.check(spec)  # the hardware asked for is here (hw=h200 on a CPU host: one line)
        probe.tracking(str(spec.tracking.uri))  # a dead server or damaged store: one line in seconds
        if not spec.input.synthetic:
            from t4bench.benchmark import benchmark_class

            benchmark_class(spec).check_inputs(spec)
    finally:
        HydraConfig.instance().cfg = None  # Hydra sets the job's own when it starts it
    return env


def _searched(cfg: DictConfig, argv_overrides: Sequence[Any]) -> tuple[list[str], list[Any]]:
    """The sweeper's `params` that are plain values (passed to every job), and the sweep overrides:
    the command line's and the `params`' (the command line wins)."""
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
    plain = OmegaConf.to_container(params) if isinstance(params, DictConfig) else {}
    lines = [f"{key!s}={text}" for key, text in plain.items()] if isinstance(plain, dict) else []
    from_config = {o.key_or_group: o for o in _parse(lines)}
    for override in argv_overrides:
        from_config.pop(override.key_or_group, None)
    plain_params = [o.input_line for o in from_config.values() if not o.is_sweep_override()]
    searched = [o for o in from_config.values() if o.is_sweep_override()]
    return plain_params, [*searched, *(o for o in argv_overrides if o.is_sweep_override())]


def _check_output(cfg: DictConfig, option: str) -> None:
    """The folder Hydra will write (already checked when given on the command line)."""
    try:
        folder = Path(str(OmegaConf.select(cfg, option)))
    except Exception:  # an interpolation only Hydra's job can fill: Hydra will say
        return
    problem = probe.writable_dir_problem(folder)
    if problem:
        raise T4BenchError(f"{option}={folder}: {problem}; Hydra writes the outputs there")


def _check_flags(argv: Sequence[str]) -> None:
    """Hydra's own flags (--cfg job, --hydra-help, --info ...) parsed as Hydra will parse them, so
    an unknown one or a bad choice is one line here instead of argparse's usage block."""
    from hydra._internal.utils import get_args_parser  # the parser Hydra's main() uses

    parser = get_args_parser()

    def refuse(message: str) -> NoReturn:
        raise T4BenchError(f"{message} (see t4bench run --help; Hydra's flags: --hydra-help)")

    parser.error = refuse  # type: ignore[method-assign]  # argparse prints and exits instead
    known, unknown = parser.parse_known_args(list(argv))
    if unknown:
        refuse(f"unrecognized arguments: {' '.join(unknown)}")
    # Hydra allows one mode at a time and would end in a traceback ("Only one of --run, --multirun,
    # --cfg, --info and --shell-completion can be specified"): `t4bench sweep --cfg job` is that
    printing = [flag for flag, on in (("--cfg", known.cfg), ("--info", known.info)) if on]
    if known.multirun and printing:
        refuse(
            f"{printing[0]} describes one run and cannot go with a sweep: "
            f"use `t4bench run {printing[0]} ...` with the sweep's fixed overrides"
        )


def check(argv: Sequence[str]) -> Checked | None:
    """Raise one `T4BenchError` line for anything wrong on the command line `argv`; what a single
    run's checks found (None for a sweep, a dry run, or a command line Hydra prints or loads itself)."""
    if any(arg.startswith("-") and arg not in MULTIRUN_FLAGS for arg in argv):
        _check_flags(argv)
        return None  # --cfg, --help, --info, --config-name ...: printing, or a config Hydra loads itself
    # Hydra sweeps for `hydra.mode=MULTIRUN` too (no config of t4bench's sets a mode)
    multirun = any(arg in MULTIRUN_FLAGS or arg.lstrip("+") == "hydra.mode=MULTIRUN" for arg in argv)
    lines = [arg for arg in argv if not arg.startswith("-")]
    try:
        parsed = _parse(lines)
    except Exception as err:  # the override grammar
        from hydra.errors import HydraException

        if isinstance(err, HydraException):
            raise T4BenchError(overrides.explain(err, argv)) from None
        raise
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    if multirun:
        overrides.check_sweeps_not_empty(lines)  # before any parent run or sweep folder exists
    if not multirun:
        composed = _compose_run(lines, argv)
        spec = _check_scale(validation.validate(composed.config))
        if study_matrix.is_dry_run(spec):
            return None  # the app lists the experiment's runs: nothing is read or created
        study_matrix.check(spec)  # a run outside its matrix, before the data it would need is looked for
        return Checked(tuple(line for line in lines if not _is_hydra(line)), _check_places(spec), composed)
    cfg = _compose(fixed, argv)
    _check_output(cfg, "hydra.sweep.dir")
    storage = OmegaConf.select(cfg, "hydra.sweeper.storage", default=None)
    if storage:
        places.optuna_storage(str(storage))
    plain_params, searched = _searched(cfg, [o for o in parsed if o.is_sweep_override()])
    for high in (False, True):
        sampled = [_sample(override, high) for override in searched]
        job = _check_scale(validation.validate(_compose([*fixed, *plain_params, *sampled], argv)))
    _check_places(job)
    slurm.check(job)  # sbatch fails only after the parent run and the sweep folder exist
    return None
