"""COCO-format detection data (pycocotools) and COCOeval scoring, shared by SSD and Mask R-CNN.

Layout (the COCO 2017 release, or `fashion_coco` at mini scale):

    <path>/annotations/instances_<split>.json
    <path>/<split images>/<file_name>
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from torch.utils.data import Dataset
from torchvision.transforms.functional import pil_to_tensor

from t4bench.benchmarks.data_checks import DataError, open_rgb
from t4bench.benchmarks.shared_detection.instances_file import REQUIRED_FIELDS, no_list, read_json
from t4bench.errors import DatasetMissingError

#: COCOeval iouType for each metric name a benchmark may put in its target
IOU_TYPES = {"box_map": "bbox", "mask_map": "segm"}


def check_layout(images: Path, annotations: Path, what: str) -> None:
    """Raise DatasetMissingError naming the expected COCO layout when either part is missing."""
    missing = [str(p) for p in (annotations, images) if not p.exists()]
    if missing:
        raise DatasetMissingError(
            f"{what}: missing {', '.join(missing)}; expected COCO layout "
            f"{annotations} (instances JSON) and {images}/ (the images it names)"
        )


def quiet_coco(annotations: Path | str) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(annotations))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_records(path: Path, dataset: dict[str, Any]) -> None:
    for key, fields in REQUIRED_FIELDS.items():
        records = dataset.get(key)
        if not isinstance(records, list):
            raise DataError(no_list(path, key))
        for index, record in enumerate(records):
            missing = [name for name in fields if not isinstance(record, dict) or name not in record]
            if missing:
                raise DataError(f"{path}: {key}[{index}] has no {', '.join(missing)}")
    if not dataset["categories"]:
        raise DataError(f"{path}: 'categories' is empty")
    for index, image in enumerate(dataset["images"]):
        if not all(isinstance(image[k], int) and image[k] >= 1 for k in ("width", "height")):
            raise DataError(
                f"{path}: images[{index}] (id {image['id']}) has width/height "
                f"{image['width']}x{image['height']}; must be positive integers"
            )


def _check_annotations(path: Path, dataset: dict[str, Any], masks: bool) -> None:
    images = {image["id"] for image in dataset["images"]}
    categories = {category["id"] for category in dataset["categories"]}
    for index, ann in enumerate(dataset["annotations"]):
        where = f"{path}: annotations[{index}] (id {ann['id']})"
        if ann["image_id"] not in images:
            raise DataError(f"{where}: image_id {ann['image_id']} is not in 'images'")
        if ann["category_id"] not in categories:
            raise DataError(f"{where}: category_id {ann['category_id']} is not in 'categories'")
        bbox = ann["bbox"]
        if not (isinstance(bbox, list) and len(bbox) == 4 and all(_number(v) for v in bbox)):
            raise DataError(f"{where}: bbox {bbox} is not [x, y, width, height] of finite numbers")
        if masks and not ann.get("iscrowd", 0) and "segmentation" not in ann:
            raise DataError(f"{where}: no 'segmentation' (instance masks are needed to train Mask R-CNN)")


def load_annotations(path: Path | str, *, masks: bool = False) -> COCO:
    """A COCO instances file, checked before pycocotools indexes it: DataError naming the file
    and the record for bad JSON, a missing list or field, dangling ids, a malformed bbox."""
    path = Path(path)
    dataset = read_json(path)
    _check_records(path, dataset)
    _check_annotations(path, dataset, masks)
    coco = COCO()
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def is_degenerate(bbox: Sequence[float]) -> bool:
    """Narrower or lower than a pixel (zero or negative sizes included): no box to learn."""
    return not (bbox[2] >= 1 and bbox[3] >= 1)


@dataclass(frozen=True)
class Skipped:
    """What a training set left out: crowd and degenerate boxes of all `boxes`, and images left
    without a box of all `images` (zero when nothing is skipped, e.g. a validation set)."""

    boxes: int = 0
    crowd: int = 0
    degenerate: int = 0
    images: int = 0
    empty_images: int = 0


class CocoDetection(Dataset):
    """(image float [3, H, W] in [0, 1], target) pairs in torchvision's detection convention.

    target: boxes [N, 4] xyxy pixels, labels [N] in 1..K (contiguous, 0 is background), image_id,
    and with `masks=True` masks [N, H, W] uint8. Crowd and degenerate boxes are dropped; with
    `skip_empty=True` images left without annotations are too (training, as in MLPerf).
    `hflip` is the probability of a horizontal flip (training augmentation).
    """

    def __init__(
        self,
        images: Path,
        annotations: Path,
        *,
        masks: bool = False,
        skip_empty: bool = False,
        hflip: float = 0.0,
        limit: int | None = None,
    ) -> None:
        self.images = Path(images)
        self.coco = load_annotations(annotations, masks=masks)
        self.masks = masks
        self.hflip = hflip
        self.cat_ids = sorted(self.coco.getCatIds())
        self.label_of = {cat: i + 1 for i, cat in enumerate(self.cat_ids)}
        ids = sorted(self.coco.getImgIds())
        self.skipped = Skipped()
        if skip_empty:
            kept = [i for i in ids if self._annotations(i)]
            self._count_skipped(len(ids) - len(kept), len(ids))
            ids = kept
        self.ids = ids[:limit] if limit else ids
        if not self.ids:
            raise DataError(f"{annotations}: no images" + (" with a usable box" if skip_empty else ""))
        missing = [
            self.coco.imgs[i]["file_name"]
            for i in self.ids
            if not (self.images / self.coco.imgs[i]["file_name"]).is_file()
        ]
        if missing:
            raise DataError(
                f"{self.images}: {len(missing)} image file(s) named in {annotations} are missing, e.g. {missing[0]}"
            )

    def _count_skipped(self, images_dropped: int, images: int) -> None:
        """Training skips crowd and degenerate boxes, and images left without a box, as the MLPerf
        Mask R-CNN reference does (crowd regions, boxes under a pixel); counted, so that damaged
        data does not pass silently (`notes`)."""
        anns = self.coco.dataset["annotations"]
        self.skipped = Skipped(
            boxes=len(anns),
            crowd=sum(1 for a in anns if a.get("iscrowd", 0)),
            degenerate=sum(1 for a in anns if not a.get("iscrowd", 0) and is_degenerate(a["bbox"])),
            images=images,
            empty_images=images_dropped,
        )

    def notes(self) -> dict[str, tuple[int, str]]:
        """What training left out, name -> (count, one line) for `Benchmark.data_notes`."""
        skipped, notes = self.skipped, {}
        dropped = skipped.crowd + skipped.degenerate
        if dropped:
            notes["dropped_boxes"] = (
                dropped,
                f"dropped {dropped} of {skipped.boxes} training boxes ({skipped.crowd} crowd, "
                f"{skipped.degenerate} under 1 px wide or high), as the MLPerf reference does",
            )
        if skipped.empty_images:
            notes["dropped_images"] = (
                skipped.empty_images,
                f"dropped {skipped.empty_images} of {skipped.images} training images: no usable box left",
            )
        return notes

    @property
    def num_classes(self) -> int:
        """Including background."""
        return len(self.cat_ids) + 1

    def _annotations(self, image_id: int) -> list[dict[str, Any]]:
        anns = self.coco.loadAnns(self.coco.getAnnIds(imgIds=image_id, iscrowd=False))
        return [a for a in anns if not is_degenerate(a["bbox"])]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        image_id = self.ids[index]
        info = self.coco.loadImgs(image_id)[0]
        image = pil_to_tensor(open_rgb(self.images / info["file_name"])).float().div_(255.0)
        anns = self._annotations(image_id)
        boxes = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        height, width = image.shape[-2:]
        boxes[:, 0::2].clamp_(0, width)
        boxes[:, 1::2].clamp_(0, height)
        target: dict[str, torch.Tensor] = {
            "boxes": boxes,
            "labels": torch.tensor([self.label_of[a["category_id"]] for a in anns], dtype=torch.int64),
            "image_id": torch.tensor(image_id),
        }
        if self.masks:
            stack = [self.coco.annToMask(a) for a in anns]
            target["masks"] = (
                torch.from_numpy(np.stack(stack)) if stack else torch.zeros((0, height, width), dtype=torch.uint8)
            )
        if self.hflip and torch.rand(()) < self.hflip:
            image = image.flip(-1)
            target["boxes"] = torch.stack([width - boxes[:, 2], boxes[:, 1], width - boxes[:, 0], boxes[:, 3]], 1)
            if self.masks:
                target["masks"] = target["masks"].flip(-1)
        return image, target


def collate(batch: Sequence[tuple[torch.Tensor, dict[str, torch.Tensor]]]) -> tuple[list, list]:
    """Lists of images and targets: detection models take images of different sizes."""
    images, targets = zip(*batch, strict=True)
    return list(images), list(targets)


def to_results(
    outputs: Iterable[Mapping[str, torch.Tensor]],
    image_ids: Iterable[int],
    cat_ids: Sequence[int],
    *,
    masks: bool,
    mask_threshold: float = 0.5,
) -> list[dict]:
    """torchvision detection outputs (boxes xyxy, labels 1..K, scores, masks [N,1,H,W] probabilities)
    as COCO result dicts (bbox xywh, category_id, score, segmentation RLE when `masks`)."""
    results = []
    for output, image_id in zip(outputs, image_ids, strict=True):
        boxes = output["boxes"].detach().float().cpu().numpy()
        scores = output["scores"].detach().float().cpu().tolist()
        labels = output["labels"].cpu().tolist()
        if masks:
            binary = (output["masks"][:, 0] > mask_threshold).cpu().numpy().astype(np.uint8)
            rles = mask_utils.encode(np.asfortranarray(binary.transpose(1, 2, 0))) if len(binary) else []
        for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
            result = {
                "image_id": int(image_id),
                "category_id": int(cat_ids[labels[i] - 1]),
                "bbox": [x0, y0, x1 - x0, y1 - y0],
                "score": scores[i],
            }
            if masks:
                result["segmentation"] = {"size": list(rles[i]["size"]), "counts": rles[i]["counts"].decode("ascii")}
            results.append(result)
    return results


def coco_map(coco_gt: COCO, results: list[dict], iou_type: str, image_ids: Sequence[int] | None = None) -> float:
    """COCOeval AP@[.5:.95] (stats[0]) of `results` against `coco_gt`; 0.0 without detections."""
    if not results:
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        coco_dt = coco_gt.loadRes(results)
        evaluator = COCOeval(coco_gt, coco_dt, iouType=iou_type)
        if image_ids is not None:
            evaluator.params.imgIds = list(image_ids)
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return max(float(evaluator.stats[0]), 0.0)


def score(
    coco_gt: COCO, results: list[dict], metrics: Iterable[str], image_ids: Sequence[int] | None = None
) -> dict[str, float]:
    """{metric: AP} for metric names in IOU_TYPES (box_map, mask_map)."""
    return {name: coco_map(coco_gt, results, IOU_TYPES[name], image_ids) for name in metrics}


def ground_truth_results(coco_gt: COCO, image_ids: Sequence[int] | None = None) -> list[dict]:
    """The ground truth as score-1 detections (a perfect predictor: scores mAP 1.0)."""
    ids = coco_gt.getImgIds() if image_ids is None else image_ids
    results = []
    for ann in coco_gt.loadAnns(coco_gt.getAnnIds(imgIds=ids, iscrowd=False)):
        rle = coco_gt.annToRLE(ann)
        counts = rle["counts"].decode("ascii") if isinstance(rle["counts"], bytes) else rle["counts"]
        results.append(
            {
                "image_id": ann["image_id"],
                "category_id": ann["category_id"],
                "bbox": list(ann["bbox"]),
                "score": 1.0,
                "segmentation": {"size": list(rle["size"]), "counts": counts},
            }
        )
    return results


def prior_results(coco_train: COCO, coco_val: COCO, grid: int = 3) -> list[dict]:
    """A trivial predictor that never looks at the image: for every val image and category, a
    grid x grid lattice of boxes of the category's median training size (relative to the image),
    scored by the category's training frequency, each with its box as the mask."""
    results = []
    anns = coco_train.loadAnns(coco_train.getAnnIds(iscrowd=False))
    total = max(len(anns), 1)
    for cat in coco_train.getCatIds():
        sizes = [
            (
                a["bbox"][2] / coco_train.imgs[a["image_id"]]["width"],
                a["bbox"][3] / coco_train.imgs[a["image_id"]]["height"],
            )
            for a in anns
            if a["category_id"] == cat
        ]
        if not sizes:
            continue
        rel_w, rel_h = np.median(np.array(sizes), axis=0)
        for image in coco_val.loadImgs(coco_val.getImgIds()):
            width, height = image["width"], image["height"]
            w, h = rel_w * width, rel_h * height
            for gy in range(grid):
                for gx in range(grid):
                    cx, cy = (gx + 0.5) * width / grid, (gy + 0.5) * height / grid
                    x0, y0 = max(cx - w / 2, 0.0), max(cy - h / 2, 0.0)
                    box = [x0, y0, min(w, width - x0), min(h, height - y0)]
                    rle = mask_utils.frPyObjects(np.array([box], dtype=np.float64), height, width)[0]
                    results.append(
                        {
                            "image_id": image["id"],
                            "category_id": cat,
                            "bbox": box,
                            "score": len(sizes) / total,
                            "segmentation": {"size": list(rle["size"]), "counts": rle["counts"].decode("ascii")},
                        }
                    )
    return results
