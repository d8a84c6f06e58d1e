"""A COCO instances file's structure: a JSON object with the `images`, `annotations` and `categories`
lists, read as the loader reads it (t4bench.benchmarks.shared_detection.coco) and checked by the
preflight before any run exists. Only the standard library loads here."""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any

from t4bench.benchmarks.data_checks import DataError

#: the records of a COCO instances file and the fields each must have
REQUIRED_FIELDS = {
    "images": ("id", "file_name", "width", "height"),
    "annotations": ("id", "image_id", "category_id", "bbox"),
    "categories": ("id",),
}


def read_json(path: Path) -> dict[str, Any]:
    try:
        dataset = json.loads(path.read_bytes())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 JSON ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not isinstance(dataset, dict):
        raise DataError(f"{path}: not a COCO instances file (the JSON is not an object)")
    return dataset


#: an instances file up to this size is parsed whole by the preflight's structure check; a larger
#: one (COCO train2017's 448 MB takes ~10 s and GBs to parse) is scanned for its lists' keys
PARSE_LIMIT = 64 * 2**20


def no_list(path: Path, key: str) -> str:
    return f"{path}: no {key!r} list (a COCO instances file has images, annotations and categories)"


def check_structure(path: Path) -> None:
    """Before any run exists: the instances file is not empty, is a JSON object, and has the
    `images`, `annotations` and `categories` lists (its records are checked when it is loaded)."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    if size == 0:
        raise DataError(f"{path}: empty file (a COCO instances JSON expected)")
    if size <= PARSE_LIMIT:
        dataset = read_json(path)
        missing = [key for key in REQUIRED_FIELDS if not isinstance(dataset.get(key), list)]
        if missing:
            raise DataError(no_list(path, missing[0]))
        if not dataset["categories"]:
            raise DataError(f"{path}: 'categories' is empty")
        return
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as content:
        if content[:4096].lstrip()[:1] != b"{":
            raise DataError(f"{path}: not a COCO instances file (the JSON is not an object)")
        missing = [key for key in REQUIRED_FIELDS if content.find(f'"{key}"'.encode()) < 0]
    if missing:
        raise DataError(no_list(path, missing[0]))
