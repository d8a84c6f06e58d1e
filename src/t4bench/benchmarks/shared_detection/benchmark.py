"""What SSD and Mask R-CNN share: COCO data, the detection loss convention, COCOeval scoring and
synthetic batches. Subclasses only build their model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils.data import DataLoader

from t4bench.benchmark import Benchmark
from t4bench.benchmarks.shared_detection import coco, instances_file
from t4bench.errors import DatasetMissingError
from t4bench.pytorch.context import RunContext
from t4bench.spec import RunSpec


class CocoBenchmark(Benchmark[RunContext]):
    """torchvision detection models: `model(images, targets)` returns a dict of losses in train
    mode and a list of detections in eval mode. Quality: COCOeval AP@[.5:.95] of every target metric
    (box_map, mask_map)."""

    throughput_unit = "samples/s"
    #: COCO train2017 images with at least one annotation (the MLPerf references skip empty ones)
    reference_train_samples = 117_266
    #: whether the model trains on instance masks (and is scored on them)
    masks: ClassVar[bool] = False

    def __init__(self, cfg: RunSpec, ctx: RunContext) -> None:
        super().__init__(cfg, ctx)
        self.model_cfg = cfg.model
        self.num_classes = int(self.model_cfg.arch.num_classes)
        if self.synthetic:
            return
        train_images, train_ann, val_images, val_ann = self.paths(cfg)
        data = self.model_cfg.data
        self.train_set = coco.CocoDetection(
            train_images, train_ann, masks=self.masks, skip_empty=True, hflip=float(data.hflip)
        )
        self.val_set = coco.CocoDetection(val_images, val_ann, limit=data.get("val_limit"))
        if self.train_set.num_classes != self.num_classes:
            raise DatasetMissingError(
                f"{train_ann} has {self.train_set.num_classes - 1} categories, "
                f"model.arch.num_classes is {self.num_classes} (categories + background)"
            )

    @staticmethod
    def paths(cfg: RunSpec) -> tuple[Path, Path, Path, Path]:
        data = cfg.model.data
        root = Path(data.path)
        return (
            root / data.train_images,
            root / data.train_annotations,
            root / data.val_images,
            root / data.val_annotations,
        )

    @classmethod
    def check_inputs(cls, cfg: RunSpec) -> None:
        train_images, train_ann, val_images, val_ann = cls.paths(cfg)
        coco.check_layout(train_images, train_ann, f"{cfg.model.name} training set")
        coco.check_layout(val_images, val_ann, f"{cfg.model.name} validation set")
        for instances in (train_ann, val_ann):
            instances_file.check_structure(instances)

    def dataset_train_size(self) -> int:
        return len(self.train_set)

    def data_notes(self) -> Mapping[str, tuple[int, str]]:
        return {} if self.synthetic else self.train_set.notes()

    def dataset_eval_size(self) -> int:
        return len(self.val_set)

    def train_batches(self, epoch: int) -> DataLoader[Any]:
        return self.ctx.make_loader(
            self.train_set,
            int(self.model_cfg.batch_size),
            epoch=epoch,
            shuffle=True,
            drop_last=False,
            collate_fn=coco.collate,
        )

    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, int]:
        images, targets = batch
        losses = model(images, targets)
        return sum(losses.values()), len(images)

    def samples_in(self, batch: Any) -> int:
        """Images in an (images, targets) batch of lists: the default count would see two."""
        return len(batch[0])

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        # Trainer.evaluate has already put the model in eval mode under no_grad and autocast
        loader = self.ctx.eval_loader(self.val_set, int(self.model_cfg.eval_batch_size), collate_fn=coco.collate)
        results: list[dict] = []
        for images, targets in loader:
            outputs = model(self.ctx.to_device(images))
            ids = [int(t["image_id"]) for t in targets]
            results += coco.to_results(outputs, ids, self.val_set.cat_ids, masks=self.masks)
        metrics = [key for key in self.model_cfg.target if key in coco.IOU_TYPES]
        return coco.score(self.val_set.coco, results, metrics, image_ids=self.val_set.ids)

    def synthetic_batch(self) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
        """`batch_size` images of `data.synthetic_image_size` ([H, W]) with `objects` random boxes
        each (and box-shaped masks for mask models), on the device (see ResNet50Benchmark)."""
        height, width = (int(v) for v in self.model_cfg.data.synthetic_image_size)
        count = int(self.model_cfg.data.get("synthetic_objects", 8))
        generator = self.ctx.generator(stream=12)
        images, targets = [], []
        for _ in range(int(self.model_cfg.batch_size)):
            images.append(torch.rand(3, height, width, generator=generator))
            corner = torch.rand(count, 2, generator=generator) * 0.7
            extent = 0.05 + torch.rand(count, 2, generator=generator) * 0.25
            scale = torch.tensor([width, height], dtype=torch.float32)
            boxes = torch.cat([corner * scale, (corner + extent) * scale], 1)
            target = {"boxes": boxes, "labels": torch.randint(1, self.num_classes, (count,), generator=generator)}
            if self.masks:
                masks = torch.zeros(count, height, width, dtype=torch.uint8)
                for i, (x0, y0, x1, y1) in enumerate(boxes.round().int().tolist()):
                    masks[i, y0:y1, x0:x1] = 1
                target["masks"] = masks
            targets.append(target)
        return self.ctx.to_device((images, targets))

    trivial_baseline = "image-blind prior boxes"

    def trivial_quality(self) -> dict[str, float]:
        # COCOeval of the prior: seconds on fashion-coco, long on COCO 2017: mini scale only
        if self.synthetic or str(self.cfg.scale.name) != "mini":
            return {}
        metrics = [key for key in self.model_cfg.target if key in coco.IOU_TYPES]
        prior = coco.prior_results(self.train_set.coco, self.val_set.coco)
        return coco.score(self.val_set.coco, prior, metrics, image_ids=self.val_set.ids)
