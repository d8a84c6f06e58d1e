"""`emulate.world_size=N` (docs/sweeps.md "Emulating N GPUs on one"): one device trains with the
global batch that N data-parallel ranks would make, for the schedule-unit experiment.

Worked out once by the runner, as values (`derive`): the spec's model.batch_size becomes
batch_size x N, while the schedule's ref_batch_size, which interpolates model.batch_size in the
composed config (left as it is), keeps its value at N=1. From there the trainer's global batch,
the LR scaling (optim.base_lr), samples per step and steps per epoch, hence
`schedule.unit=steps|samples` progress, are those of hw.count=N. hw.count, the world_size tag and
metric stay 1; the run is tagged t4bench.emulated_world_size=N.

Not identical to N ranks: the large batch's loss is one mean over it (DDP averages N per-rank
means: the same for per-sample means, token-weighted differently for translation), BatchNorm sees
N x the samples, and seq2seq length buckets are drawn once for the whole batch."""

from __future__ import annotations

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec
from t4bench.tracking import names


def world_size(spec: RunSpec) -> int:
    """The emulated world size (1: no emulation)."""
    node = spec.get("emulate") or {}
    value = node.get("world_size", 1)
    if value is None or not str(value).isdigit() or int(value) < 1:
        raise T4BenchError(f"emulate.world_size={value}: give a positive whole number of ranks to emulate")
    return int(value)


def derive(spec: RunSpec, ranks: int) -> tuple[int | None, dict[str, str]]:
    """The per-rank batch for emulate.world_size=N on this one rank (None: no emulation) and its tag
    (`ranks`: the real world size)."""
    n = world_size(spec)
    if n == 1:
        return None, {}
    if ranks != 1 or spec.hw.count != 1:
        raise T4BenchError(
            f"emulate.world_size={n} trains N ranks' global batch on one device: use hw.count=1 "
            f"(this run has {max(ranks, spec.hw.count)} ranks)"
        )
    return spec.model.batch_size * n, {names.EMULATED_WORLD_SIZE: str(n)}
