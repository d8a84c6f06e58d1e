"""What SSD and Mask R-CNN share: the COCO reader (`coco.py`), the mini dataset
(`fashion_coco.py`), the benchmark base (`benchmark.py`), the `model:` section (`config.py`) and
the `ABOUT` both build (`about`). Not a benchmark itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from t4bench.benchmarks.about import About, QualityMetric, ReferenceData
from t4bench.benchmarks.shared_detection.config import DetectionSection


def _check_coco2017(directory: Path) -> str:  # `t4bench data check coco2017`
    from t4bench.benchmarks.shared_detection.reference_data import check_coco2017

    return check_coco2017(directory)


def about(name: str, ruleset: str, metrics: Sequence[str], accuracy_labels: Mapping[str, str] | None = None) -> About:
    """The `ABOUT` of COCO benchmark `name` (also its MLPerf name): `metrics` are COCOeval mAPs
    (fractions), checked by mlperf-logging `ruleset`."""
    return About(
        name,
        name,
        ruleset,
        tuple(QualityMetric(metric, "fraction") for metric in metrics),
        DetectionSection,
        accuracy_labels=accuracy_labels or {},
        datasets={"fashion-coco": "t4bench.benchmarks.shared_detection.fashion_coco"},
        reference_data={"coco2017": ReferenceData(_check_coco2017, "T4BENCH_COCO_DIR", "coco2017")},
    )
