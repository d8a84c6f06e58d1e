"""ResNet-50 v1.5 (MLPerf Training v0.5 image classification): `model.py` (benchmark, ImageFolder
reader), `fashion_folder.py` (the mini dataset), `reference_data.py` (the ImageNet check),
`config.py` (its `model:` section). The Keras ResNet-50 stays in the TensorFlow wing
(t4bench.tf.resnet50): here it would make this folder's imports reach tensorflow.
Only the standard library loads with this package (t4bench.benchmarks.registry)."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.about import About, QualityMetric, ReferenceData
from t4bench.benchmarks.resnet50.config import ResNet50Config


def _check_imagenet(directory: Path) -> str:
    from t4bench.benchmarks.resnet50.reference_data import check_imagenet

    return check_imagenet(directory)


# the MLPerf checker knows it as `resnet`
ABOUT = About(
    "resnet50",
    "resnet",
    "4.0.0",
    (QualityMetric("top1", "fraction"),),
    ResNet50Config,
    datasets={"fashion-mnist-folder": "t4bench.benchmarks.resnet50.fashion_folder"},
    reference_data={"imagenet": ReferenceData(_check_imagenet, "T4BENCH_IMAGENET_DIR", "imagenet")},
)
