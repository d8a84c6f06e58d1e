"""Vision data: ImageFolder and COCO loaders on tiny fixture trees in the real layouts, COCOeval
round trips, and the generated mini datasets (fashion_folder, fashion_coco)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_context
from omegaconf import OmegaConf
from PIL import Image

from t4bench.benchmarks.resnet50 import fashion_folder
from t4bench.benchmarks.shared_detection import coco, fashion_coco
from t4bench.benchmarks.shared_vision import fashion_mnist
from t4bench.errors import DatasetMissingError

CONF = Path(__file__).resolve().parents[1] / "conf"
HAVE_FASHION = (fashion_mnist.source_dir() / "train-images-idx3-ubyte.gz").is_file()
needs_fashion = pytest.mark.skipif(not HAVE_FASHION, reason="Debian package dataset-fashion-mnist not installed")


def model_cfg(name: str, **data: object):
    cfg = OmegaConf.create({"paths": {"data_root": "unused"}, "input": {"synthetic": False}})
    cfg.model = OmegaConf.load(CONF / "model" / f"{name}.yaml")
    for key, value in data.items():
        OmegaConf.update(cfg, key, value)
    return cfg


# ---------------------------------------------------------------- ImageFolder (ResNet-50)


def make_image_folder(root: Path, classes: list[str], per_class: int, size: tuple[int, int]) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for cls_index, name in enumerate(classes):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 255, size=(*size, 3), dtype=np.uint8)
                pixels[..., 0] = 40 * cls_index  # something label-dependent
                Image.fromarray(pixels).save(folder / f"n{cls_index:08d}_{i}.JPEG")


def test_image_folder_loader_imagenet_layout(tmp_path):
    from t4bench.benchmarks.resnet50.model import ResNet50Benchmark

    root = tmp_path / "imagenet"
    make_image_folder(root, ["n01440764", "n01443537", "n01484850"], per_class=4, size=(40, 56))
    cfg = model_cfg(
        "resnet50",
        **{
            "model.data.path": str(root),
            "model.data.augment": "imagenet",
            "model.data.image_size": 32,
            "model.arch.num_classes": 3,
            "model.batch_size": 5,
        },
    )
    ResNet50Benchmark.check_inputs(cfg)
    bench = ResNet50Benchmark(cfg, run_context(data_root=tmp_path))
    assert bench.train_size == 12
    assert bench.train_set.classes == ["n01440764", "n01443537", "n01484850"]
    batches = list(bench.train_batches(epoch=0))
    assert [len(b[1]) for b in batches] == [5, 5, 2]
    images, _ = batches[0]
    assert images.shape == (5, 3, 32, 32) and images.dtype == torch.float32
    seen = torch.cat([b[1] for b in batches]).sort().values
    assert seen.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    # a different epoch is a different permutation of the same samples
    again = torch.cat([b[1] for b in bench.train_batches(epoch=1)])
    assert again.sort().values.tolist() == seen.tolist()
    val_images, _ = next(iter(torch.utils.data.DataLoader(bench.val_set, batch_size=12)))
    assert val_images.shape == (12, 3, 32, 32)


def test_image_folder_missing_split_names_layout(tmp_path):
    from t4bench.benchmarks.resnet50.model import ResNet50Benchmark

    root = tmp_path / "imagenet"
    make_image_folder(root, ["a", "b"], per_class=1, size=(8, 8))
    for f in (root / "val").rglob("*.JPEG"):
        f.unlink()
    cfg = model_cfg("resnet50", **{"model.data.path": str(root)})
    with pytest.raises(DatasetMissingError, match=r"val/<class>"):
        ResNet50Benchmark.check_inputs(cfg)
    with pytest.raises(DatasetMissingError, match="ImageFolder layout"):
        ResNet50Benchmark.check_inputs(model_cfg("resnet50", **{"model.data.path": str(tmp_path / "nowhere")}))


# ---------------------------------------------------------------- COCO (SSD, Mask R-CNN)


def box(ann_id: int, image_id: int, category_id: int, x: int, y: int, w: int, h: int, **rest: object) -> dict:
    """A COCO annotation of the box at (x, y) sized w x h, its polygon mask the box itself unless
    `rest` gives another segmentation."""
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": category_id,
        "bbox": [x, y, w, h],
        "area": float(w * h),
        "iscrowd": 0,
        "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
        **rest,
    }


def make_coco(root: Path) -> dict:
    """COCO 2017 layout: polygon masks, non-contiguous category ids, a crowd annotation and an
    image without annotations."""
    (root / "annotations").mkdir(parents=True)
    (root / "val2017").mkdir()
    sizes = {1: (48, 64), 7: (40, 40), 9: (32, 50)}  # id: (height, width)
    images = []
    for image_id, (h, w) in sizes.items():
        name = f"{image_id:012d}.jpg"
        Image.new("RGB", (w, h), (image_id * 20, 90, 30)).save(root / "val2017" / name)
        images.append({"id": image_id, "file_name": name, "height": h, "width": w})
    anns = [
        box(1, 1, 3, 4, 6, 20, 20),
        box(2, 1, 90, 30, 10, 16, 16),
        box(3, 7, 1, 2, 2, 30, 12),
        box(4, 7, 90, 0, 20, 40, 20, iscrowd=1, segmentation={"size": [40, 40], "counts": [800, 800, 0]}),
    ]
    cats = [{"id": i, "name": f"c{i}", "supercategory": "x"} for i in (1, 3, 90)]
    data = {"images": images, "annotations": anns, "categories": cats}
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(data))
    return data


def test_coco_loader_boxes_labels_masks(tmp_path):
    make_coco(tmp_path)
    ann = tmp_path / "annotations" / "instances_val2017.json"
    ds = coco.CocoDetection(tmp_path / "val2017", ann, masks=True)
    assert ds.ids == [1, 7, 9] and ds.cat_ids == [1, 3, 90] and ds.num_classes == 4
    image, target = ds[0]
    assert image.shape == (3, 48, 64) and 0.0 <= float(image.min()) <= float(image.max()) <= 1.0
    assert target["boxes"].tolist() == [[4, 6, 24, 26], [30, 10, 46, 26]]
    assert target["labels"].tolist() == [2, 3]  # category 3 -> 2, category 90 -> 3
    assert target["masks"].shape == (2, 48, 64) and target["masks"].dtype == torch.uint8
    assert abs(int(target["masks"][0].sum()) - 400) <= 45  # polygon rasterised
    ys, xs = torch.nonzero(target["masks"][1], as_tuple=True)
    assert int(xs.min()) >= 29 and int(xs.max()) <= 46 and int(ys.min()) >= 9 and int(ys.max()) <= 26
    _, crowd_image = ds[1]
    assert crowd_image["labels"].tolist() == [1]  # the crowd annotation is not a training target
    _, empty = ds[2]
    assert empty["boxes"].shape == (0, 4) and empty["masks"].shape == (0, 32, 50)
    assert coco.CocoDetection(tmp_path / "val2017", ann, skip_empty=True).ids == [1, 7]


def test_coco_hflip_moves_boxes_with_masks(tmp_path):
    make_coco(tmp_path)
    ann = tmp_path / "annotations" / "instances_val2017.json"
    plain = coco.CocoDetection(tmp_path / "val2017", ann, masks=True)[0]
    flipped = coco.CocoDetection(tmp_path / "val2017", ann, masks=True, hflip=1.0)[0]
    assert torch.equal(flipped[0], plain[0].flip(-1))
    assert flipped[1]["boxes"].tolist() == [[40, 6, 60, 26], [18, 10, 34, 26]]
    for box, mask in zip(flipped[1]["boxes"], flipped[1]["masks"], strict=True):
        ys, xs = torch.nonzero(mask, as_tuple=True)
        assert box[0] - 1 <= xs.min() and xs.max() <= box[2] and box[1] - 1 <= ys.min() and ys.max() <= box[3]


def test_coco_layout_error_names_expected_files(tmp_path):
    from t4bench.benchmarks.ssd.model import SSDBenchmark

    cfg = model_cfg(
        "ssd",
        **{
            "model.data.path": str(tmp_path / "coco2017"),
            "model.data.train_images": "train2017",
            "model.data.train_annotations": "annotations/instances_train2017.json",
        },
    )
    with pytest.raises(DatasetMissingError, match=r"instances_train2017\.json.*train2017"):
        SSDBenchmark.check_inputs(cfg)


def test_coco_round_trip_ground_truth_scores_one(tmp_path):
    make_coco(tmp_path)
    gt = coco.quiet_coco(tmp_path / "annotations" / "instances_val2017.json")
    perfect = coco.ground_truth_results(gt)
    assert coco.score(gt, perfect, ["box_map", "mask_map"]) == pytest.approx(
        {"box_map": 1.0, "mask_map": 1.0}, abs=1e-9
    )
    # moving every box by a third of its size must cost AP: the scorer is not a constant
    shifted = [dict(r, bbox=[r["bbox"][0] + r["bbox"][2] / 3, *r["bbox"][1:]]) for r in perfect]
    assert coco.coco_map(gt, shifted, "bbox") < 0.5
    assert coco.coco_map(gt, [], "bbox") == 0.0


def test_model_outputs_convert_to_coco_results(tmp_path):
    """The path evaluate() takes: torchvision-style outputs (xyxy, contiguous labels, mask
    probabilities) -> COCO results -> COCOeval. Ground truth expressed as outputs scores 1.0."""
    make_coco(tmp_path)
    ds = coco.CocoDetection(tmp_path / "val2017", tmp_path / "annotations" / "instances_val2017.json", masks=True)
    outputs, ids = [], []
    for index in range(len(ds)):
        _, target = ds[index]
        n = len(target["labels"])
        outputs.append(
            {
                "boxes": target["boxes"],
                "labels": target["labels"],
                "scores": torch.ones(n),
                "masks": target["masks"][:, None].float() * 0.9,
            }
        )
        ids.append(int(target["image_id"]))
    results = coco.to_results(outputs, ids, ds.cat_ids, masks=True)
    assert {r["category_id"] for r in results} == {1, 3, 90}
    scores = coco.score(ds.coco, results, ["box_map", "mask_map"])
    assert scores == pytest.approx({"box_map": 1.0, "mask_map": 1.0}, abs=1e-9)
    wrong = [dict(r, category_id=1) for r in results]
    assert coco.coco_map(ds.coco, wrong, "bbox") < 1.0


# ---------------------------------------------------------------- generated mini datasets


@needs_fashion
def test_fashion_folder_is_balanced_and_idempotent(tmp_path):
    fashion_folder.prepare(tmp_path)
    root = tmp_path / fashion_folder.NAME
    for split, per_class in (("train", fashion_folder.TRAIN_PER_CLASS), ("val", fashion_folder.VAL_PER_CLASS)):
        counts = {d.name: len(list(d.glob("*.png"))) for d in (root / split).iterdir()}
        assert counts == {name: per_class for name in fashion_mnist.CLASSES}
    sample = next((root / "train" / "trouser").glob("*.png"))
    assert Image.open(sample).size == (28, 28)
    stamp = (root / ".complete.json").stat().st_mtime_ns
    fashion_folder.prepare(tmp_path)
    assert (root / ".complete.json").stat().st_mtime_ns == stamp


@pytest.fixture(scope="module")
def fashion_coco_root(tmp_path_factory):
    if not HAVE_FASHION:
        pytest.skip("Debian package dataset-fashion-mnist not installed")
    data_root = tmp_path_factory.mktemp("vision-data")
    fashion_coco.prepare(data_root)
    return data_root / fashion_coco.NAME


def test_fashion_coco_annotations_match_visible_pixels(fashion_coco_root):
    gt = coco.quiet_coco(fashion_coco_root / "annotations" / "instances_train.json")
    assert len(gt.getImgIds()) == fashion_coco.SPLITS["train"][1]
    assert sorted(gt.getCatIds()) == list(range(1, 11))
    per_category = {c: len(gt.getAnnIds(catIds=[c])) for c in gt.getCatIds()}
    assert min(per_category.values()) > 0.5 * max(per_category.values())
    occluded = 0
    for image_id in gt.getImgIds()[:100]:
        anns = gt.loadAnns(gt.getAnnIds(imgIds=image_id))
        masks = [gt.annToMask(a) for a in anns]
        if len(masks) > 1:  # visible pixels belong to one object only
            assert np.stack(masks).sum(0).max() <= 1
        for ann, mask in zip(anns, masks, strict=True):
            ys, xs = np.nonzero(mask)
            assert int(mask.sum()) == ann["area"] >= fashion_coco.MIN_AREA
            assert ann["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
            occluded += ann["area"] < 0.95 * ann["bbox"][2] * ann["bbox"][3]
    assert occluded > 0
    with Image.open(fashion_coco_root / "train" / gt.loadImgs(1)[0]["file_name"]) as image:
        assert image.size == (fashion_coco.CANVAS, fashion_coco.CANVAS) and image.mode == "RGB"


def test_fashion_coco_is_deterministic(fashion_coco_root):
    pool = fashion_mnist.load("test")
    again, anns = fashion_coco._render(5, pool, np.random.default_rng([fashion_coco.SEED, 1, 5]))
    with Image.open(fashion_coco_root / "val" / "000005.png") as image:
        assert np.array_equal(np.asarray(image), again)
    gt = coco.quiet_coco(fashion_coco_root / "annotations" / "instances_val.json")
    stored = gt.loadAnns(gt.getAnnIds(imgIds=5))
    assert [a["bbox"] for a in stored] == [a["bbox"] for a in anns]


@pytest.mark.parametrize("name", ["ssd", "maskrcnn"])
def test_mini_targets_are_far_above_trivial_predictor(fashion_coco_root, name):
    """The image-blind prior predictor (median box per category on a grid, scored by frequency)
    is the trivial baseline the mini targets must clear by far."""
    root = fashion_coco_root / "annotations"
    train, val = coco.quiet_coco(root / "instances_train.json"), coco.quiet_coco(root / "instances_val.json")
    trivial = coco.score(val, coco.prior_results(train, val), ["box_map", "mask_map"])
    assert trivial["box_map"] > 0.0 and trivial["mask_map"] > 0.0
    target = OmegaConf.load(CONF / "model" / f"{name}.yaml").target
    for metric, threshold in target.items():
        assert threshold > 20 * trivial[metric], (metric, threshold, trivial)
    gt_scores = coco.score(val, coco.ground_truth_results(val), ["box_map", "mask_map"])
    assert gt_scores == pytest.approx({"box_map": 1.0, "mask_map": 1.0}, abs=1e-9)
