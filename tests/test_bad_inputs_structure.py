"""Structure first (issue 52 item 3): a dataset whose structure is wrong (a COCO file without one of
its lists, parallel text files of unequal length, an empty file, MovieLens without its columns) is
refused by the benchmark's `check_inputs` in the preflight, before any run exists. Each case is a
real `python -m t4bench` process on real files in a temporary folder: one `t4bench: error:` line,
exit 2, no MLflow store created, no run folder. Only value errors found while reading may fail a
created run (test_bad_inputs.py, test_bad_inputs_units.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_bad_inputs import error_line, run_cli

#: the preflight's structure check is about the time Hydra and the benchmark's module take to load;
#: the run-time errors it replaces came 10-14 s in, after the run and its folder existed
QUICK_S = 60


def coco_split(root: Path, split: str, dataset: dict[str, object] | None, text: str | None = None) -> None:
    """<root>/<split>/ with one real PNG and <root>/annotations/instances_<split>.json."""
    (root / split).mkdir(parents=True)
    Image.fromarray(np.full((32, 32, 3), 60, dtype=np.uint8)).save(root / split / "000001.png")
    (root / "annotations").mkdir(exist_ok=True)
    file = root / "annotations" / f"instances_{split}.json"
    file.write_text(text if text is not None else json.dumps(dataset))


def coco_dataset() -> dict[str, object]:
    return {
        "images": [{"id": 1, "file_name": "000001.png", "width": 32, "height": 32}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 2, 10, 10], "iscrowd": 0}],
        "categories": [{"id": 1, "name": "a"}],
    }


def coco_without(key: str, root: Path) -> Path:
    train = coco_dataset()
    del train[key]
    coco_split(root, "train", train)
    coco_split(root, "val", coco_dataset())
    return root / "annotations" / "instances_train.json"


def coco_empty_json(root: Path) -> Path:
    coco_split(root, "train", None, text="")
    coco_split(root, "val", coco_dataset())
    return root / "annotations" / "instances_train.json"


def parallel_text(root: Path, train_src: str, train_tgt: str) -> None:
    root.mkdir(parents=True)
    (root / "train.src").write_text(train_src)
    (root / "train.tgt").write_text(train_tgt)
    (root / "test.src").write_text("a house\n")
    (root / "test.tgt").write_text("ein Haus\n")
    (root / "spm.model").write_bytes(b"not read: the structure fails first")


def refused(tmp_path: Path, *overrides: str) -> str:
    """One line, exit 2, quickly; no MLflow store and no run folder made."""
    started = time.monotonic()
    proc = run_cli(tmp_path, "max_epochs=1", *overrides)
    line = error_line(proc)
    assert time.monotonic() - started < QUICK_S
    assert not (tmp_path / "mlflow.db").exists(), "the refusal created the MLflow store"
    assert not (tmp_path / "outputs").exists(), "the refusal created the run folder"
    assert not (tmp_path / "mlruns").exists()
    return line.removeprefix("t4bench: error: ")


@pytest.mark.parametrize("key", ["annotations", "images", "categories"])
def test_coco_without_a_list(tmp_path: Path, key: str) -> None:
    file = coco_without(key, tmp_path / "coco")
    line = refused(tmp_path, "model=ssd", f"model.data.path={tmp_path / 'coco'}")
    assert line == f"{file}: no {key!r} list (a COCO instances file has images, annotations and categories)"


def test_coco_empty_annotation_file(tmp_path: Path) -> None:
    file = coco_empty_json(tmp_path / "coco")
    line = refused(tmp_path, "model=maskrcnn", f"model.data.path={tmp_path / 'coco'}")
    assert line == f"{file}: empty file (a COCO instances JSON expected)"


def test_parallel_text_of_unequal_length(tmp_path: Path) -> None:
    root = tmp_path / "pairs"
    parallel_text(root, "a house\nthe cat\nthe dog\n", "ein Haus\ndie Katze\n")
    line = refused(tmp_path, "model=gnmt", f"model.data.path={root}")
    src, tgt = root / "train.src", root / "train.tgt"
    assert line == f"{src} has 3 lines but {tgt} has 2: parallel files need one sentence pair per line"


def test_parallel_text_empty_file(tmp_path: Path) -> None:
    root = tmp_path / "pairs"
    parallel_text(root, "a house\n", "")
    line = refused(tmp_path, "model=transformer", f"model.data.path={root}")
    assert line == f"{root / 'train.tgt'}: empty file (one sentence per line expected)"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "empty file"),
        ("user_id:token\titem_id:token\trating:float\n1\t2\t3\n", "no column timestamp:float"),
    ],
)
def test_movielens_structure(tmp_path: Path, content: str, expected: str) -> None:
    root = tmp_path / "movielens"
    root.mkdir()
    (root / "ml-100k.inter").write_text(content)
    line = refused(tmp_path, "model=ncf", f"model.data.path={root}")
    assert line.startswith(f"{root / 'ml-100k.inter'}: {expected}"), line
