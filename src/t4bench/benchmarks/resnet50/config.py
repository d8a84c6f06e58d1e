"""ResNet-50's `model:` section: image sizes, padding and label smoothing, on top of the image
benchmarks' section (t4bench.benchmarks.model_section). The TensorFlow wing's Keras ResNet-50
reads the same section."""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.benchmarks.model_section import DataSection, VisionSection, bounded
from t4bench.spec.bounds import NON_NEGATIVE_INT, POSITIVE_INT, UNIT_OPEN


@dataclass(frozen=True)
class ResNetData(DataSection):
    """ImageFolder layout: <path>/train/<class>/*, <path>/val/<class>/*."""

    image_size: int = bounded(POSITIVE_INT, 224)
    crop_padding: int = bounded(NON_NEGATIVE_INT, 0)


@dataclass(frozen=True)
class ResNet50Config(VisionSection):
    label_smoothing: float = bounded(UNIT_OPEN, 0.0)
    data: ResNetData = field(default_factory=ResNetData)
