"""SSD's training loss for the whole batch at once (`perf.batched_loss`): the same matching and loss
as torchvision's `SSD.forward` in training, without its loop over images.

Why: torchvision matches anchors to boxes and computes the loss image by image, with a
`torch.where` (a host sync) and a dozen small kernels per image; at batch 32 the H200 profile of
2026-12-06 counted 294 host syncs and ~3,900 kernel launches per step, the GPU busy 12 % of the
step. Here the boxes are padded to one [B, G, 4] tensor and every image is matched and scored in the
same kernels, with no host read of a device value.

The same as torchvision, to rounding: IoU >= `iou_thresh` matches, each box also takes its best
anchor (SSDMatcher), smooth L1 on the encoded boxes of matched anchors, cross-entropy with hard
negatives at `neg_to_pos_ratio`, both over max(1, matched anchors). Left out: torchvision's check
for degenerate boxes (one host sync per image), since t4bench's COCO loader drops them when it
loads the annotations and synthetic boxes are at least 5 % of the image wide and high.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.models.detection.ssd import SSD
from torchvision.ops import box_iou

#: a box for padding rows (never matched: its IoU is set to -1), finite under the box encoder's log
_PAD_BOX = (0.0, 0.0, 1.0, 1.0)


def padded_targets(targets: list[dict[str, Tensor]]) -> tuple[Tensor, Tensor, Tensor]:
    """boxes [B, G, 4] (padding rows `_PAD_BOX`), labels [B, G] (padding 0) and valid [B, G], with
    G the most boxes of any image (at least 1)."""
    count = max([1, *(len(t["boxes"]) for t in targets)])
    first = targets[0]["boxes"]
    boxes = first.new_tensor(_PAD_BOX).expand(len(targets), count, 4).clone()
    labels = torch.zeros(len(targets), count, dtype=torch.int64, device=first.device)
    valid = torch.zeros(len(targets), count, dtype=torch.bool, device=first.device)
    for row, target in enumerate(targets):
        n = len(target["boxes"])
        boxes[row, :n] = target["boxes"]
        labels[row, :n] = target["labels"]
        valid[row, :n] = True
    return boxes, labels, valid


def match(iou: Tensor, valid: Tensor, threshold: float) -> Tensor:
    """Matched box per anchor [B, A] (-1: none) from IoU [B, G, A]: the best box where its IoU
    reaches `threshold`, and each valid box's best anchor forced to it (torchvision's SSDMatcher)."""
    iou = iou.masked_fill(~valid.unsqueeze(-1), -1.0)
    best, matches = iou.max(dim=1)
    matches = matches.masked_fill(best < threshold, -1)
    anchors = iou.size(-1)
    # each valid box's best anchor; padding boxes write into a spare column dropped below
    best_anchor = iou.argmax(dim=2).masked_fill(~valid, anchors)
    boxes = torch.arange(iou.size(1), device=iou.device).expand_as(best_anchor)
    spare = torch.full_like(matches[:, :1], -1)
    return torch.cat([matches, spare], dim=1).scatter(1, best_anchor, boxes)[:, :anchors]


class BatchedLossSSD(SSD):
    """torchvision's SSD whose training forward is `batched_loss` (the same modules and
    state_dict; evaluation unchanged), so DDP and torch.compile wrap it as they wrap SSD."""

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None) -> Any:
        if self.training and targets is not None:
            return batched_loss(self, images, targets)
        return super().forward(images, targets)


def batched_loss(model: SSD, images: list[Tensor], targets: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """`model(images, targets)` in training mode, computed for the batch at once: the same dict
    of losses (bbox_regression, classification)."""
    image_list, transformed = model.transform(images, targets)
    assert transformed is not None
    features: Any = model.backbone(image_list.tensors)
    features = list(features.values()) if isinstance(features, dict) else [features]
    head = model.head(features)
    # every image has the transform's fixed size, so every image has the same anchors
    anchors = model.anchor_generator(image_list, features)[0]
    boxes, labels, valid = padded_targets(transformed)
    batch, count = labels.shape
    iou = box_iou(boxes.reshape(-1, 4), anchors).reshape(batch, count, -1)
    matches = match(iou, valid, model.proposal_matcher.high_threshold)
    foreground = matches >= 0
    index = matches.clamp(min=0)
    matched_boxes = boxes.gather(1, index.unsqueeze(-1).expand(-1, -1, 4))
    target_regression = model.box_coder.encode_single(matched_boxes.reshape(-1, 4), anchors.repeat(batch, 1)).reshape(
        batch, -1, 4
    )
    regression = head["bbox_regression"]
    box_loss = F.smooth_l1_loss(regression, target_regression, reduction="none").sum(-1)
    box_loss = torch.where(foreground, box_loss, torch.zeros((), dtype=box_loss.dtype, device=box_loss.device))
    cls_targets = torch.where(foreground, labels.gather(1, index), torch.zeros_like(index))
    logits = head["cls_logits"]
    cls_loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), cls_targets.reshape(-1), reduction="none")
    cls_loss = cls_loss.view_as(cls_targets)
    # hard negatives: per image the `neg_to_pos_ratio` x positives highest-loss background anchors
    negatives = model.neg_to_pos_ratio * foreground.sum(1, keepdim=True)
    ranked = cls_loss.masked_fill(foreground, -float("inf")).sort(1, descending=True)[1]
    background = ranked.sort(1)[1] < negatives
    matched = foreground.sum().clamp(min=1)
    zero = torch.zeros((), dtype=cls_loss.dtype, device=cls_loss.device)
    classification = torch.where(foreground, cls_loss, zero).sum() + torch.where(background, cls_loss, zero).sum()
    return {"bbox_regression": box_loss.sum() / matched, "classification": classification / matched}
