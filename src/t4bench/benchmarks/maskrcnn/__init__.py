"""Mask R-CNN (MLPerf Training v0.5 heavy-weight detection) on COCO: `model.py` (model and
benchmark); data, scoring and the `model:` section are shared with SSD
(t4bench.benchmarks.shared_detection). Only the standard library loads with this package."""

from __future__ import annotations

from t4bench.benchmarks import shared_detection
from t4bench.benchmarks.about import About, QualityMetric
from t4bench.benchmarks.shared_detection.config import DetectionSection

ABOUT = About(
    name="maskrcnn",
    mlperf_name="maskrcnn",
    ruleset="3.1.0",
    metrics=(QualityMetric("box_map", "fraction"), QualityMetric("mask_map", "fraction")),
    config=DetectionSection,
    accuracy_labels={"box_map": "BBOX", "mask_map": "SEGM"},
    datasets=shared_detection.DATASETS,
    reference_data=shared_detection.REFERENCE_DATA,
)
