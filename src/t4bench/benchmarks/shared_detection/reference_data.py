"""`t4bench data check coco2017`: both splits' image folder and annotation file as the loader reads
them (t4bench.benchmarks.shared_detection.coco), and the first image each names decodable."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.data_checks import DataError, open_rgb


def check_coco2017(directory: Path) -> str:
    from t4bench.benchmarks.shared_detection import coco  # torch and pycocotools: only when asked

    counts = []
    for split in ("train2017", "val2017"):
        images, annotations = directory / split, directory / "annotations" / f"instances_{split}.json"
        coco.check_layout(images, annotations, f"COCO {split}")
        index = coco.load_annotations(annotations)
        first = index.dataset["images"][0]["file_name"] if index.dataset["images"] else None
        if first is None:
            raise DataError(f"{annotations}: 'images' is empty")
        open_rgb(images / first)
        counts.append(f"{split} {len(index.dataset['images'])} images")
    return ", ".join(counts)
