"""ResNet-50 v1.5 image classification (MLPerf Training v0.5), top-1 accuracy.

Reference: ImageNet in the ImageFolder layout, 224x224 crops, torchvision's ResNet-50 v1.5 layout.
Mini: Fashion-MNIST written as the same ImageFolder layout by `t4bench.benchmarks.resnet50.fashion_folder`, a
shrunk ResNet of the same family (Bottleneck blocks, fewer and narrower stages, 3x3 stem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from t4bench import baselines
from t4bench.benchmark import Benchmark
from t4bench.benchmarks import data_checks
from t4bench.benchmarks.shared_resnet.parts import ResNetClassifier, trunk_from_cfg
from t4bench.errors import DatasetMissingError
from t4bench.pytorch.context import RunContext
from t4bench.spec import RunSpec

IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png", ".bmp", ".ppm", ".webp", ".tif", ".tiff", ".pgm"}


def _check_image_folder(split_dir: Path) -> None:
    classes = [d for d in split_dir.iterdir() if d.is_dir()] if split_dir.is_dir() else []
    if not classes or not any(f.suffix.lower() in IMAGE_SUFFIXES for d in classes for f in d.iterdir()):
        raise DatasetMissingError(
            f"no images in {split_dir}/<class>/<image>; expected the ImageFolder layout "
            f"{split_dir.parent}/train/<class>/*.JPEG and {split_dir.parent}/val/<class>/*.JPEG"
        )


def build_transforms(data: Any, train: bool) -> transforms.Compose:
    """`augment: imagenet`: RandomResizedCrop + flip / resize + centre crop; `small`: pad-and-crop
    + flip / as is (inputs already at `image_size`)."""
    size = int(data.image_size)
    normalize = [transforms.ToTensor(), transforms.Normalize(list(data.mean), list(data.std))]
    if data.augment == "imagenet":
        if train:
            geometry = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
        else:
            geometry = [transforms.Resize(round(size * 256 / 224)), transforms.CenterCrop(size)]
    elif data.augment == "small":
        geometry = (
            [transforms.RandomCrop(size, padding=int(data.crop_padding)), transforms.RandomHorizontalFlip()]
            if train
            else [transforms.CenterCrop(size)]
        )
    else:
        raise ValueError(f"unknown augment {data.augment!r}")
    return transforms.Compose(geometry + normalize)


class ResNet50Benchmark(Benchmark[RunContext]):
    name = "resnet50"
    throughput_unit = "samples/s"
    #: ImageNet-1k train
    reference_train_samples = 1_281_167

    def __init__(self, cfg: RunSpec, ctx: RunContext) -> None:
        super().__init__(cfg, ctx)
        self.model_cfg = cfg.model
        if not self.synthetic:
            root = Path(self.model_cfg.data.path)
            self.train_set = datasets.ImageFolder(
                str(root / "train"), build_transforms(self.model_cfg.data, True), loader=data_checks.image_loader
            )
            self.val_set = datasets.ImageFolder(
                str(root / "val"), build_transforms(self.model_cfg.data, False), loader=data_checks.image_loader
            )
            if self.train_set.classes != self.val_set.classes:
                raise DatasetMissingError(f"{root}: train/ and val/ hold different class folders")
            if len(self.train_set.classes) != self.model_cfg.arch.num_classes:
                raise DatasetMissingError(
                    f"{root}/train has {len(self.train_set.classes)} class folders, "
                    f"model.arch.num_classes is {self.model_cfg.arch.num_classes}"
                )

    @classmethod
    def check_inputs(cls, cfg: RunSpec) -> None:
        root = Path(cfg.model.data.path)
        for split in ("train", "val"):
            _check_image_folder(root / split)

    def dataset_train_size(self) -> int:
        return len(self.train_set)

    def dataset_eval_size(self) -> int:
        return len(self.val_set)

    def build_model(self) -> nn.Module:
        arch = self.model_cfg.arch
        return ResNetClassifier(trunk_from_cfg(arch.backbone), int(arch.num_classes))

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        """MLPerf ResNet: no weight decay on batch-norm parameters and biases."""
        decay: list[nn.Parameter] = []
        no_decay: list[nn.Parameter] = []
        for param in model.parameters():
            if param.requires_grad:
                (no_decay if param.ndim <= 1 else decay).append(param)
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    def train_batches(self, epoch: int) -> DataLoader[Any]:
        return self.ctx.make_loader(
            self.train_set, int(self.model_cfg.batch_size), epoch=epoch, shuffle=True, drop_last=False
        )

    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, int]:
        images, labels = batch
        logits = model(images)
        smoothing = float(self.model_cfg.get("label_smoothing", 0.0))
        return F.cross_entropy(logits, labels, label_smoothing=smoothing), int(labels.shape[0])

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        # Trainer.evaluate has already put the model in eval mode under no_grad and autocast
        loader = self.ctx.eval_loader(self.val_set, int(self.model_cfg.eval_batch_size))
        correct = total = 0
        for batch in loader:
            images, labels = self.ctx.to_device(batch)
            correct += int((model(images).argmax(1) == labels).sum())
            total += int(labels.shape[0])
        return {"top1": correct / max(total, 1)}

    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Generated on the device once (and in its memory format), so neither the loop nor a bare
        loop pays a host-to-device copy per step: throughput is the model's, not the PCIe link's."""
        size, batch = int(self.model_cfg.data.image_size), int(self.model_cfg.batch_size)
        generator = self.ctx.generator(stream=11)
        images = torch.randn(batch, 3, size, size, generator=generator)
        labels = torch.randint(0, int(self.model_cfg.arch.num_classes), (batch,), generator=generator)
        return self.ctx.to_device((images, labels))

    trivial_baseline = "majority class"

    def trivial_quality(self) -> dict[str, float]:
        if self.synthetic:
            return {}
        import numpy as np

        return baselines.majority_class_accuracy(np.array(self.train_set.targets), np.array(self.val_set.targets))
