"""COCO-format detection data (pycocotools) and COCOeval scoring, shared by SSD and Mask R-CNN.

Layout (the COCO 2017 release, or `fashion_coco` at mini scale):

    <path>/annotations/instances_<split>.json
    <path>/<split images>/<file_name>
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from torch.utils.data import Dataset
from torchvision.transforms.functional import pil_to_tensor

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


class CocoDetection(Dataset):
    """(image float [3, H, W] in [0, 1], target) pairs in torchvision's detection convention.

    target: boxes [N, 4] xyxy pixels, labels [N] in 1..K (contiguous, 0 is background), image_id,
    and with `masks=True` masks [N, H, W] uint8. Crowd and degenerate boxes are dropped; with
    `skip_empty=True` images left without annotations are too (training, as in MLPerf).
    `hflip` is the probability of a horizontal flip (training augmentation).
    """

    def __init__(self, images: Path, annotations: Path, *, masks: bool = False,
                 skip_empty: bool = False, hflip: float = 0.0, limit: int | None = None) -> None:
        self.images = Path(images)
        self.coco = quiet_coco(annotations)
        self.masks = masks
        self.hflip = hflip
        self.cat_ids = sorted(self.coco.getCatIds())
        self.label_of = {cat: i + 1 for i, cat in enumerate(self.cat_ids)}
        ids = sorted(self.coco.getImgIds())
        if skip_empty:
            ids = [i for i in ids if self._annotations(i)]
        self.ids = ids[:limit] if limit else ids

    @property
    def num_classes(self) -> int:
        """Including background."""
        return len(self.cat_ids) + 1

    def _annotations(self, image_id: int) -> list[dict[str, Any]]:
        anns = self.coco.loadAnns(self.coco.getAnnIds(imgIds=image_id, iscrowd=False))
        return [a for a in anns if a["bbox"][2] >= 1 and a["bbox"][3] >= 1]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        image_id = self.ids[index]
        info = self.coco.loadImgs(image_id)[0]
        with Image.open(self.images / info["file_name"]) as pil:
            image = pil_to_tensor(pil.convert("RGB")).float().div_(255.0)
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
            target["masks"] = (torch.from_numpy(np.stack(stack)) if stack
                               else torch.zeros((0, height, width), dtype=torch.uint8))
        if self.hflip and torch.rand(()) < self.hflip:
            image = image.flip(-1)
            target["boxes"] = torch.stack([width - boxes[:, 2], boxes[:, 1], width - boxes[:, 0], boxes[:, 3]], 1)
            if self.masks:
                target["masks"] = target["masks"].flip(-1)
        return image, target


def collate(batch: Sequence[tuple[torch.Tensor, dict[str, torch.Tensor]]]) -> tuple[list, list]:
    """Lists of images and targets: detection models take images of different sizes."""
    images, targets = zip(*batch)
    return list(images), list(targets)


def to_results(outputs: Iterable[Mapping[str, torch.Tensor]], image_ids: Iterable[int],
               cat_ids: Sequence[int], *, masks: bool, mask_threshold: float = 0.5) -> list[dict]:
    """torchvision detection outputs (boxes xyxy, labels 1..K, scores, masks [N,1,H,W] probabilities)
    as COCO result dicts (bbox xywh, category_id, score, segmentation RLE when `masks`)."""
    results = []
    for output, image_id in zip(outputs, image_ids):
        boxes = output["boxes"].detach().float().cpu().numpy()
        scores = output["scores"].detach().float().cpu().tolist()
        labels = output["labels"].cpu().tolist()
        if masks:
            binary = (output["masks"][:, 0] > mask_threshold).cpu().numpy().astype(np.uint8)
            rles = mask_utils.encode(np.asfortranarray(binary.transpose(1, 2, 0))) if len(binary) else []
        for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
            result = {"image_id": int(image_id), "category_id": int(cat_ids[labels[i] - 1]),
                      "bbox": [x0, y0, x1 - x0, y1 - y0], "score": scores[i]}
            if masks:
                result["segmentation"] = {"size": list(rles[i]["size"]),
                                          "counts": rles[i]["counts"].decode("ascii")}
            results.append(result)
    return results


def coco_map(coco_gt: COCO, results: list[dict], iou_type: str,
             image_ids: Sequence[int] | None = None) -> float:
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


def score(coco_gt: COCO, results: list[dict], metrics: Iterable[str],
          image_ids: Sequence[int] | None = None) -> dict[str, float]:
    """{metric: AP} for metric names in IOU_TYPES (box_map, mask_map)."""
    return {name: coco_map(coco_gt, results, IOU_TYPES[name], image_ids) for name in metrics}


def ground_truth_results(coco_gt: COCO, image_ids: Sequence[int] | None = None) -> list[dict]:
    """The ground truth as score-1 detections (a perfect predictor: scores mAP 1.0)."""
    ids = coco_gt.getImgIds() if image_ids is None else image_ids
    results = []
    for ann in coco_gt.loadAnns(coco_gt.getAnnIds(imgIds=ids, iscrowd=False)):
        rle = coco_gt.annToRLE(ann)
        counts = rle["counts"].decode("ascii") if isinstance(rle["counts"], bytes) else rle["counts"]
        results.append({"image_id": ann["image_id"], "category_id": ann["category_id"],
                        "bbox": list(ann["bbox"]), "score": 1.0,
                        "segmentation": {"size": list(rle["size"]), "counts": counts}})
    return results


def prior_results(coco_train: COCO, coco_val: COCO, grid: int = 3) -> list[dict]:
    """A trivial predictor that never looks at the image: for every val image and category, a
    grid x grid lattice of boxes of the category's median training size (relative to the image),
    scored by the category's training frequency, each with its box as the mask."""
    results = []
    anns = coco_train.loadAnns(coco_train.getAnnIds(iscrowd=False))
    total = max(len(anns), 1)
    for cat in coco_train.getCatIds():
        sizes = [(a["bbox"][2] / coco_train.imgs[a["image_id"]]["width"],
                  a["bbox"][3] / coco_train.imgs[a["image_id"]]["height"])
                 for a in anns if a["category_id"] == cat]
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
                    results.append({"image_id": image["id"], "category_id": cat, "bbox": box,
                                    "score": len(sizes) / total,
                                    "segmentation": {"size": list(rle["size"]),
                                                     "counts": rle["counts"].decode("ascii")}})
    return results
