"""ResNet v1.5 in Keras: bottleneck blocks with the stride on the 3x3 convolution (v1 strides on
the first 1x1), at any depth and width, from the same `model.arch.backbone` node as the PyTorch
trunk (`t4bench.benchmarks.shared_resnet.parts`). With layers [3, 4, 6, 3], widths [64, 128, 256, 512]
and the imagenet stem it is ResNet-50 (25,557,032 parameters, as torchvision's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import keras
from keras import layers

#: bottleneck output channels = width x 4
EXPANSION = 4


def _conv(filters: int, kernel: int, stride: int, name: str) -> layers.Conv2D:
    # the TF reference's variance-scaling initialiser (He normal, fan-out as torchvision's init)
    return layers.Conv2D(
        filters,
        kernel,
        strides=stride,
        padding="same",
        use_bias=False,
        name=name,
        kernel_initializer=keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal"),
    )


def _bn(name: str, momentum: float, zero_gamma: bool = False) -> layers.BatchNormalization:
    return layers.BatchNormalization(
        momentum=momentum,
        epsilon=1e-5,
        name=name,
        gamma_initializer="zeros" if zero_gamma else "ones",
    )


def _bottleneck(x: Any, width: int, stride: int, name: str, bn_momentum: float) -> Any:
    out_channels = width * EXPANSION
    shortcut = x
    if stride != 1 or x.shape[-1] != out_channels:
        shortcut = _conv(out_channels, 1, stride, f"{name}_down_conv")(x)
        shortcut = _bn(f"{name}_down_bn", bn_momentum)(shortcut)
    y = _conv(width, 1, 1, f"{name}_conv1")(x)
    y = layers.ReLU(name=f"{name}_relu1")(_bn(f"{name}_bn1", bn_momentum)(y))
    # v1.5: the stride sits on the 3x3 convolution, not on the first 1x1
    y = _conv(width, 3, stride, f"{name}_conv2")(y)
    y = layers.ReLU(name=f"{name}_relu2")(_bn(f"{name}_bn2", bn_momentum)(y))
    y = _conv(out_channels, 1, 1, f"{name}_conv3")(y)
    y = _bn(f"{name}_bn3", bn_momentum)(y)
    return layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([y, shortcut]))


def build_resnet(
    image_size: int,
    num_classes: int,
    layer_counts: Sequence[int],
    widths: Sequence[int],
    strides: Sequence[int],
    stem: str = "imagenet",
    stem_width: int = 64,
    bn_momentum: float = 0.9,
) -> keras.Model:
    """NHWC input in [0, 1]-normalised float; logits out (float32 under a mixed policy)."""
    if not len(layer_counts) == len(widths) == len(strides):
        raise ValueError("layers, widths and strides need one entry per stage")
    inputs = keras.Input((image_size, image_size, 3), name="images")
    if stem == "imagenet":  # 7x7/2 convolution and 3x3/2 max-pool: stride 4
        x = _conv(stem_width, 7, 2, "stem_conv")(inputs)
        x = layers.ReLU(name="stem_relu")(_bn("stem_bn", bn_momentum)(x))
        x = layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    elif stem == "small":  # 3x3/1 convolution, no pool, for 28-32 pixel inputs
        x = _conv(stem_width, 3, 1, "stem_conv")(inputs)
        x = layers.ReLU(name="stem_relu")(_bn("stem_bn", bn_momentum)(x))
    else:
        raise ValueError(f"unknown stem {stem!r}")
    for stage, (count, width, stride) in enumerate(zip(layer_counts, widths, strides, strict=True), start=1):
        for index in range(count):
            x = _bottleneck(x, width, stride if index == 0 else 1, f"stage{stage}_block{index + 1}", bn_momentum)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    # logits in float32 whatever the compute policy: softmax and the loss need the range
    logits = layers.Dense(num_classes, name="fc", dtype="float32")(x)
    return keras.Model(inputs, logits, name="resnet_v1_5")


def build_from_config(model_cfg: Mapping[str, Any], bn_momentum: float) -> keras.Model:
    """From `cfg.model` (arch.backbone, arch.num_classes, data.image_size)."""
    backbone = model_cfg["arch"]["backbone"]
    if str(backbone["block"]) != "bottleneck":
        raise ValueError(f"the Keras ResNet has bottleneck blocks only, got block={backbone['block']!r}")
    strides = backbone.get("strides") or [1] + [2] * (len(backbone["layers"]) - 1)
    return build_resnet(
        image_size=int(model_cfg["data"]["image_size"]),
        num_classes=int(model_cfg["arch"]["num_classes"]),
        layer_counts=[int(n) for n in backbone["layers"]],
        widths=[int(w) for w in backbone["widths"]],
        strides=[int(s) for s in strides],
        stem=str(backbone.get("stem", "imagenet")),
        stem_width=int(backbone.get("stem_width", 64)),
        bn_momentum=bn_momentum,
    )


def decay_mask(model: keras.Model) -> list[bool]:
    """Per trainable variable: whether weight decay applies (the MLPerf reference excludes the
    batch-norm parameters; biases here are only the classifier's, also excluded)."""
    return [len(v.shape) > 1 for v in model.trainable_variables]
