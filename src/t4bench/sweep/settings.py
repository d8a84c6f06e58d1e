"""What the study is built from and records about its sweep: the sampler and pruner from their
config nodes, and the command line's overrides (study user attributes t4bench_task_overrides /
t4bench_hydra_overrides), which `python -m t4bench.sweep.holdout` applies again so that
validation runs are composed exactly as the trials were."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from t4bench.spec import RunSpec


def instantiate(node: Any, **extra: Any) -> Any:
    """A sampler / pruner from its config node; None for an empty node or `_target_: null`."""
    from hydra.utils import instantiate as hydra_instantiate

    if node is None:
        return None
    node = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    if not node or node.get("_target_") in (None, "null", "none"):
        return None
    return hydra_instantiate({**node, **extra})


def task_overrides(spec: RunSpec) -> list[str]:
    """The command line's non-sweep task overrides (what validation must apply again)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    raw = spec.sweep.overrides("task")
    out = []
    for line in raw:
        override = OverridesParser.create().parse_override(str(line))
        if not override.is_sweep_override() and override.get_key_element() != "seed":
            out.append(str(line))
    return out


def hydra_overrides(spec: RunSpec) -> list[str]:
    raw = spec.sweep.overrides("hydra")
    skip = (
        "hydra.sweeper.n_jobs=",
        "hydra.sweeper.worker_index=",
        "hydra.sweeper.validate_seeds=",
        "hydra.sweeper.n_trials=",
    )
    return [str(o) for o in raw if not str(o).startswith(skip)]
