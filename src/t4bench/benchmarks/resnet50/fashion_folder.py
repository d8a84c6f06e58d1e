"""Fashion-MNIST as a class-balanced ImageFolder tree, so the ResNet-50 mini run uses the same
loader as ImageNet:

    <data_root>/fashion-mnist-folder/train/<class>/<index>.png   (TRAIN_PER_CLASS per class)
    <data_root>/fashion-mnist-folder/val/<class>/<index>.png     (VAL_PER_CLASS per class)

Train images come from the Fashion-MNIST train split, val images from its test split, both drawn
with a fixed seed; `<index>` is the image's index in its source split. 28x28 grayscale PNGs.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from t4bench.benchmarks.shared_vision import fashion_mnist

NAME = "fashion-mnist-folder"
TRAIN_PER_CLASS = 800
VAL_PER_CLASS = 200
SEED = 20190601


def prepare(data_root: Path) -> None:
    """Write the tree under `data_root/fashion-mnist-folder` unless it is already complete."""
    params = {"train_per_class": TRAIN_PER_CLASS, "val_per_class": VAL_PER_CLASS, "seed": SEED}

    def build(out: Path) -> None:
        for split, source, per_class in (
            ("train", "train", TRAIN_PER_CLASS),
            ("val", "test", VAL_PER_CLASS),
        ):
            images, labels = fashion_mnist.load(source)
            for name in fashion_mnist.CLASSES:
                (out / split / name).mkdir(parents=True)
            for index in fashion_mnist.balanced_indices(labels, per_class, SEED):
                name = fashion_mnist.CLASSES[labels[index]]
                Image.fromarray(images[index]).save(out / split / name / f"{index:05d}.png")

    fashion_mnist.write_once(Path(data_root) / NAME, params, build)


if __name__ == "__main__":
    import sys

    prepare(Path(sys.argv[1] if len(sys.argv) > 1 else "data"))
