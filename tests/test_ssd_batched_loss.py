"""`perf.batched_loss` for SSD (t4bench.benchmarks.ssd.loss) on the CPU: the whole-batch loss is
torchvision's per-image loss, values and gradients, on synthetic and real mini batches."""

from __future__ import annotations

import pytest
import torch
from conftest import DATA_ROOT, compose, run_context

from t4bench.benchmark import benchmark_class
from t4bench.benchmarks.ssd.loss import BatchedLossSSD, match, padded_targets


def _bench(batched: bool, *overrides: str):
    switch = f"perf.batched_loss={str(batched).lower()}"
    cfg = compose(["model=ssd", "perf=default", switch, f"paths.data_root={DATA_ROOT}", *overrides])
    return benchmark_class(cfg)(cfg, run_context(data_root=DATA_ROOT))


def _losses_and_grads(bench, batch):
    torch.manual_seed(0)
    model = bench.build_model()
    model.train()
    losses = model(*batch)
    sum(losses.values()).backward()
    return model, {k: v.detach() for k, v in losses.items()}, {n: p.grad for n, p in model.named_parameters()}


def _compare(batch, *overrides: str) -> None:
    plain, batched = _bench(False, *overrides), _bench(True, *overrides)
    model_p, losses_p, grads_p = _losses_and_grads(plain, batch)
    model_b, losses_b, grads_b = _losses_and_grads(batched, batch)
    assert type(model_b) is BatchedLossSSD and type(model_p) is not BatchedLossSSD
    assert model_p.state_dict().keys() == model_b.state_dict().keys()
    assert losses_p.keys() == losses_b.keys()
    for key in losses_p:
        torch.testing.assert_close(losses_b[key], losses_p[key], rtol=1e-5, atol=1e-6)
    for name, grad in grads_p.items():
        torch.testing.assert_close(grads_b[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_synthetic_batch_same_loss_and_gradients() -> None:
    bench = _bench(False, "input=synthetic", "model.batch_size=4")
    _compare(bench.synthetic_batch(), "input=synthetic", "model.batch_size=4")


@pytest.mark.skipif(not (DATA_ROOT / "fashion-coco").is_dir(), reason="fashion-coco not prepared")
def test_real_mini_batch_with_uneven_box_counts_and_an_empty_image() -> None:
    """The first mini batch (images with different numbers of boxes) plus one image without any."""
    bench = _bench(False, "model.batch_size=6")
    images, targets = next(iter(bench.train_batches(1)))
    assert len({len(t["boxes"]) for t in targets}) > 1
    empty = {"boxes": torch.zeros(0, 4), "labels": torch.zeros(0, dtype=torch.int64)}
    _compare(([*images, images[0]], [*targets, empty]), "model.batch_size=6")


def test_match_is_torchvisions_ssd_matcher() -> None:
    """Per image: the same matched box per anchor as torchvision's SSDMatcher, padding never
    matched, a forced best anchor below the threshold kept."""
    from torchvision.models.detection._utils import SSDMatcher
    from torchvision.ops import box_iou

    generator = torch.Generator().manual_seed(3)
    anchors = torch.rand(50, 2, generator=generator) * 80
    anchors = torch.cat([anchors, anchors + 5 + torch.rand(50, 2, generator=generator) * 30], 1)
    targets = []
    for n in (3, 1, 5):
        corner = torch.rand(n, 2, generator=generator) * 80
        boxes = torch.cat([corner, corner + 4 + torch.rand(n, 2, generator=generator) * 30], 1)
        targets.append({"boxes": boxes, "labels": torch.arange(1, n + 1)})
    boxes, labels, valid = padded_targets(targets)
    assert labels[2].tolist() == [1, 2, 3, 4, 5] and labels[1].tolist() == [1, 0, 0, 0, 0]
    assert boxes.shape == (3, 5, 4) and valid.sum(1).tolist() == [3, 1, 5]
    iou = box_iou(boxes.reshape(-1, 4), anchors).reshape(3, 5, -1)
    matches = match(iou, valid, 0.5)
    for row, target in enumerate(targets):
        expected = SSDMatcher(0.5)(box_iou(target["boxes"], anchors))
        assert torch.equal(matches[row], expected)
        assert int(matches[row].max()) < len(target["boxes"])
