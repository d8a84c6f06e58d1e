"""Mask R-CNN R50-FPN (MLPerf Training v0.5 heavy-weight detection), COCOeval box and mask mAP.

torchvision's MaskRCNN on a ResNet trunk with torchvision's FPN (BackboneWithFPN). The reference
arch is torchvision's maskrcnn_resnet50_fpn layout exactly (ResNet-50 v1.5, 256-channel FPN, 1024-d
box head, four 256-channel mask convolutions, 800/1333 resizing); mini shrinks depth, width,
heads and resolution (128x128) within the same family.
"""

from __future__ import annotations

from torch import nn
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor

from t4bench.benchmarks.shared_detection.benchmark import CocoBenchmark
from t4bench.benchmarks.shared_resnet.parts import trunk_from_cfg


class MaskRCNNBenchmark(CocoBenchmark):
    name = "maskrcnn"
    masks = True

    def build_model(self) -> nn.Module:
        arch = self.model_cfg.arch
        trunk = trunk_from_cfg(arch.backbone)
        fpn = int(arch.fpn_channels)
        backbone = BackboneWithFPN(
            trunk,
            {f"layer{i + 1}": str(i) for i in range(len(trunk.out_channels))},
            trunk.out_channels,
            fpn,
        )
        levels = len(trunk.out_channels) + 1  # FPN adds a max-pooled level
        anchors = AnchorGenerator(
            tuple((int(s),) for s in arch.anchor_sizes), (tuple(float(r) for r in arch.aspect_ratios),) * levels
        )
        resolution = 7  # MultiScaleRoIAlign output for the box head
        mask_layers = [int(c) for c in arch.mask_layers]
        return MaskRCNN(
            backbone,
            num_classes=None,
            min_size=int(arch.min_size),
            max_size=int(arch.max_size),
            image_mean=list(arch.image_mean),
            image_std=list(arch.image_std),
            rpn_anchor_generator=anchors,
            rpn_pre_nms_top_n_train=int(arch.rpn_pre_nms_top_n_train),
            rpn_post_nms_top_n_train=int(arch.rpn_post_nms_top_n_train),
            rpn_pre_nms_top_n_test=int(arch.rpn_pre_nms_top_n_test),
            rpn_post_nms_top_n_test=int(arch.rpn_post_nms_top_n_test),
            rpn_batch_size_per_image=int(arch.rpn_batch_size_per_image),
            box_batch_size_per_image=int(arch.box_batch_size_per_image),
            box_detections_per_img=int(arch.box_detections_per_img),
            box_head=TwoMLPHead(fpn * resolution**2, int(arch.representation_size)),
            box_predictor=FastRCNNPredictor(int(arch.representation_size), self.num_classes),
            mask_head=MaskRCNNHeads(fpn, mask_layers, 1),
            mask_predictor=MaskRCNNPredictor(mask_layers[-1], mask_layers[-1], self.num_classes),
        )
