"""SSD300 with a ResNet-34 backbone (MLPerf Training v0.5 object detection), COCOeval box mAP.

Built from torchvision's SSD parts (SSD, SSDHead, DefaultBoxGenerator; not the VGG16 variant): the
ResNet-34 trunk through conv4 with conv4 at stride 1 (38x38 at 300x300), then the MLPerf extra
layers (1x1 reduce + 3x3 conv, batch norm) down to 1x1: six feature maps, 4/6/6/6/4/4 boxes per
location. Mini: the same construction at 128x128 with a narrow, shallower trunk and five maps.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn
from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
from torchvision.models.detection.ssd import SSD

from t4bench.benchmarks.shared_detection.benchmark import CocoBenchmark
from t4bench.benchmarks.shared_resnet.parts import ResNetTrunk, feature_dict, init_weights, trunk_from_cfg
from t4bench.benchmarks.ssd.loss import BatchedLossSSD
from t4bench.pytorch.perf import PerfOptions


class SSDBackbone(nn.Module):
    """Trunk feature map plus one map per extra layer `[mid, out, stride, padding]`."""

    def __init__(self, trunk: ResNetTrunk, extras: list[list[int]]) -> None:
        super().__init__()
        self.trunk = trunk
        channels = trunk.out_channels[-1]
        layers = []
        for mid, out, stride, padding in extras:
            layers.append(
                nn.Sequential(
                    nn.Conv2d(channels, mid, 1, bias=False),
                    nn.BatchNorm2d(mid),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(mid, out, 3, stride=stride, padding=padding, bias=False),
                    nn.BatchNorm2d(out),
                    nn.ReLU(inplace=True),
                )
            )
            channels = out
        self.extras = nn.ModuleList(layers)
        init_weights(self.extras)

    def forward(self, x: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        x = self.trunk(x)
        features = [x]
        for layer in self.extras:
            x = layer(x)
            features.append(x)
        return feature_dict(features)


class SSDBenchmark(CocoBenchmark):
    name = "ssd"

    def build_model(self) -> nn.Module:
        arch = self.model_cfg.arch
        backbone = SSDBackbone(trunk_from_cfg(arch.backbone), [list(e) for e in arch.extras])
        anchors = DefaultBoxGenerator(
            [list(r) for r in arch.aspect_ratios],
            scales=list(arch.scales),
            steps=list(arch.steps) if arch.get("steps") is not None else None,
        )
        size = int(arch.image_size)
        # perf.batched_loss: the same model, its training loss for the whole batch at once
        ssd = BatchedLossSSD if PerfOptions.from_config(self.cfg, self.ctx.device).batched_loss else SSD
        return ssd(
            backbone,
            anchors,
            (size, size),
            self.num_classes,
            image_mean=list(arch.image_mean),
            image_std=list(arch.image_std),
            score_thresh=float(arch.score_thresh),
            nms_thresh=float(arch.nms_thresh),
            detections_per_img=int(arch.detections_per_img),
            topk_candidates=int(arch.topk_candidates),
        )
