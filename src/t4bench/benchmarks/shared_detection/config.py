"""The `model:` section SSD and Mask R-CNN share: COCO-layout data, augmentation, synthetic shapes
and the class count, on top of the common section (t4bench.benchmarks.model_section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.benchmarks.bounds import POSITIVE_INT, PROBABILITY, Flag, Number, Numbers
from t4bench.benchmarks.model_section import ModelSection, bounded


@dataclass(frozen=True)
class DetectionData:
    path: str = ""
    dataset: str = ""
    hflip: float = bounded(PROBABILITY, 0.0)
    #: null: every val image
    val_limit: int | None = bounded(Number(integer=True, low=1, nullable=True), None)
    image_size: int = bounded(POSITIVE_INT, 128)
    synthetic_image_size: tuple[int, ...] = bounded(Numbers(POSITIVE_INT, length=2), (128, 128))
    synthetic_objects: int = bounded(POSITIVE_INT, 8)


@dataclass(frozen=True)
class DetectionArch:
    #: categories + background
    num_classes: int = bounded(Number(integer=True, low=2), 2)


@dataclass(frozen=True)
class DetectionSection(ModelSection):
    channels_last: bool = bounded(Flag(), False)
    data: DetectionData = field(default_factory=DetectionData)
    arch: DetectionArch = field(default_factory=DetectionArch)
