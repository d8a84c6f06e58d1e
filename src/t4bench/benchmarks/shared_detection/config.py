"""The `model:` section SSD and Mask R-CNN share: COCO-layout data, augmentation and synthetic
shapes, on top of the image benchmarks' section (t4bench.benchmarks.model_section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.benchmarks.model_section import DataSection, VisionSection, bounded
from t4bench.spec.bounds import POSITIVE_INT, PROBABILITY, Number, Numbers


@dataclass(frozen=True)
class DetectionData(DataSection):
    #: the chance of a horizontal flip per training image
    hflip: float = bounded(PROBABILITY, 0.0)
    #: null: every val image
    val_limit: int | None = bounded(Number(integer=True, low=1, nullable=True), None)
    image_size: int = bounded(POSITIVE_INT, 128)
    #: `input=synthetic`: generated images of this (height, width) with this many boxes each
    synthetic_image_size: tuple[int, ...] = bounded(Numbers(POSITIVE_INT, length=2), (128, 128))
    synthetic_objects: int = bounded(POSITIVE_INT, 8)


@dataclass(frozen=True)
class DetectionSection(VisionSection):
    data: DetectionData = field(default_factory=DetectionData)
