"""What SSD and Mask R-CNN share: the COCO reader (`coco.py`), the mini dataset
(`fashion_coco.py`), the benchmark base (`benchmark.py`), the `model:` section (`config.py`) and
the datasets both name (`DATASETS`, `REFERENCE_DATA`). Not a benchmark itself."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.about import ReferenceData


def _check_coco2017(directory: Path) -> str:
    from t4bench.benchmarks.shared_detection.reference_data import check_coco2017

    return check_coco2017(directory)


DATASETS = {"fashion-coco": "t4bench.benchmarks.shared_detection.fashion_coco"}
REFERENCE_DATA = {"coco2017": ReferenceData(_check_coco2017, "T4BENCH_COCO_DIR", "coco2017")}
