"""emulate.world_size=N (t4bench.emulation): one device, N ranks' global batch; the LR and the
schedule's progress per step must be those of a real hw.count=N run."""

from __future__ import annotations

import pytest
from conftest import compose

from t4bench import emulation
from t4bench import schedule as schedules
from t4bench.errors import T4BenchError
from t4bench.spec import RunDerived, build_spec

TRAIN = 50_000


def lr_per_step(overrides: list[str], world_size: int, emulate: bool) -> tuple[float, list[float], int]:
    """(base LR, LR factor at each step of 3 epochs, steps per epoch) as t4bench.pytorch.trainer computes
    them for a run of `world_size` ranks (the spec after emulation.derive where `emulate`)."""
    cfg = build_spec(compose(overrides))
    if emulate:
        batch, _ = emulation.derive(cfg, ranks=1)
        cfg = cfg.with_derived(RunDerived(batch_size=batch))
    global_batch = int(cfg.model.batch_size) * world_size  # trainer.Trainer.global_batch
    base = schedules.base_lr(cfg.model.optimizer, global_batch, int(cfg.model.schedule.ref_batch_size))
    schedule = schedules.from_config(cfg.model.schedule, TRAIN)
    per_rank = -(-TRAIN // world_size)  # DistributedSampler: each rank's share
    steps_per_epoch = -(-per_rank // int(cfg.model.batch_size))
    factors, samples = [], 0
    for step in range(3 * steps_per_epoch):
        factors.append(schedule.factor(samples, step))
        samples += int(cfg.model.batch_size) * world_size  # Trainer.step: local x ranks
    return base, factors, steps_per_epoch


@pytest.mark.parametrize("unit", ["steps", "samples"])
@pytest.mark.parametrize("model", ["gnmt", "ncf"])
def test_emulated_world_size_has_the_lr_and_schedule_of_real_ranks(model: str, unit: str) -> None:
    common = [f"model={model}", f"model.schedule.unit={unit}", "model.optimizer.lr_scaling=linear"]
    real = lr_per_step([*common, "hw.count=2"], world_size=2, emulate=False)
    emulated = lr_per_step([*common, "emulate.world_size=2"], world_size=1, emulate=True)
    assert emulated == real
    alone = lr_per_step(common, world_size=1, emulate=False)
    assert alone[0] == pytest.approx(real[0] / 2)  # the comparison can tell 1 from 2 ranks


def test_emulation_with_several_real_ranks_is_refused() -> None:
    cfg = build_spec(compose(["emulate.world_size=2", "hw.count=2"]))
    with pytest.raises(T4BenchError, match=r"use hw\.count=1"):
        emulation.derive(cfg, ranks=2)
    with pytest.raises(T4BenchError, match="positive whole number"):
        emulation.world_size(build_spec(compose(["emulate.world_size=0"])))
