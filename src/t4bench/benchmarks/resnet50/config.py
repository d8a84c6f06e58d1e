"""ResNet-50's `model:` section: image sizes, augmentation, classes and label smoothing, on top of
the common section (t4bench.benchmarks.model_section). The TensorFlow wing's Keras ResNet-50 reads
the same section."""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.benchmarks.bounds import NON_NEGATIVE_INT, POSITIVE_INT, UNIT_OPEN, Flag, Number
from t4bench.benchmarks.model_section import ModelSection, bounded


@dataclass(frozen=True)
class ResNetData:
    dataset: str = ""
    #: ImageFolder layout: <path>/train/<class>/*, <path>/val/<class>/*
    path: str = ""
    image_size: int = bounded(POSITIVE_INT, 224)
    crop_padding: int = bounded(NON_NEGATIVE_INT, 0)


@dataclass(frozen=True)
class ResNetArch:
    num_classes: int = bounded(Number(integer=True, low=2), 1000)


@dataclass(frozen=True)
class ResNet50Config(ModelSection):
    channels_last: bool = bounded(Flag(), False)
    label_smoothing: float = bounded(UNIT_OPEN, 0.0)
    data: ResNetData = field(default_factory=ResNetData)
    arch: ResNetArch = field(default_factory=ResNetArch)
