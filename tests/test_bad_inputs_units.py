"""Damaged data in-process, each a real file (issue 17): the loaders raise one `DataError` line
naming the file and the line or record; skips the MLPerf reference also makes are counted."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from t4bench.benchmarks.data_checks import DataError, read_lines, read_parallel
from t4bench.benchmarks.ncf import movielens
from t4bench.benchmarks.shared_detection import coco
from t4bench.benchmarks.shared_vision import fashion_mnist

REPO = Path(__file__).resolve().parents[1]
HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def one_line(err: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------ MovieLens


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty file"),
        (HEADER.encode(), "header only, no ratings"),
        ((HEADER + "1\t2\t3\t100\n1\tabc\t3\t101\n").encode(), ":3: item_id:token='abc' is not an integer id"),
        ((HEADER + "1\t2\t3\t100\n\t2\t3\t101\n").encode(), ":3: user_id:token=(empty) is not an integer id"),
        ((HEADER + "1\t2.5\t3\t100\n").encode(), ":2: item_id:token=2.5 is not an integer id"),
        ((HEADER + "1\t2\t3\t100\n1\t2\t3\t4\t5\n").encode(), "Expected 4 fields in line 3, saw 5"),
        ((HEADER + "1\t2\t3\t100\n").encode() + b"\xff\xfe\t2\t3\t4\n", ":3: not UTF-8 text"),
        ((HEADER + "1\t2\t3\t100\n1\t3\t3\t101\n2\t2\t1\t5\n").encode(), "user 1 rated all 2 item(s)"),
        (b"user\titem\n1\t2\n", "no column user_id:token, item_id:token, timestamp:float"),
    ],
    ids=["empty", "header-only", "non-numeric", "missing", "fractional", "ragged", "non-utf8", "all-items", "columns"],
)
def test_movielens_damaged(tmp_path: Path, content: bytes, expected: str) -> None:
    file = tmp_path / movielens.ML100K_FILE
    file.write_bytes(content)
    with pytest.raises(DataError) as err:
        movielens.load("movielens-100k", tmp_path)
    message = one_line(err)
    assert message.startswith(str(file)) and expected in message, message


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"", "empty file"), (HEADER.encode(), "header only"), (b"user\titem\n1\t2\n", "no column user_id:token")],
)
def test_movielens_head_checked_before_any_run(tmp_path: Path, content: bytes, expected: str) -> None:
    """`check` (NCF's check_inputs, before the MLflow run exists) reads only the first two lines."""
    (tmp_path / movielens.ML100K_FILE).write_bytes(content)
    with pytest.raises(DataError, match=expected):
        movielens.check("movielens-100k", tmp_path)


def test_ml20m_missing_column(tmp_path: Path) -> None:
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating\n1,2,3\n")
    with pytest.raises(DataError, match=r"ratings\.csv: no column timestamp"):
        movielens.load("ml-20m", tmp_path)


def test_ml20m_well_formed_loads(tmp_path: Path) -> None:
    rows = [f"{u},{i},4.0,{1000 + u * 10 + i}" for u in (1, 2, 3) for i in (10, 20, 30)]
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" + "\n".join(rows) + "\n4,40,5,9\n")
    data = movielens.load("ml-20m", tmp_path)
    assert (data.num_users, data.num_items) == (4, 4)
    assert len(data.train_users) == 6  # 10 ratings, one held out per user


# ------------------------------------------------------------------------------ COCO


def coco_tree(root: Path, *, annotations: list[dict] | None = None, drop: str | None = None) -> Path:
    """A two-image COCO folder with real PNGs; returns the annotation file."""
    (root / "images").mkdir(parents=True)
    images = []
    for image_id in (1, 2):
        name = f"{image_id:06d}.png"
        Image.fromarray(np.full((32, 32, 3), 40 * image_id, dtype=np.uint8)).save(root / "images" / name)
        images.append({"id": image_id, "file_name": name, "width": 32, "height": 32})
    anns = (
        annotations
        if annotations is not None
        else [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 2, 10, 10], "area": 100, "iscrowd": 0},
            {"id": 2, "image_id": 2, "category_id": 2, "bbox": [5, 5, 8, 12], "area": 96, "iscrowd": 0},
        ]
    )
    dataset = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    if drop:
        del dataset[drop]
    file = root / "instances.json"
    file.write_text(json.dumps(dataset))
    return file


