"""A small detection + instance-segmentation set in COCO layout, built from real Fashion-MNIST items,
for the SSD and Mask R-CNN mini runs:

    <data_root>/fashion-coco/annotations/instances_train.json   (COCO JSON, RLE masks)
    <data_root>/fashion-coco/annotations/instances_val.json
    <data_root>/fashion-coco/train/<image_id>.png                (CANVAS x CANVAS RGB)
    <data_root>/fashion-coco/val/<image_id>.png

Every image has a cluttered background (smooth colour noise, random rectangles, ellipses and lines)
and a shuffled stack of 1-4 tinted Fashion-MNIST items (the objects, 10 categories) and 1-3
distractors (items cut into tiles and shuffled: the same texture, no object shape), each pasted at a
random scale and position, so later layers occlude earlier ones. An object's mask is its pixels still
visible in the final image and its box is that mask's extent; objects less than MIN_VISIBLE visible
are left unannotated. Train items come from the Fashion-MNIST train split, val items from its test
split; everything is drawn from a fixed seed, so the set is the same on every machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw
from pycocotools import mask as mask_utils

from t4bench.benchmarks.shared_vision import fashion_mnist

NAME = "fashion-coco"
CANVAS = 128
SPLITS = {"train": ("train", 1200), "val": ("test", 300)}
SEED = 20190602
OBJECTS = (1, 4)
DISTRACTORS = (1, 3)
#: item side in pixels (Fashion-MNIST items are 28x28)
SIDE = (24, 72)
#: fraction of an object's own pixels that must stay visible for it to be annotated
MIN_VISIBLE = 0.4
MIN_AREA = 24

CATEGORIES = [{"id": i + 1, "name": name, "supercategory": "fashion"} for i, name in enumerate(fashion_mnist.CLASSES)]


def _background(rng: np.random.Generator) -> Image.Image:
    coarse = rng.integers(0, 160, size=(4, 4, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((CANVAS, CANVAS), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(3, 9))):
        x0, y0 = rng.integers(-16, CANVAS, size=2)
        w, h = rng.integers(6, 48, size=2)
        colour = tuple(int(c) for c in rng.integers(0, 200, size=3))
        kind = rng.integers(3)
        if kind == 0:
            draw.rectangle([x0, y0, x0 + w, y0 + h], fill=colour)
        elif kind == 1:
            draw.ellipse([x0, y0, x0 + w, y0 + h], fill=colour)
        else:
            draw.line([x0, y0, x0 + w, y0 + h], fill=colour, width=int(rng.integers(1, 4)))
    return image


def _scrambled(item: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    tiles = [
        np.rot90(item[r : r + 7, c : c + 7], int(rng.integers(4))) for r in range(0, 28, 7) for c in range(0, 28, 7)
    ]
    order = rng.permutation(len(tiles))
    rows = [np.concatenate([tiles[order[r * 4 + c]] for c in range(4)], axis=1) for r in range(4)]
    return np.concatenate(rows, axis=0)


def _render(
    image_id: int, pool: tuple[np.ndarray, np.ndarray], rng: np.random.Generator
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """One image (uint8 HxWx3) and its annotations (without ids)."""
    items, labels = pool
    canvas = np.asarray(_background(rng), dtype=np.float32)
    layers = [("object", int(i)) for i in rng.integers(len(items), size=rng.integers(*OBJECTS, endpoint=True))]
    layers += [("distractor", int(i)) for i in rng.integers(len(items), size=rng.integers(*DISTRACTORS, endpoint=True))]
    rng.shuffle(layers)
    placed: list[tuple[int, np.ndarray, np.ndarray]] = []  # (label, full mask, visible mask)
    for kind, index in layers:
        item = items[index] if kind == "object" else _scrambled(items[index], rng)
        side = int(rng.integers(SIDE[0], SIDE[1] + 1))
        value = (
            np.asarray(Image.fromarray(item).resize((side, side), Image.Resampling.BILINEAR), dtype=np.float32) / 255.0
        )
        if rng.random() < 0.5:
            value = value[:, ::-1]
        x0, y0 = (int(v) for v in rng.integers(-side // 5, CANVAS - side + side // 5 + 1, size=2))
        full = np.zeros((CANVAS, CANVAS), dtype=np.float32)
        cols, rows = slice(max(x0, 0), min(x0 + side, CANVAS)), slice(max(y0, 0), min(y0 + side, CANVAS))
        full[rows, cols] = value[rows.start - y0 : rows.stop - y0, cols.start - x0 : cols.stop - x0]
        alpha = np.clip(full * 3.0, 0.0, 1.0)[..., None]
        tint = rng.integers(90, 256, size=3).astype(np.float32)
        colour = tint * (0.45 + 0.55 * full[..., None])
        canvas = canvas * (1.0 - alpha) + colour * alpha
        cover = alpha[..., 0] > 0.5
        for _, _, visible in placed:
            visible &= ~cover
        if kind == "object":
            placed.append((int(labels[index]), cover.copy(), cover.copy()))
    canvas += rng.normal(0.0, 6.0, size=canvas.shape)
    annotations: list[dict[str, Any]] = []
    for label, full, visible in placed:
        area = int(visible.sum())
        if area < MIN_AREA or area < MIN_VISIBLE * full.sum():
            continue
        ys, xs = np.nonzero(visible)
        rle = mask_utils.encode(np.asfortranarray(visible.astype(np.uint8)))
        annotations.append(
            {
                "image_id": image_id,
                "category_id": label + 1,
                "bbox": [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)],
                "area": area,
                "iscrowd": 0,
                "segmentation": {"size": list(rle["size"]), "counts": rle["counts"].decode("ascii")},
            }
        )
    return np.clip(canvas, 0, 255).astype(np.uint8), annotations


def prepare(data_root: Path) -> None:
    """Write the set under `data_root/fashion-coco` unless it is already complete."""
    params = {
        "canvas": CANVAS,
        "splits": SPLITS,
        "seed": SEED,
        "objects": OBJECTS,
        "distractors": DISTRACTORS,
        "side": SIDE,
        "min_visible": MIN_VISIBLE,
        "version": 1,
    }

    def build(out: Path) -> None:
        (out / "annotations").mkdir()
        for split_index, (split, (source, count)) in enumerate(SPLITS.items()):
            pool = fashion_mnist.load(source)
            (out / split).mkdir()
            images: list[dict[str, Any]] = []
            annotations: list[dict[str, Any]] = []
            for image_id in range(1, count + 1):
                rng = np.random.default_rng([SEED, split_index, image_id])
                pixels, anns = _render(image_id, pool, rng)
                file_name = f"{image_id:06d}.png"
                Image.fromarray(pixels).save(out / split / file_name, compress_level=1)
                images.append({"id": image_id, "file_name": file_name, "width": CANVAS, "height": CANVAS})
                for ann in anns:
                    annotations.append({"id": len(annotations) + 1, **ann})
            coco = {
                "info": {"description": "t4bench fashion-coco", "version": "1"},
                "images": images,
                "annotations": annotations,
                "categories": CATEGORIES,
            }
            (out / "annotations" / f"instances_{split}.json").write_text(json.dumps(coco))

    fashion_mnist.write_once(Path(data_root) / NAME, params, build)


if __name__ == "__main__":
    import sys

    prepare(Path(sys.argv[1] if len(sys.argv) > 1 else "data"))
