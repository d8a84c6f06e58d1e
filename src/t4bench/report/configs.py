"""Which runs are the same configuration: a stable hash of what was chosen (the model's and the
run's settings, the hparams preset), never the run name. Seeds of one setting share an id; the
trials of a sweep (each with its own hyperparameters) get one id each.

hw and the GPU count are grouped on beside the id (the speed-up and scaling tables compare
across them), so the hw profile's params are left out of it, as is what only says where or how a
run was recorded (seed, tracking, paths, checkpoints).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import pandas as pd

# experiment.*: the run matrix an experiment (e.g. study_r740) belongs to, not how a run trains
_EXCLUDED_PREFIXES = ("tracking.", "paths.", "checkpoint.", "hw.", "hydra.", "experiment.")
_EXCLUDED = frozenset(
    {"seed", "progress", "model.data.path", "dist.timeout_s", "dist.max_restarts", "hparams.sweep", "hparams.heldout"}
)
#: characters of a value shown in a settings label (a sweep's lr has 17 digits)
_VALUE_CHARS = 16


def config_params(params: Mapping[str, str]) -> dict[str, str]:
    """The params that make a configuration (every one but those recording where/how it ran)."""
    return {k: v for k, v in params.items() if k not in _EXCLUDED and not k.startswith(_EXCLUDED_PREFIXES)}


def config_id(params: Mapping[str, str]) -> str:
    """8 hex digits of a SHA-256 over the sorted config params: the same in every report."""
    text = json.dumps(sorted(config_params(params).items()))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _short(key: str) -> str:
    return ".".join(key.split(".")[-2:])


def _value(value: str) -> str:
    return value if len(value) <= _VALUE_CHARS else value[: _VALUE_CHARS - 1] + "…"


def settings(runs: pd.DataFrame) -> dict[str, str]:
    """config id -> what tells it apart from the other configurations of its model and scale:
    `hparams=<preset>` and each param whose value differs between them."""
    out: dict[str, str] = {}
    for _, group in runs.groupby(["model", "scale"], sort=True):
        firsts = group.drop_duplicates("config")
        chosen = list(firsts["config_params"])
        keys = sorted({k for d in chosen for k in d})
        differing = [k for k in keys if not k.startswith("hparams.") and len({d.get(k) for d in chosen}) > 1]
        for cid, preset, d in zip(firsts["config"], firsts["hparams"], chosen, strict=True):
            parts = [f"hparams={preset or '?'}"]
            parts += [f"{_short(k)}={_value(d.get(k, '–'))}" for k in differing]
            out[str(cid)] = " ".join(parts)
    return out
