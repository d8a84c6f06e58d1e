"""The `model:` section as the run spec holds it: the fields every model has, typed, and the model's
own keys (optimizer, schedule, data, arch ...) in `rest`.

`model_spec(node)` is the one seam where a benchmark's own config class plugs in: today it builds
the common base; a benchmark that declares its dataclass (benchmarks/<name>/) will be built here
instead, its keys checked by its own annotations.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from omegaconf import DictConfig, OmegaConf

from t4bench.benchmarks.bounds import POSITIVE_INT
from t4bench.spec.section import Section, build


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec(Section):
    """What every benchmark's `model:` has. `batch_size` is per rank, after `emulate.world_size`
    (t4bench.emulation): the one value a derived setting changes, so it is read here, not in `rest`."""

    name: str = ""
    benchmark: str = ""
    framework: str | None = None
    batch_size: Annotated[int, POSITIVE_INT] = 1
    eval_batch_size: Annotated[int, POSITIVE_INT] = 1
    max_epochs: Annotated[int, POSITIVE_INT] = 1

    def plain(self) -> dict[str, Any]:
        """The section as plain values, `${...}` resolved, with the run's batch in place: what a
        benchmark's own config class is built from."""
        plain: dict[str, Any] = OmegaConf.to_container(self.rest, resolve=True)  # type: ignore[assignment]
        return {**plain, "batch_size": self.batch_size}


def model_spec(node: DictConfig | None) -> ModelSpec:
    """The model section of a run: the seam for a benchmark's own typed config class."""
    return build(ModelSpec, node, "model.")
