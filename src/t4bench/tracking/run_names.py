"""The names of the MLflow runs t4bench creates, made to show whole in the runs table's Run Name
column at its default width (MLflow 3.17.2; measured in headless Chromium, docs/mlflow_ui.md).

    ncf-mini-cpux1-s3          a training run on its own     <model>-<scale>-<hw>x<count>-s<seed>
    seeds-1204-171238          a seed sweep (--multirun)     seeds-<MMDD-hhmmss of its folder>
      seed=1                   its training runs             the job's swept values
    ncf_tuned-3f9a             an Optuna sweep               <study>-<study uid, 4 hex>, or <study>
      trial-007                a trial
        seed=101               the trial's training runs
    val-ncf_tuned              a held-out validation         val-<study>-<study uid, 4 hex>, or val-<study>
      tuned-t33 / reference    its arms
        seed=1000              the arms' training runs
    report-ncf_mini            a published report            report-<its folder>

A name is only a label: nothing finds a run by its name (sweeps, resume, repair and the report
use the t4bench tags, which keep the long identity).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from t4bench.tracking.run_config import RunConfig

#: the characters of a name the column shows, by how deeply the run is nested (0: top level). The
#: column is 190 px wide; the name gets 122 px at the top level and 24 px less per level (the
#: expander's indent): 98 and 74 px. Counted in digits (6.7 px each at the UI's 12 px sans in
#: Chromium, a little wider than the letters and dashes of t4bench's names).
RUN_NAME_MAX = (17, 14, 10)
#: the swept keys of a --multirun (comma separated), set by the seed-sweep callback for its jobs:
#: a job's run is named by its own values of them
ENV_SWEPT_KEYS = "T4BENCH_SWEPT_KEYS"
#: Hydra's default sweep folder name (conf/config.yaml: hydra.sweep.dir)
_HYDRA_TIME_FOLDER = re.compile(r"^\d{4}-(\d\d)-(\d\d)_(\d\d)-(\d\d)-(\d\d)$")


def max_length(depth: int) -> int:
    return RUN_NAME_MAX[min(depth, len(RUN_NAME_MAX) - 1)]


def fits(name: str, depth: int = 0) -> bool:
    return len(name) <= max_length(depth)


def fit(name: str, depth: int = 0) -> str:
    """`name`, or when too long for `depth`, its head, `~` and 4 hex digits of the whole name's
    hash (names that differ stay apart)."""
    limit = max_length(depth)
    if len(name) <= limit:
        return name
    head = name[: limit - 5].rstrip("-_.=~ ")  # no dangling separator before the hash
    return f"{head}~{hashlib.sha1(name.encode()).hexdigest()[:4]}"


def first_fit(*names: str, depth: int = 0) -> str:
    """The first of `names` (most telling first) that fits, else the last one fitted."""
    return next((name for name in names if fits(name, depth)), fit(names[-1], depth))


def seed(value: object, depth: int) -> str:
    """`seed=<seed>` for a run nested under the parent that names what it is a seed of; `s<seed>`
    when that is too long."""
    return first_fit(f"seed={value}", f"s{value}", depth=depth)


def training(model: str, scale: str, hw: str, count: object, seed_value: object) -> str:
    """A top-level training run: `<model>-<scale>-<hw>x<count>-s<seed>`, without the model when
    that is too long (the experiment, t4bench-<model>, names it)."""
    rest = f"{scale}-{hw}x{count}-s{seed_value}"
    full = f"{model}-{rest}"
    return full if fits(full) else fit(rest)


def swept(overrides: Sequence[str], keys: Sequence[str], groups: Sequence[str], depth: int = 1) -> str | None:
    """A sweep job's run, from its own `overrides` of the swept `keys`: a config group by its
    choice, any other key as `<last part>=<value>`, the seed last (`tuned seed=1`, `lr=0.01 s1`);
    None when the job overrides none of them."""
    values = {}
    for override in overrides:
        key, sep, value = override.lstrip("+~").partition("=")
        if sep and key in keys:
            values[key] = value
    if not values:
        return None
    parts = [v if k in groups else f"{k.rsplit('.', 1)[-1]}={v}" for k, v in values.items() if k != "seed"]
    if "seed" in values:
        with_seed = [" ".join([*parts, f"{label}{values['seed']}"]) for label in ("seed=", "s")]
        return first_fit(*with_seed, depth=depth)
    return fit(" ".join(parts), depth)


def job(cfg: RunConfig, hw: str, count: object) -> str:
    """The default name of a training run on `hw` x `count` (the resolved profile): `training(...)`
    at the top level; under a parent (a sweep's job, tracking.parent_run_id) what the job's swept
    values say, else `seed=<seed>`."""
    if not cfg.tracking.parent_run_id:
        return training(cfg.model.name, cfg.scale.name, hw, count, cfg.seed)
    keys = [k for k in os.environ.get(ENV_SWEPT_KEYS, "").split(",") if k]
    if keys:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            hydra = HydraConfig.get()
            name = swept(list(hydra.overrides.task), keys, list(hydra.runtime.choices))
            if name is not None:
                return name
    return seed(cfg.seed, 1)


def swept_keys(overrides: Sequence[str]) -> list[str]:
    """The keys a --multirun's `overrides` sweep (`seed=1,2` → seed), as Hydra parses them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]


def seed_sweep(folder: str) -> str:
    """A seed sweep's parent: `seeds-<MMDD-hhmmss>` for Hydra's dated folder, else
    `seeds-<folder>` (the experiment names the model; the folder is in the parent's identity)."""
    when = _HYDRA_TIME_FOLDER.match(folder)
    return fit(f"seeds-{''.join(when.groups()[:2])}-{''.join(when.groups()[2:])}" if when else f"seeds-{folder}")


def optuna_parent(study: str, study_uid: str) -> str:
    """`<study>-<uid4>` (studies of one name in other storages stay apart), `<study>` when only
    that fits."""
    return first_fit(f"{study}-{study_uid[:4]}", study, f"{study}-{study_uid[:4]}")


def trial(number: int) -> str:
    return fit(f"trial-{number:03d}", 1)


def validation(study: str, study_uid: str) -> str:
    return first_fit(f"val-{study}-{study_uid[:4]}", f"val-{study}", f"val-{study}-{study_uid[:4]}")


def report(folder: str) -> str:
    return fit(f"report-{folder}")
