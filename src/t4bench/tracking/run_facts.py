"""What a run records of itself, as plain values, without MLflow: its params (the resolved
config, flattened), its name, and the contract tags it carries from its creation. Both trackers use
it: `t4bench.tracking.run.RunTracker` in the training process, and `t4bench.tracking.process`,
which sends these values to a tracking process so the training process never imports MLflow."""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from omegaconf import OmegaConf

import t4bench
from t4bench.spec import HwSpec
from t4bench.tracking import names, run_names, system_metrics
from t4bench.tracking.run_config import RunConfig

_VERSIONED = (
    "torch",
    "torchvision",
    "mlflow",
    "hydra-core",
    "optuna",
    "nvidia-ml-py",
    "tensorflow",
    "horovod",
    # the quality metrics: BLEU and COCO mAP can shift between versions
    "sacrebleu",
    "sentencepiece",
    "pycocotools",
)


class RunPlace(Protocol):
    """What a run records of where it trains (`t4bench.run_env.RunEnvironment` is one: named
    here, not imported, so tracking stays below run_env, which spells its tags from tracking.names)."""

    @property
    def hw(self) -> HwSpec: ...

    @property
    def world_size(self) -> int: ...


class BenchmarkKind(Protocol):
    """What a run records of its benchmark class (`t4bench.benchmark.Benchmark`'s class attributes)."""

    framework: ClassVar[str]
    throughput_unit: ClassVar[str]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{'model': {'lr': 1}} -> {'model.lr': '1'}; lists stay one value."""
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def resolved_config(cfg: RunConfig, env: RunPlace) -> dict[str, Any]:
    """The config as the run used it: `${...}` resolved, and `hw` the profile trained on (`hw=auto`
    resolved, hw.count = the ranks), so params and resolved_config.yaml say what ran."""
    container = cfg.logged_config()
    container.pop("hydra", None)
    container["hw"] = OmegaConf.to_container(env.hw.rest, resolve=True)
    return container


def software_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in _VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[package] = importlib.metadata.version(package)
    # a source checkout on PYTHONPATH (no pip install) has no distribution metadata
    versions["t4bench"] = t4bench.__version__
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def default_run_name(cfg: RunConfig, env: RunPlace) -> str:
    """The run's name when tracking.run_name gives none (t4bench.tracking.run_names.job)."""
    return run_names.job(cfg, env.hw.name, env.world_size)


@dataclass(frozen=True)
class RunOpening:
    """Everything needed to create (or adopt) a run and log its config, as plain values: what a
    tracker in another process receives."""

    experiment: str
    name: str
    #: the resolved config, flattened, without the keys a resumed run changes
    params: dict[str, str]
    tags: dict[str, str]
    #: seconds between MLflow's system-metrics samples (None: off)
    system_metrics_interval_s: float | None


def opening(cfg: RunConfig, env: RunPlace, tags: Mapping[str, Any]) -> RunOpening:
    """The run's opening values; a bad `tracking.system_metrics_interval_s` raises here, before
    any run exists."""
    interval = system_metrics.interval_from(cfg)
    params = flatten(resolved_config(cfg, env))
    for where in ("resume", "checkpoint.dir"):  # a resumed run changes them: not what ran
        params.pop(where, None)
    return RunOpening(
        experiment=str(cfg.tracking.experiment),
        name=str(cfg.tracking.run_name or default_run_name(cfg, env)),
        params=params,
        tags={k: str(v) for k, v in tags.items()},
        system_metrics_interval_s=interval,
    )


def contract_tags(cfg: RunConfig, env: RunPlace, bench_cls: type[BenchmarkKind]) -> dict[str, str]:
    """The tags every run carries from its creation (reports and sweeps filter on them)."""
    tags = {
        names.MODEL: str(cfg.model.name),
        names.HW: str(env.hw.name),
        names.HW_COUNT: str(env.world_size),
        names.SCALE: str(cfg.scale.name),
        names.DATA: "synthetic" if cfg.input.synthetic else "real",
        names.FRAMEWORK: str(bench_cls.framework),
        names.THROUGHPUT_UNIT: str(bench_cls.throughput_unit),
        names.SEED: str(cfg.seed),
        names.OUTCOME: names.OUTCOME_RUNNING,
    }
    tags.update({f"{names.VERSION_PREFIX}{k}": v for k, v in software_versions().items()})
    commit = git_commit()
    if commit:
        tags[names.MLFLOW_GIT_COMMIT] = commit
    if cfg.tracking.sweep_id:
        tags[names.SWEEP_ID] = str(cfg.tracking.sweep_id)
    if cfg.tracking.parent_run_id:
        tags[names.MLFLOW_PARENT_RUN_ID] = str(cfg.tracking.parent_run_id)
    tags.update(cfg.tags)  # the user's tracking.tags, then the runner's derived ones
    return tags
