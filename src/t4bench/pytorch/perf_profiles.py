"""The perf profile a run trains with (the `perf` config group, conf/perf/): the one Hydra composed,
or under `hw=auto` (perf/auto.yaml) the profile of the hardware found when the run starts.

    chosen = perf_profiles.chosen(cfg)       # profile name, the model's entry, top-level values
    chosen.options                           # what t4bench.pytorch.perf.PerfOptions is built from
    chosen.note                              # "perf profile h100 sets nothing for ncf: ..." or ""

Apart from PerfOptions (t4bench.pytorch.perf), which builds the run's options from it, so that
"which profile, and what does it set for this model" has one answer for the loop and for the
scripts that report a profile (perf/profile_default.py). perf/auto.yaml composes every hardware
profile under `by_hw` (Hydra resolves their `${input.synthetic}` against the run's config); the
pick is the one `t4bench.hardware` makes for `hw=auto`, from the GPU's name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t4bench import hardware
from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec

#: keys of a profile node that are not options: its name, the per-model entries and (auto.yaml
#: only) every hardware profile composed for the run-time pick
NOT_OPTIONS = ("name", "models", "by_hw")


@dataclass(frozen=True)
class Chosen:
    """The profile in effect for one model."""

    #: the profile's `name` (`h100` for hw=auto on an H100); "" when the config has no perf group
    profile: str = ""
    model: str = ""
    #: the profile's entry for the model (perf.models.<model>), non-null values only
    entry: Mapping[str, Any] = field(default_factory=dict)
    #: options set for every model (perf.<option>: the command line), non-null values only
    top: Mapping[str, Any] = field(default_factory=dict)

    @property
    def options(self) -> dict[str, Any]:
        """The options set: the model's entry with the top-level values over it."""
        return {**self.entry, **self.top}

    @property
    def note(self) -> str:
        """Why the run has none of the profile's options, when it has none: the profile sets
        nothing for this model (tagged, so a slow run is not read as the profile's best)."""
        if not self.profile or self.entry:
            return ""
        said = f"perf profile {self.profile} sets nothing for {self.model or 'this model'}"
        if not self.top:
            return f"{said}: the plain eager loop"
        given = ", ".join(f"{key}={value}" for key, value in sorted(self.top.items()))
        return f"{said}; in effect only {given}"


@functools.cache
def detected_hw_profile() -> str:
    """The conf/hw profile `hw=auto` picks on this machine (cpu without a GPU); asked once."""
    return hardware.profile_for(hardware.detect())


def chosen(cfg: RunSpec, hw_name: str | None = None) -> Chosen:
    """The profile in effect for `cfg.model`: `cfg.perf`, or for perf/auto.yaml its `by_hw` entry
    of `hw_name` (None: the hardware found here) with auto's own non-null values over it."""
    node = cfg.get("perf")
    if node is None:
        return Chosen()
    plain = _plain(node)
    model = str(cfg.model.name) if "model" in cfg else ""
    by_hw = plain.get("by_hw")
    if by_hw is not None:
        plain = _picked(plain, by_hw, hw_name or detected_hw_profile())
    entry = _plain((plain.get("models") or {}).get(model) or {})
    return Chosen(
        profile=str(plain.get("name") or ""),
        model=model,
        entry={k: v for k, v in entry.items() if v is not None},
        top={k: v for k, v in plain.items() if k not in NOT_OPTIONS and v is not None},
    )


def _picked(auto: dict[str, Any], by_hw: Mapping[str, Any], hw_name: str) -> dict[str, Any]:
    """perf/auto.yaml resolved for `hw_name`: that profile, auto's non-null top-level values and
    model entries (given on the command line) over it."""
    if hw_name not in by_hw:
        raise T4BenchError(
            f"perf/auto.yaml has no profile for hw={hw_name}; add `{hw_name}@by_hw.{hw_name}` to its defaults"
        )
    picked = dict(by_hw[hw_name])
    models = {str(k): dict(v or {}) for k, v in (picked.get("models") or {}).items()}
    for model, given in (auto.get("models") or {}).items():
        models[str(model)] = {**models.get(str(model), {}), **{k: v for k, v in (given or {}).items() if v is not None}}
    top = {k: v for k, v in auto.items() if k not in NOT_OPTIONS and v is not None}
    return {**picked, **top, "models": models}


def _plain(node: Any) -> dict[str, Any]:
    """A DictConfig (interpolations resolved against its root) or mapping as a plain dict."""
    if isinstance(node, DictConfig):
        container = OmegaConf.to_container(node, resolve=True)
        return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
    return dict(node)