def test_coco_good_tree_loads(tmp_path: Path) -> None:
    file = coco_tree(tmp_path)
    data = coco.CocoDetection(tmp_path / "images", file, skip_empty=True)
    image, target = data[0]
    assert image.shape == (3, 32, 32) and target["boxes"].tolist() == [[2.0, 2.0, 12.0, 12.0]]


@pytest.mark.parametrize("key", ["annotations", "images", "categories"])
def test_coco_missing_list(tmp_path: Path, key: str) -> None:
    file = coco_tree(tmp_path, drop=key)
    with pytest.raises(DataError) as err:
        coco.CocoDetection(tmp_path / "images", file)
    assert f"{file}: no {key!r} list" in one_line(err)


@pytest.mark.parametrize(
    ("ann", "expected"),
    [
        (
            {"id": 7, "image_id": 9, "category_id": 1, "bbox": [0, 0, 4, 4]},
            "annotations[0] (id 7): image_id 9 is not in 'images'",
        ),
        ({"id": 7, "image_id": 1, "category_id": 5, "bbox": [0, 0, 4, 4]}, "category_id 5 is not in 'categories'"),
        ({"id": 7, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4]}, "bbox [0, 0, 4] is not [x, y, width, height]"),
        ({"id": 7, "image_id": 1, "category_id": 1}, "annotations[0] has no bbox"),
    ],
)
def test_coco_bad_record(tmp_path: Path, ann: dict, expected: str) -> None:
    file = coco_tree(tmp_path, annotations=[ann])
    with pytest.raises(DataError) as err:
        coco.CocoDetection(tmp_path / "images", file)
    assert expected in one_line(err)


def test_coco_invalid_json_names_line(tmp_path: Path) -> None:
    file = coco_tree(tmp_path)
    file.write_text('{"images": [\n  {"id": 1,,}\n]}')
    with pytest.raises(DataError, match=r"instances\.json:2:\d+: not valid JSON"):
        coco.CocoDetection(tmp_path / "images", file)


def test_coco_degenerate_boxes_skipped_and_counted(tmp_path: Path) -> None:
    anns = [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 2, 10, 10], "iscrowd": 0},
        {"id": 2, "image_id": 1, "category_id": 2, "bbox": [5, 5, -3, 4], "iscrowd": 0},  # negative width
        {"id": 3, "image_id": 2, "category_id": 2, "bbox": [1, 1, 6, 0.5], "iscrowd": 0},
        {"id": 4, "image_id": 2, "category_id": 1, "bbox": [0, 0, 30, 30], "iscrowd": 1},
    ]
    file = coco_tree(tmp_path, annotations=anns)
    data = coco.CocoDetection(tmp_path / "images", file, skip_empty=True)
    assert data.ids == [1]  # image 2 has no usable box left
    assert data[0][1]["boxes"].shape == (1, 4)
    # said once on the console by the run (t4bench.baselines.announce), logged as data_<name>
    assert data.notes() == {
        "dropped_boxes": (
            3,
            "dropped 3 of 4 training boxes (1 crowd, 2 under 1 px wide or high), as the MLPerf reference does",
        ),
        "dropped_images": (1, "dropped 1 of 2 training images: no usable box left"),
    }
    assert coco.CocoDetection(tmp_path / "images", file).notes() == {}  # a validation set drops nothing


def test_coco_truncated_image_named(tmp_path: Path) -> None:
    file = coco_tree(tmp_path)
    png = tmp_path / "images" / "000001.png"
    png.write_bytes(png.read_bytes()[:60])
    data = coco.CocoDetection(tmp_path / "images", file)
    with pytest.raises(DataError) as err:
        data[0]
    assert one_line(err).startswith(f"{png}: unreadable image")


