"""What a sweep's MLflow runs record of its composed config: the tags (model / hw / hw_count /
scale, as its training runs carry them, `hw=auto` resolved where the jobs run) and the parent's
fixed params. Here in sweep/, not in tracking/: resolving `hw=auto` asks the hardware module,
which spells its own tags from tracking.names (the import graph flows one way)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from omegaconf import OmegaConf

from t4bench.spec import RunSpec
from t4bench.spec.section import ABSENT
from t4bench.tracking import names

log = logging.getLogger(__name__)


def config_tags(spec: RunSpec) -> dict[str, str]:
    """t4bench.model / hw / hw_count / scale of the composed config (as training runs carry)."""
    keys = {names.MODEL: "model.name", names.HW: "hw.name", names.HW_COUNT: "hw.count", names.SCALE: "scale.name"}
    out = {}
    for tag, key in keys.items():
        value = spec.lookup(key)
        if value is not ABSENT and value is not None:
            out[tag] = str(value)
    if out.get(names.HW) == "auto":  # the profile the jobs resolve it to, so parent and runs agree
        out[names.HW] = detected_profile()
    return out


def detected_profile() -> str:
    """The hw profile `hw=auto` picks on this machine (where the sweep's jobs run); "auto" if none."""
    from t4bench import hardware

    try:
        return hardware.profile_for(hardware.detect())
    except Exception:  # no profile matches: each job fails with the one-line reason itself
        return "auto"


def fixed_params(spec: RunSpec, searched: Sequence[str], fixed_overrides: Sequence[str]) -> dict[str, str]:
    """The composed config (resolved, flattened as a training run logs it) minus the searched keys
    and the seed, plus the sweep's plain `hydra.sweeper.params` values (given to every job)."""
    from t4bench.tracking.run import flatten

    config = spec.config
    task = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
    try:
        container = OmegaConf.to_container(task, resolve=True)
    except Exception as err:  # an interpolation only a job can resolve: the params are a nicety
        log.warning("sweep parent params: the config does not resolve here (%s)", err)
        return {}
    assert isinstance(container, dict)
    params = flatten(container)  # type: ignore[arg-type]
    for line in fixed_overrides:
        key, _, value = line.partition("=")
        params[key.lstrip("+~")] = value
    skip = {*searched, "seed"}
    return {k: v for k, v in params.items() if k not in skip}
