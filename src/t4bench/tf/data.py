"""tf.data input for the Keras ResNet over the ImageFolder layout the PyTorch benchmark reads
(`<root>/{train,val}/<class>/<image>`, classes in sorted order, as torchvision's ImageFolder).

Sharding and order follow torch's DistributedSampler, so 1 or N ranks see the same epochs: one
permutation of the whole set per (seed, epoch), padded with its first items to a multiple of the
rank count, rank r taking items r, r+N, ... Augmentation is stateless, keyed by (seed, epoch,
item), so a run repeats exactly. Evaluation shards the val set the same way, with padded items
weighted 0 so every image counts once.

Small sets whose images share one size (the mini's 28x28 PNGs) are decoded once at init and held
in memory (`tensorflow.cache_decoded`); ImageNet is decoded from its files every epoch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from t4bench.errors import DatasetMissingError

IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png", ".bmp", ".ppm", ".webp", ".tif", ".tiff", ".pgm"}
#: tf.io.decode_image reads these; the others (ppm, webp, tif, pgm) need PIL, which tf.data lacks
TF_DECODABLE = {".jpeg", ".jpg", ".png", ".bmp", ".gif"}


@dataclass(frozen=True)
class ImageFolder:
    paths: list[str]
    labels: np.ndarray
    classes: list[str]

    def __len__(self) -> int:
        return len(self.paths)


def list_image_folder(split_dir: Path) -> ImageFolder:
    """Every image under `split_dir/<class>/`, class folders sorted, files sorted in each."""
    classes = sorted(d.name for d in split_dir.iterdir() if d.is_dir()) if split_dir.is_dir() else []
    paths: list[str] = []
    labels: list[int] = []
    for index, name in enumerate(classes):
        for file in sorted((split_dir / name).iterdir()):
            if file.suffix.lower() in IMAGE_SUFFIXES:
                if file.suffix.lower() not in TF_DECODABLE:
                    raise DatasetMissingError(f"{file}: tf.data decodes JPEG, PNG, BMP and GIF only")
                paths.append(str(file))
                labels.append(index)
    if not paths:
        raise DatasetMissingError(
            f"no images in {split_dir}/<class>/<image>; expected the ImageFolder layout "
            f"{split_dir.parent}/train/<class>/*.JPEG and {split_dir.parent}/val/<class>/*.JPEG"
        )
    return ImageFolder(paths, np.asarray(labels, dtype=np.int32), classes)


def shard_indices(size: int, rank: int, world: int, order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights) of this rank's shard: DistributedSampler's padding and striding; the
    padded repeats get weight 0 (evaluation ignores them, training uses them as torch does)."""
    order = np.arange(size) if order is None else order
    total = -(-size // world) * world
    padded = np.concatenate([order, order[: total - size]]) if total > size else order
    weights = np.concatenate([np.ones(size, np.float32), np.zeros(total - size, np.float32)])
    return padded[rank::world], weights[rank::world]


def _decode(path: tf.Tensor) -> tf.Tensor:
    image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return image


def decode_all(paths: Sequence[str]) -> np.ndarray:
    """uint8 [N, H, W, 3] of same-size images (raises if sizes differ)."""
    dataset = tf.data.Dataset.from_tensor_slices(list(paths)).map(_decode, num_parallel_calls=tf.data.AUTOTUNE)
    images = [image.numpy() for image in dataset]
    shapes = {image.shape for image in images}
    if len(shapes) != 1:
        raise DatasetMissingError(f"tensorflow.cache_decoded needs images of one size, found {sorted(shapes)[:3]}")
    return np.stack(images)


class ImagePipeline:
    """Batches of (normalised NHWC float32 images, int32 labels, float32 weights) for one rank."""

    def __init__(self, folder: ImageFolder, data_cfg: Mapping[str, Any], cache_decoded: bool) -> None:
        self.folder = folder
        self.size = int(data_cfg["image_size"])
        self.augment = str(data_cfg["augment"])
        if self.augment not in ("small", "imagenet"):
            raise ValueError(f"unknown augment {self.augment!r}")
        self.padding = int(data_cfg.get("crop_padding", 0) or 0)
        self.mean = tf.constant(list(data_cfg["mean"]), tf.float32)
        self.std = tf.constant(list(data_cfg["std"]), tf.float32)
        self.images = tf.constant(decode_all(folder.paths)) if cache_decoded else None
        self.paths = tf.constant(folder.paths)
        self.labels = tf.constant(folder.labels)

    def _image(self, index: tf.Tensor) -> tf.Tensor:
        return tf.gather(self.images, index) if self.images is not None else _decode(tf.gather(self.paths, index))

    def _normalise(self, image: tf.Tensor) -> tf.Tensor:
        return (tf.cast(image, tf.float32) / 255.0 - self.mean) / self.std

    def _train_view(self, image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        crop_seed, flip_seed = seed, seed + tf.constant([0, 1], tf.int64)
        if self.augment == "small":  # pad-and-crop + flip (torchvision RandomCrop(padding), black fill)
            pad = self.padding
            image = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]])
            image = tf.image.stateless_random_crop(image, [self.size, self.size, 3], seed=crop_seed)
        else:  # RandomResizedCrop: 8-100% of the area, aspect 3/4-4/3, resized to size x size
            begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
                tf.shape(image),
                tf.zeros([1, 0, 4]),
                seed=crop_seed,
                min_object_covered=0.0,
                aspect_ratio_range=(3 / 4, 4 / 3),
                area_range=(0.08, 1.0),
                max_attempts=10,
                use_image_if_no_bounding_boxes=True,
            )
            image = tf.image.resize(tf.slice(image, begin, extent), [self.size, self.size], antialias=True)
        return tf.image.stateless_random_flip_left_right(image, seed=flip_seed)

    def _eval_view(self, image: tf.Tensor) -> tf.Tensor:
        if self.augment == "small":
            return image
        # resize the shorter side to size x 256/224, then the central size x size
        short = round(self.size * 256 / 224)
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = short / tf.reduce_min(shape)
        image = tf.image.resize(image, tf.cast(tf.round(shape * scale), tf.int32), antialias=True)
        return tf.image.resize_with_crop_or_pad(image, self.size, self.size)

    def train(self, batch_size: int, seed: int, epoch: int, replicas: Sequence[int], world: int) -> tf.data.Dataset:
        """This worker's batches for its `replicas` (global replica indices of `world`), in
        step-major, replica-minor order: what tf.distribute hands to the worker's replicas."""
        order = np.random.default_rng([seed, epoch]).permutation(len(self.folder))

        def load(index: tf.Tensor, weight: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            item_seed = tf.stack([tf.constant(seed * 100_003 + epoch, tf.int64), 2 * tf.cast(index, tf.int64)])
            image = self._normalise(self._train_view(self._image(index), item_seed))
            return image, tf.gather(self.labels, index), tf.constant(1.0)  # torch trains on the repeats too

        return self._interleaved(order, replicas, world, load, batch_size)

    def evaluation(self, batch_size: int, replicas: Sequence[int], world: int) -> tf.data.Dataset:
        def load(index: tf.Tensor, weight: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            return self._normalise(self._eval_view(self._image(index))), tf.gather(self.labels, index), weight

        return self._interleaved(None, replicas, world, load, batch_size)

    def _interleaved(
        self, order: np.ndarray | None, replicas: Sequence[int], world: int, load: Any, batch_size: int
    ) -> tf.data.Dataset:
        """One DistributedSampler shard per replica, batched; step k yields batch k of each
        replica in turn. Shards are equal, so no replica ever gets an empty batch (a partial last
        step is partial on every replica, as with DDP)."""
        per_replica = []
        for replica in replicas:
            indices, weights = shard_indices(len(self.folder), replica, world, order)
            dataset = tf.data.Dataset.from_tensor_slices((indices, weights))
            per_replica.append(dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size))
        if len(per_replica) == 1:
            return per_replica[0].prefetch(tf.data.AUTOTUNE)

        def in_turn(*batches: Any) -> tf.data.Dataset:
            steps = [tf.data.Dataset.from_tensors(batch) for batch in batches]
            return functools.reduce(lambda a, b: a.concatenate(b), steps)

        return tf.data.Dataset.zip(tuple(per_replica)).flat_map(in_turn).prefetch(tf.data.AUTOTUNE)


def synthetic_batch(batch_size: int, image_size: int, num_classes: int, seed: int) -> tuple[tf.Tensor, ...]:
    """One batch of the real shapes (normal images, uniform labels), for `input=synthetic`."""
    images = tf.random.stateless_normal([batch_size, image_size, image_size, 3], seed=[seed, 11])
    labels = tf.random.stateless_uniform([batch_size], seed=[seed, 12], maxval=num_classes, dtype=tf.int32)
    return images, labels, tf.ones([batch_size])
