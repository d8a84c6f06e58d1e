"""The typed `model:` section every benchmark shares (sizes, optimizer, LR schedule, target), which
each benchmark's `config.py` extends with its own `data` and `arch` fields.

A field's bound rides on the field itself (`bounded(rule)`), so the dataclass is the one place that
says what a key may be: the preflight walks `rules(cls)` to refuse a bad value in one line before
anything starts, and `build(cls, node)` reads the section into a frozen instance for the code.
Keys of the YAML a dataclass does not declare are left to the code that reads them (architecture
details), so users' overrides and conf/ keep every key they have.

Only the standard library loads here.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from t4bench.benchmarks.bounds import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    UNIT_OPEN,
    Choice,
    Flag,
    Number,
    Numbers,
    Rule,
)

Section = TypeVar("Section")


def bounded(rule: Rule, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field whose value must satisfy `rule` (checked by the preflight); immutable
    defaults only (tuples for lists)."""
    return field(default=default, metadata={"rule": rule})


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


def _section_type(hint: Any) -> type | None:
    """The dataclass a field's type names (`X` or `X | None`), None for a plain value."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def rules(cls: type, prefix: str = "model") -> Iterator[tuple[str, Rule]]:
    """(dotted key, rule) of every bounded field of `cls` and of its nested sections."""
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        key = f"{prefix}.{item.name}"
        if "rule" in item.metadata:
            yield key, item.metadata["rule"]
        nested = _section_type(hints[item.name])
        if nested is not None:
            yield from rules(nested, key)


def build(cls: type[Section], node: Mapping[str, Any]) -> Section:
    """A frozen `cls` from a resolved `model:` mapping: declared keys only, defaults for absent ones
    (values are checked by the preflight against `rules(cls)` before any run starts)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        if item.name not in node:
            continue
        value, nested = node[item.name], _section_type(hints[item.name])
        values[item.name] = build(nested, value) if nested is not None and isinstance(value, Mapping) else value
    return cls(**values)


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
    "build",
    "rules",
]
