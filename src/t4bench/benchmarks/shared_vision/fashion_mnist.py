"""Read the Fashion-MNIST IDX files shipped by the Debian package `dataset-fashion-mnist`.

Shared by the vision mini datasets (`fashion_folder`, `fashion_coco`); nothing here writes files.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from t4bench.benchmarks.data_checks import DataError
from t4bench.errors import DatasetMissingError

#: Debian `dataset-fashion-mnist` install location; T4BENCH_FASHION_MNIST_DIR overrides it
DEFAULT_SOURCE = Path("/usr/share/datasets/fashion-mnist")

CLASSES = (
    "t-shirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
)

_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def source_dir() -> Path:
    return Path(os.environ.get("T4BENCH_FASHION_MNIST_DIR", str(DEFAULT_SOURCE)))


def load(split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, 28, 28], labels int64 [N]) of the "train" (60k) or "test" (10k) split."""
    root = source_dir()
    paths = [root / name for name in _FILES[split]]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise DatasetMissingError(
            f"Fashion-MNIST IDX files not found: {', '.join(missing)} "
            "(install the Debian package dataset-fashion-mnist or set T4BENCH_FASHION_MNIST_DIR "
            "to a folder holding {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz)"
        )
    images = _read_idx(paths[0], 2051, 3)
    labels = _read_idx(paths[1], 2049, 1).astype(np.int64)
    if len(images) != len(labels):
        raise DataError(f"{paths[0]} holds {len(images)} images but {paths[1]} {len(labels)} labels")
    if labels.size and labels.max() >= len(CLASSES):
        raise DataError(f"{paths[1]}: label {labels.max()} outside 0..{len(CLASSES) - 1}")
    return images, labels


def _read_idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """A gzipped IDX array of uint8 with `dims` dimensions; DataError naming the file when it is
    not gzip, truncated, or its header does not match its size."""
    try:
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError, zlib.error) as err:  # BadGzipFile is an OSError
        raise DataError(f"{path}: unreadable gzip ({err})") from None
    header = 4 + 4 * dims
    if len(raw) < header or int.from_bytes(raw[:4], "big") != magic:
        raise DataError(f"{path}: not an IDX {'image' if dims == 3 else 'label'} file (magic {magic} expected)")
    shape = tuple(int.from_bytes(raw[i : i + 4], "big") for i in range(4, header, 4))
    if len(raw) - header != math.prod(shape):
        raise DataError(f"{path}: header says {'x'.join(map(str, shape))} bytes of data, file has {len(raw) - header}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def balanced_indices(labels: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """`per_class` indices of every class, drawn with a fixed seed, in a fixed shuffled order."""
    rng = np.random.default_rng(seed)
    picks = []
    for cls in range(len(CLASSES)):
        members = np.flatnonzero(labels == cls)
        if len(members) < per_class:
            raise ValueError(f"class {cls} has {len(members)} samples, fewer than {per_class}")
        picks.append(rng.choice(members, size=per_class, replace=False))
    order = np.concatenate(picks)
    rng.shuffle(order)
    return order


def write_once(target: Path, params: dict, build: Callable[[Path], None]) -> bool:
    """Build `target` once: `build(tmp)` fills a sibling temporary folder, which is renamed into
    place with a marker recording `params`. A complete tree with the same params is left alone;
    one with other params, or a half-written one, is rebuilt. Returns whether it built."""
    marker = target / ".complete.json"
    params = json.loads(json.dumps(params))  # tuples -> lists, as read back
    if marker.is_file() and json.loads(marker.read_text()) == params:
        return False
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    build(tmp)
    (tmp / ".complete.json").write_text(json.dumps(params, indent=1, sort_keys=True))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return True
