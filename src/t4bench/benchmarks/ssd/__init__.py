"""SSD (MLPerf Training v0.5 light-weight detection) on COCO: `model.py` (model and benchmark),
`loss.py` (the batched loss); data, scoring and the `model:` section are shared with Mask R-CNN
(t4bench.benchmarks.shared_detection). Only the standard library loads with this package."""

from __future__ import annotations

from t4bench.benchmarks import shared_detection
from t4bench.benchmarks.about import About, QualityMetric
from t4bench.benchmarks.shared_detection.config import DetectionSection

ABOUT = About(
    name="ssd",
    mlperf_name="ssd",
    ruleset="4.1.0",
    metrics=(QualityMetric("box_map", "fraction"),),
    config=DetectionSection,
    datasets=shared_detection.DATASETS,
    reference_data=shared_detection.REFERENCE_DATA,
)
