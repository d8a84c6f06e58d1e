"""The reference-size vision models are the MLPerf v0.5 architectures: ResNet-50 v1.5 and Mask R-CNN
R50-FPN exactly as torchvision builds them, SSD300-ResNet34 with its 8,732 default boxes."""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision
from conftest import run_context
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf"


def reference_cfg(name: str):  # type: ignore[no-untyped-def]
    cfg = OmegaConf.create({"paths": {"data_root": "unused"}, "input": {"synthetic": True}})
    cfg.model = OmegaConf.merge(
        OmegaConf.load(CONF / "model" / f"{name}.yaml"), OmegaConf.load(CONF / "model_scale" / f"{name}_reference.yaml")
    )
    return cfg


def build(name: str, bench_cls):  # type: ignore[no-untyped-def]
    return bench_cls(reference_cfg(name), run_context(data_root=Path("unused"))).build_model()


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_resnet50_reference_is_torchvision_resnet50() -> None:
    from t4bench.benchmarks.resnet50.model import ResNet50Benchmark

    ours = build("resnet50", ResNet50Benchmark)
    theirs = torchvision.models.resnet50(weights=None)
    assert parameter_count(ours) == parameter_count(theirs) == 25_557_032
    # v1.5: the stride-2 of a downsampling Bottleneck sits in its 3x3 convolution
    assert ours.trunk.layer2[0].conv2.stride == (2, 2) and ours.trunk.layer2[0].conv1.stride == (1, 1)


def test_maskrcnn_reference_is_torchvision_maskrcnn_r50_fpn() -> None:
    from t4bench.benchmarks.maskrcnn.model import MaskRCNNBenchmark

    ours = build("maskrcnn", MaskRCNNBenchmark)
    theirs = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=81)
    assert parameter_count(ours) == parameter_count(theirs)
    assert ours.transform.min_size == (800,) and ours.transform.max_size == 1333


def test_ssd_reference_has_mlperf_feature_maps_and_8732_boxes() -> None:
    from t4bench.benchmarks.ssd.model import SSDBenchmark

    model = build("ssd", SSDBenchmark).eval()
    with torch.no_grad():
        features = list(model.backbone(torch.zeros(1, 3, 300, 300)).values())
    assert [tuple(f.shape[1:]) for f in features] == [
        (256, 38, 38),
        (512, 19, 19),
        (512, 10, 10),
        (256, 5, 5),
        (256, 3, 3),
        (256, 1, 1),
    ]
    assert model.anchor_generator.num_anchors_per_location() == [4, 6, 6, 6, 4, 4]
    sizes = [f.shape[-2] * f.shape[-1] for f in features]
    assert sum(s * n for s, n in zip(sizes, model.anchor_generator.num_anchors_per_location(), strict=True)) == 8732