def test_coco_missing_image_file(tmp_path: Path) -> None:
    file = coco_tree(tmp_path)
    (tmp_path / "images" / "000002.png").unlink()
    with pytest.raises(DataError, match=r"1 image file\(s\) named in .* are missing, e\.g\. 000002\.png"):
        coco.CocoDetection(tmp_path / "images", file)


def test_worker_reraise_keeps_one_line(tmp_path: Path) -> None:
    """torch's DataLoader re-raises a worker's error with the worker's traceback in the message."""
    import torch.utils.data

    file = coco_tree(tmp_path)
    png = tmp_path / "images" / "000001.png"
    png.write_bytes(b"not a png")
    data = coco.CocoDetection(tmp_path / "images", file)
    loader = torch.utils.data.DataLoader(data, batch_size=1, num_workers=1, collate_fn=coco.collate)
    with pytest.raises(DataError) as err:
        list(loader)
    assert one_line(err).startswith(f"{png}: unreadable image")


def test_image_folder_loader_names_truncated_image(tmp_path: Path) -> None:
    """ResNet-50's ImageFolder with `loader=checks.image_loader`: the damaged file is named."""
    from torchvision import datasets

    from t4bench.benchmarks.data_checks import image_loader

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / cls / "0.png")
    bad = tmp_path / "b" / "0.png"
    bad.write_bytes(bad.read_bytes()[:40])
    folder = datasets.ImageFolder(str(tmp_path), loader=image_loader)
    assert folder[0][0].size == (8, 8)
    with pytest.raises(DataError) as err:
        folder[1]
    assert one_line(err).startswith(f"{bad}: unreadable image")


# ------------------------------------------------------------------------------ Fashion-MNIST


def _idx(path: Path, magic: int, shape: tuple[int, ...], payload: bytes) -> None:
    header = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in shape)
    with gzip.open(path, "wb") as out:
        out.write(header + payload)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("truncated-gzip", "unreadable gzip"),
        ("short-data", "header says 3x28x28 bytes of data, file has 100"),
        ("bad-magic", "not an IDX image file"),
        ("count-mismatch", "holds 3 images but"),
    ],
)
def test_fashion_mnist_damaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, expected: str) -> None:
    images, labels = tmp_path / "t10k-images-idx3-ubyte.gz", tmp_path / "t10k-labels-idx1-ubyte.gz"
    _idx(images, 2051, (3, 28, 28), bytes(3 * 28 * 28))
    _idx(labels, 2049, (2 if damage == "count-mismatch" else 3,), bytes(2 if damage == "count-mismatch" else 3))
    if damage == "truncated-gzip":
        images.write_bytes(images.read_bytes()[:40])
    elif damage == "short-data":
        _idx(images, 2051, (3, 28, 28), bytes(100))
    elif damage == "bad-magic":
        _idx(images, 1234, (3, 28, 28), bytes(3 * 28 * 28))
    monkeypatch.setenv("T4BENCH_FASHION_MNIST_DIR", str(tmp_path))
    with pytest.raises(DataError) as err:
        fashion_mnist.load("test")
    assert expected in one_line(err)


# ------------------------------------------------------------------------------ parallel text


def test_parallel_text_checks(tmp_path: Path) -> None:
    src, tgt = tmp_path / "train.src", tmp_path / "train.tgt"
    src.write_text("a house\nthe cat\nhello\n")
    tgt.write_text("ein Haus\ndie Katze\n")
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt)
    assert one_line(err) == f"{src} has 3 lines but {tgt} has 2: parallel files need one sentence pair per line"
    tgt.write_text("ein Haus\ndie Katze\nhallo\n")
    assert read_parallel(src, tgt, limit=2) == (["a house", "the cat"], ["ein Haus", "die Katze"])
    tgt.write_bytes(b"ein Haus\ndie Katze\nGr\xfc\xdfe\n")  # Latin-1, not UTF-8
    with pytest.raises(DataError, match=r"train\.tgt:3: not UTF-8 text \(invalid start byte at column 3\)"):
        read_parallel(src, tgt)
    tgt.write_text("")
    with pytest.raises(DataError, match=r"train\.tgt: empty file"):
        read_lines(tgt)
