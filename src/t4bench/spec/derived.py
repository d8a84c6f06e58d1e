"""What the runner works out about a run from its spec and where it runs, returned as one value and
never written into the config: the tags of emulation, GPU packing and the sweep launcher / Slurm job,
the emulated per-rank batch, and the CPU threads a packed run gets.

`RunSpec.with_derived(derived)` is the spec this run trains with (a new frozen value; the composed
config is left as Hydra made it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class RunDerived:
    #: tags every run of this process carries from its creation (after the user's tracking.tags)
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: emulate.world_size=N: this rank trains with N x model.batch_size (None: no emulation)
    batch_size: int | None = None
    #: runs of this sweep sharing the GPU at once (hw.runs_per_gpu in a --multirun)
    gpu_share: int = 1
    #: CPU threads of a packed CPU run (None: hw.threads / the launcher's choice)
    threads: int | None = None
