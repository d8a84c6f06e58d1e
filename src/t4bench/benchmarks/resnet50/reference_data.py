"""`t4bench data check imagenet`: the ImageFolder tree scale=reference reads, its class folders
alike in train/ and val/, and the first image of each split decodable."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.data_checks import DataError, open_rgb
from t4bench.errors import DatasetMissingError

_IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")


def _classes(split: Path) -> dict[str, Path]:
    if not split.is_dir():
        raise DatasetMissingError(f"{split}/ not found (ImageFolder layout: <split>/<wnid>/*.JPEG)")
    classes = {p.name: p for p in sorted(split.iterdir()) if p.is_dir()}
    if not classes:
        raise DataError(f"{split}/ has no class folders (ImageFolder layout: <split>/<wnid>/*.JPEG)")
    return classes


def _first_image(folder: Path) -> Path:
    image = next((p for p in sorted(folder.iterdir()) if p.suffix.lower() in _IMAGE_SUFFIXES), None)
    if image is None:
        raise DataError(f"{folder}/ holds no .JPEG/.jpg/.png image")
    return image


def check_imagenet(directory: Path) -> str:
    train, val = _classes(directory / "train"), _classes(directory / "val")
    if set(train) != set(val):
        only = sorted(set(train) ^ set(val))
        raise DataError(
            f"{directory}: train/ and val/ class folders differ ({len(only)} in one only, e.g. {only[0]}); "
            "val must be sorted into the same <wnid>/ folders"
        )
    for split in (train, val):
        open_rgb(_first_image(next(iter(split.values()))))
    return f"{len(train)} classes in train/ and val/"
