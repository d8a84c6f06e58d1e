"""ResNet-50 v1.5 image classification in Keras (`model=resnet50 framework=tensorflow`), top-1.

The same data (ImageFolder layout), sizes (`model.arch`), targets and metrics as the PyTorch
benchmark (`t4bench.benchmarks.resnet50.model`), on the Benchmark contract of `t4bench.benchmark` with
TensorFlow objects: Keras model, tf.data batches, tf tensors. TensorFlow is imported in the methods,
not at module load: the runner resolves this class (and checks the data) before any rank starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from t4bench import baselines
from t4bench.benchmark import Benchmark
from t4bench.errors import DatasetMissingError
from t4bench.spec import RunSpec

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from t4bench.tf.context import StepBatches, TFContext

IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png", ".bmp", ".gif"}


def check_image_folder(split_dir: Path) -> None:
    classes = [d for d in split_dir.iterdir() if d.is_dir()] if split_dir.is_dir() else []
    if not classes or not any(f.suffix.lower() in IMAGE_SUFFIXES for d in classes for f in d.iterdir()):
        raise DatasetMissingError(
            f"no images in {split_dir}/<class>/<image>; expected the ImageFolder layout "
            f"{split_dir.parent}/train/<class>/*.JPEG and {split_dir.parent}/val/<class>/*.JPEG"
        )


class KerasResNet50(Benchmark["TFContext"]):
    name = "resnet50"
    framework = "tensorflow"
    throughput_unit = "samples/s"

    def __init__(self, cfg: RunSpec, ctx: TFContext) -> None:
        super().__init__(cfg, ctx)
        self.tf_ctx = ctx
        self.model_cfg = cfg.model
        self._eval_counts: Any = None
        if self.synthetic:
            return
        from t4bench.tf import data

        root = Path(str(self.model_cfg.data.path))
        train, val = data.list_image_folder(root / "train"), data.list_image_folder(root / "val")
        if train.classes != val.classes:
            raise DatasetMissingError(f"{root}: train/ and val/ hold different class folders")
        if len(train.classes) != int(self.model_cfg.arch.num_classes):
            raise DatasetMissingError(
                f"{root}/train has {len(train.classes)} class folders, "
                f"model.arch.num_classes is {self.model_cfg.arch.num_classes}"
            )
        cache = bool(ctx.settings.get("cache_decoded", False))
        self.train_pipeline = data.ImagePipeline(train, self.model_cfg.data, cache)
        self.val_pipeline = data.ImagePipeline(val, self.model_cfg.data, cache)

    @classmethod
    def check_inputs(cls, cfg: RunSpec) -> None:
        root = Path(str(cfg.model.data.path))
        for split in ("train", "val"):
            check_image_folder(root / split)

    def dataset_train_size(self) -> int:
        return len(self.train_pipeline.folder)

    def dataset_eval_size(self) -> int:
        return len(self.val_pipeline.folder)

    trivial_baseline = "majority class"

    def trivial_quality(self) -> dict[str, float]:
        if self.synthetic:
            return {}
        return baselines.majority_class_accuracy(self.train_pipeline.folder.labels, self.val_pipeline.folder.labels)

    def build_model(self) -> keras.Model:
        from t4bench.tf import resnet

        # the run spec's model section keeps its untyped keys (arch, ...) in `rest`
        return resnet.build_from_config(self.model_cfg.rest, float(self.tf_ctx.settings.get("bn_momentum", 0.9)))

    def param_groups(self, model: keras.Model) -> list[dict[str, Any]]:
        """MLPerf ResNet: no weight decay on batch-norm parameters and biases."""
        decay = [v for v in model.trainable_variables if len(v.shape) > 1]
        no_decay = [v for v in model.trainable_variables if len(v.shape) <= 1]
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    def train_batches(self, epoch: int) -> StepBatches:
        from t4bench.tf.context import StepBatches

        ctx, batch = self.tf_ctx, int(self.model_cfg.batch_size)
        dataset = ctx.distribute(
            lambda: self.train_pipeline.train(batch, ctx.sampling_seed, epoch, ctx.replicas, ctx.world_size)
        )
        return StepBatches(dataset, ctx.step_samples(self.dataset_train_size(), batch))

    def loss(self, model: keras.Model, batch: Any) -> tuple[tf.Tensor, tf.Tensor]:
        """Mean softmax cross entropy with label smoothing over this replica's batch."""
        import tensorflow as tf

        images, labels, _ = batch
        classes = int(self.model_cfg.arch.num_classes)
        smoothing = float(self.model_cfg.get("label_smoothing", 0.0))
        logits = tf.cast(model(images, training=True), tf.float32)
        targets = tf.one_hot(labels, classes) * (1.0 - smoothing) + smoothing / classes
        per_example = tf.nn.softmax_cross_entropy_with_logits(targets, logits)
        count = tf.size(labels)
        # a replica left without items by an uneven last batch contributes 0, not NaN
        return tf.reduce_sum(per_example) / tf.maximum(tf.cast(count, tf.float32), 1.0), count

    def evaluate(self, model: keras.Model) -> Mapping[str, float]:
        """Top-1 over the whole val set, sharded over the workers (every image counted once);
        every worker gets the result."""

        ctx = self.tf_ctx
        batches = ctx.distribute(
            lambda: self.val_pipeline.evaluation(int(self.model_cfg.eval_batch_size), ctx.replicas, ctx.world_size)
        )
        if self._eval_counts is None:  # traced once per run, not once per evaluation
            self._eval_counts = _eval_counts_fn(ctx.strategy, model)
        counts = self._eval_counts
        correct = total = 0.0
        for batch in batches:
            step = counts(batch).numpy()
            correct, total = correct + float(step[0]), total + float(step[1])
        return {"top1": correct / max(total, 1.0)}

    def synthetic_batch(self) -> Any:
        from t4bench.tf.data import synthetic_batch

        return synthetic_batch(
            int(self.model_cfg.batch_size),
            int(self.model_cfg.data.image_size),
            int(self.model_cfg.arch.num_classes),
            self.tf_ctx.sampling_seed,
        )


def _eval_counts_fn(strategy: tf.distribute.Strategy, model: keras.Model) -> Any:
    """A tf.function: one distributed val batch -> [correct, counted] summed over the replicas."""
    import tensorflow as tf

    # plain tensor code: no AutoGraph conversion (it cannot read closures defined in a function)
    @tf.autograph.experimental.do_not_convert
    def replica_counts(images: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
        predicted = tf.argmax(model(images, training=False), axis=1, output_type=tf.int32)
        correct = tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32) * weights)
        return tf.stack([correct, tf.reduce_sum(weights)])

    @tf.function(autograph=False)
    def counts(batch: Any) -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_counts, args=batch), axis=None)

    return counts
