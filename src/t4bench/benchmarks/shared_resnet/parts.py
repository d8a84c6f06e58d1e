"""ResNet trunks from torchvision's blocks at any depth and width, for the vision benchmarks.

`ResNetTrunk` mirrors torchvision's ResNet module names (conv1, bn1, relu, maxpool, layer1..N), so
torchvision's detection utilities (IntermediateLayerGetter, BackboneWithFPN) take it as they take
a torchvision ResNet. Blocks are torchvision's BasicBlock / Bottleneck; Bottleneck strides in its
3x3 convolution (the v1.5 layout). With block=basic, layers=[3, 4, 6], widths=[64, 128, 256] and
strides=[1, 2, 1] it is the MLPerf SSD ResNet-34 trunk (conv4 at stride 1).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck

BLOCKS: dict[str, type[BasicBlock] | type[Bottleneck]] = {"basic": BasicBlock, "bottleneck": Bottleneck}


class ResNetTrunk(nn.Module):
    def __init__(
        self,
        block: str,
        layers: Sequence[int],
        widths: Sequence[int],
        strides: Sequence[int] | None = None,
        stem_width: int = 64,
        stem: str = "imagenet",
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        block_cls = BLOCKS[block]
        strides = list(strides) if strides is not None else [1] + [2] * (len(layers) - 1)
        if not len(layers) == len(widths) == len(strides):
            raise ValueError("layers, widths and strides need one entry per stage")
        if stem not in ("imagenet", "small"):
            raise ValueError(f"unknown stem {stem!r}")
        # torchvision's child order: conv1, bn1, relu, maxpool, layer1..
        if stem == "imagenet":  # 7x7/2 convolution and 3x3/2 max-pool: stride 4
            self.conv1 = nn.Conv2d(in_channels, stem_width, 7, stride=2, padding=3, bias=False)
        else:  # "small": 3x3/1 convolution, no pool, for 28-32 pixel inputs
            self.conv1 = nn.Conv2d(in_channels, stem_width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1) if stem == "imagenet" else nn.Identity()
        inplanes = stem_width
        self.out_channels: list[int] = []
        for index, (count, width, stride) in enumerate(zip(layers, widths, strides, strict=True), start=1):
            out = width * block_cls.expansion
            downsample = None
            if stride != 1 or inplanes != out:
                downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))
            blocks = [block_cls(inplanes, width, stride, downsample)]
            blocks += [block_cls(out, width) for _ in range(count - 1)]
            self.add_module(f"layer{index}", nn.Sequential(*blocks))
            self.out_channels.append(out)
            inplanes = out
        init_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for module in self.children():
            x = module(x)
        return x


def init_weights(module: nn.Module) -> None:
    """torchvision's ResNet initialisation (Kaiming fan-out convolutions, unit norms)."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


def trunk_from_cfg(arch: Mapping[str, Any]) -> ResNetTrunk:
    return ResNetTrunk(
        block=arch["block"],
        layers=list(arch["layers"]),
        widths=list(arch["widths"]),
        strides=list(arch["strides"]) if arch.get("strides") is not None else None,
        stem_width=int(arch.get("stem_width", 64)),
        stem=arch.get("stem", "imagenet"),
    )


class ResNetClassifier(nn.Module):
    """Trunk, global average pool, linear classifier: torchvision's ResNet at another size."""

    def __init__(self, trunk: ResNetTrunk, num_classes: int) -> None:
        super().__init__()
        self.trunk = trunk
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(trunk.out_channels[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.avgpool(self.trunk(x)), 1))


def feature_dict(features: Sequence[torch.Tensor]) -> OrderedDict[str, torch.Tensor]:
    return OrderedDict((str(i), f) for i, f in enumerate(features))
