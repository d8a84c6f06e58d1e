"""The typed `model:` section every benchmark shares (sizes, optimizer, LR schedule, target), which
each benchmark's `config.py` extends with its own `data` and `arch` fields.

A field's bound rides on the field itself (`bounded(rule)`), so the dataclass is the one place that
says what a key may be: the preflight walks `t4bench.spec.section.rules(cls)` to refuse a bad value
in one line before anything starts, and the run spec's builder (`t4bench.spec.section.build`) reads
the section from the spec's resolved `model:` values into a frozen instance for the code.
Keys of the YAML a dataclass does not declare are left to the code that reads them (architecture
details), so users' overrides and conf/ keep every key they have.

Only the standard library and the run spec's builder (OmegaConf) load here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.spec.bounds import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    UNIT_OPEN,
    Choice,
    Flag,
    Number,
    Numbers,
)
from t4bench.spec.section import bounded


@dataclass(frozen=True)
class Optimizer:
    name: str = bounded(Choice(("adam", "adamw", "sgd")))
    lr: float = bounded(POSITIVE)
    weight_decay: float = bounded(NON_NEGATIVE, 0.0)
    momentum: float = bounded(UNIT_OPEN, 0.0)
    nesterov: bool = bounded(Flag(), False)
    eps: float = bounded(POSITIVE, 1e-8)
    betas: tuple[float, ...] = bounded(Numbers(UNIT_OPEN, length=2), (0.9, 0.999))
    lr_scaling: str = bounded(Choice(("none", "linear")), "none")
    #: gradients clipped to this global norm (trainer); 0 or null: off
    clip_grad_norm: float | None = bounded(Number(low=0, nullable=True), None)


@dataclass(frozen=True)
class Schedule:
    unit: str = bounded(Choice(("samples", "steps")), "samples")
    kind: str = bounded(Choice(("constant", "step", "inverse_sqrt")), "constant")
    warmup_shape: str = bounded(Choice(("linear", "exponential")), "linear")
    warmup_epochs: float = bounded(NON_NEGATIVE, 0.0)
    decay_epochs: tuple[float, ...] = bounded(Numbers(NON_NEGATIVE), ())
    decay_factor: float = bounded(Number(low=0, high=1, low_open=True), 0.5)
    ref_batch_size: int = bounded(POSITIVE_INT, 1)


@dataclass(frozen=True)
class DataSection:
    """What every `model.data` has: the dataset's name and its folder."""

    dataset: str = ""
    path: str = ""


@dataclass(frozen=True)
class ClassesArch:
    """An `arch` that predicts one of `num_classes` (background included for detection)."""

    num_classes: int = bounded(Number(integer=True, low=2), 2)


@dataclass(frozen=True)
class ModelSection:
    """What every benchmark's `model:` has; also the rules of a model no folder describes."""

    name: str = ""
    batch_size: int = bounded(POSITIVE_INT, 1)
    eval_batch_size: int = bounded(POSITIVE_INT, 1)
    max_epochs: int = bounded(POSITIVE_INT, 1)
    optimizer: Optimizer = field(default_factory=Optimizer)
    schedule: Schedule = field(default_factory=Schedule)
    #: metric -> threshold; the first key is eval_quality (bounded by the benchmark's metrics)
    target: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class VisionSection(ModelSection):
    """What the image benchmarks add (ResNet-50, SSD, Mask R-CNN): channels-last memory, classes."""

    channels_last: bool = bounded(Flag(), False)
    arch: ClassesArch = field(default_factory=ClassesArch)


__all__ = [
    "NON_NEGATIVE_INT",
    "ClassesArch",
    "DataSection",
    "ModelSection",
    "Optimizer",
    "Schedule",
    "VisionSection",
    "bounded",
]
