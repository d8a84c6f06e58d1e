"""schedule.unit: what stays fixed when the global batch (GPU count) changes."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from t4bench.schedule import Schedule

TRAIN = 10_000
REF_BATCH = 100
#: a constant LR after 2 reference-batch epochs of warm-up; each test's schedule changes what it tests
WARMUP_ONLY = Schedule(
    unit="samples",
    kind="constant",
    warmup_epochs=2.0,
    decay_epochs=[],
    decay_factor=1.0,
    ref_batch_size=REF_BATCH,
    train_size=TRAIN,
)


def step_schedule(unit: str) -> Schedule:
    return dataclasses.replace(
        WARMUP_ONLY, unit=unit, kind="step", warmup_epochs=1.0, decay_epochs=[4.0, 6.0], decay_factor=0.5
    )


def lr_at_epoch(schedule: Schedule, epoch: float, global_batch: int) -> float:
    samples = int(epoch * TRAIN)
    return schedule.factor(samples_seen=samples, steps_done=samples // global_batch)


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_samples_unit_keeps_decay_at_the_same_epoch(gpus: int) -> None:
    schedule = step_schedule("samples")
    batch = REF_BATCH * gpus
    assert lr_at_epoch(schedule, 3.9, batch) == 1.0
    assert lr_at_epoch(schedule, 4.0, batch) == 0.5
    assert lr_at_epoch(schedule, 6.0, batch) == 0.25


def test_steps_unit_moves_decay_later_in_epochs_with_bigger_batches() -> None:
    schedule = step_schedule("steps")
    # 1 GPU: decay at epoch 4, as written
    assert lr_at_epoch(schedule, 3.9, REF_BATCH) == 1.0
    assert lr_at_epoch(schedule, 4.0, REF_BATCH) == 0.5
    # 2 GPUs: the same 400 steps take 8 epochs, so at epoch 4..7.9 the LR is still undecayed
    assert lr_at_epoch(schedule, 7.9, 2 * REF_BATCH) == 1.0
    assert lr_at_epoch(schedule, 8.0, 2 * REF_BATCH) == 0.5
    # 4 GPUs: warm-up alone lasts 4 epochs
    assert lr_at_epoch(schedule, 2.0, 4 * REF_BATCH) == pytest.approx(0.5)


def test_warmup_is_linear_and_inverse_sqrt_decays_after_it() -> None:
    schedule = dataclasses.replace(WARMUP_ONLY, kind="inverse_sqrt")
    assert schedule.factor(TRAIN, 0) == pytest.approx(0.5)
    assert schedule.factor(2 * TRAIN, 0) == pytest.approx(1.0)
    assert schedule.factor(8 * TRAIN, 0) == pytest.approx(0.5)


def test_unknown_unit_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"schedule\.unit"):
        step_schedule("epochs")


def warmup_schedule(shape: str, unit: str = "samples") -> Schedule:
    return dataclasses.replace(WARMUP_ONLY, unit=unit, warmup_shape=shape)


def test_exponential_warmup_grows_by_a_constant_factor_from_one_percent() -> None:
    schedule = warmup_schedule("exponential")
    # NVIDIA's v0.5 GNMT: lr x 0.01^(1 - t/warmup)
    assert schedule.factor(0, 0) == pytest.approx(0.01)
    assert schedule.factor(TRAIN // 2, 0) == pytest.approx(0.01**0.75)
    assert schedule.factor(TRAIN, 0) == pytest.approx(0.1)
    assert schedule.factor(2 * TRAIN, 0) == 1.0
    quarters = [schedule.factor(q * TRAIN // 2, 0) for q in range(4)]
    ratios = [b / a for a, b in itertools.pairwise(quarters)]
    assert ratios == pytest.approx([ratios[0]] * 3)
    # below the linear ramp all through the warm-up (it starts slower)
    linear = warmup_schedule("linear")
    assert all(schedule.factor(q * TRAIN // 2, 0) < linear.factor(q * TRAIN // 2, 0) for q in range(1, 4))


def test_exponential_warmup_follows_the_schedule_unit() -> None:
    schedule = warmup_schedule("exponential", unit="steps")
    # 2 warm-up epochs at the reference batch = 200 steps, whatever the real batch
    assert schedule.factor(samples_seen=4 * TRAIN, steps_done=100) == pytest.approx(0.1)
    assert schedule.factor(samples_seen=4 * TRAIN, steps_done=200) == 1.0


def test_warmup_shape_defaults_to_linear_in_configs_that_omit_it() -> None:
    from omegaconf import OmegaConf

    from t4bench.schedule import from_config

    node = OmegaConf.create(
        {
            "unit": "samples",
            "kind": "constant",
            "warmup_epochs": 1.0,
            "decay_epochs": [],
            "decay_factor": 0.5,
            "ref_batch_size": 10,
        }
    )
    OmegaConf.set_struct(node, True)
    assert from_config(node, TRAIN).warmup_shape == "linear"


def test_unknown_warmup_shape_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"schedule\.warmup_shape"):
        warmup_schedule("cosine")
