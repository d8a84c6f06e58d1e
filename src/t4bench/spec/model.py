"""The `model:` section as the run spec holds it: the fields every model has, typed, and the model's
own keys (optimizer, schedule, data, arch ...) in `rest`.

A benchmark that declares its own model-section dataclass (benchmarks/<name>/config.py) builds it
from `plain()` with the same builder (`t4bench.spec.section.build`), its keys checked by its fields'
rules.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from omegaconf import OmegaConf

from t4bench.spec.bounds import POSITIVE_INT
from t4bench.spec.section import Section


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
