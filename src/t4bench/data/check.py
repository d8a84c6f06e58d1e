"""`python -m t4bench.data.check NAME [DIR]`: is a reference dataset where and as `scale=reference`
reads it? One line: `NAME: complete at DIR (...)` and exit 0, or `t4bench: error: check NAME: ...`
naming what is missing or malformed and exit 2.

NAME is ml-20m, imagenet, coco2017, wmt16 or wmt17; DIR defaults to where
conf/model_scale/<model>_reference.yaml looks (its environment variable, else under the data root).
The checks read what the loaders read first (headers, folder layout, annotation records, one image
per split, the tokenizer); a damaged record deep inside a file still surfaces only when training.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from t4bench.data import movielens, wmt
from t4bench.data.checks import DataError, open_rgb
from t4bench.errors import ArgumentParser, DatasetMissingError, one_line

_IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
#: what `--help` says (`t4bench data check` and `python -m t4bench.data.check`)
DESCRIPTION = (
    "Is a reference dataset where and as scale=reference reads it? One line and exit 0, "
    "or one line naming what is missing or malformed and exit 2."
)


def _ml20m(directory: Path) -> str:
    movielens.check("ml-20m", directory)
    return f"{movielens.expected_file('ml-20m', directory).name} has the ratings header"


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


def _imagenet(directory: Path) -> str:
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


def _coco2017(directory: Path) -> str:
    from t4bench.data import coco  # torch and pycocotools: not for `--help` or the other checks

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


CHECKS: dict[str, tuple[Callable[[Path], str], str, str]] = {
    # name: (check, environment variable, directory under the data root), as the reference configs read
    "ml-20m": (_ml20m, "T4BENCH_ML20M_DIR", "ml-20m"),
    "imagenet": (_imagenet, "T4BENCH_IMAGENET_DIR", "imagenet"),
    "coco2017": (_coco2017, "T4BENCH_COCO_DIR", "coco2017"),
    "wmt16": (lambda d: wmt.check("wmt16", d), "T4BENCH_WMT16_DIR", wmt.CORPORA["wmt16"].directory),
    "wmt17": (lambda d: wmt.check("wmt17", d), "T4BENCH_WMT17_DIR", wmt.CORPORA["wmt17"].directory),
}


def default_dir(name: str) -> Path:
    _, env, under = CHECKS[name]
    return Path(os.environ.get(env) or Path(os.environ.get("T4BENCH_DATA_DIR", "data")) / under)


def main(argv: Sequence[str] | None = None, prog: str = "python -m t4bench.data.check") -> int:
    parser = ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("name", choices=sorted(CHECKS), metavar="NAME", help=", ".join(CHECKS))
    parser.add_argument("directory", nargs="?", type=Path, help="default: where scale=reference reads it")
    args = parser.parse_args(argv)
    directory = args.directory or default_dir(args.name)
    summary, status = one_line(f"check {args.name}", lambda: CHECKS[args.name][0](directory), directory)
    if summary is None:
        return status
    print(f"{args.name}: complete at {directory} ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
