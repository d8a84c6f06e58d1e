"""The one-process, several-replica path of the TensorFlow backend (what MirroredStrategy does over
a host's GPUs), run on two logical CPU devices: `python -m tests.tf_mirrored_check <dir>` trains
one epoch of the Keras mini on a small ImageFolder tree under `<dir>` and prints JSON facts.

A separate process because logical devices can only be configured before TensorFlow starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf"


def main(root: Path) -> dict[str, object]:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from t4bench.progress import ProgressReporter
    from t4bench.spec import build_spec
    from t4bench.tf.context import TFContext
    from t4bench.tf.resnet50 import KerasResNet50
    from t4bench.tf.trainer import KerasTrainer

    rng = np.random.default_rng(0)
    for split, count in (("train", 2), ("val", 1)):
        for label in range(10):
            folder = root / split / f"class{label}"
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(count):
                pixels = rng.integers(0, 255, (28, 28, 3), dtype=np.uint8)
                (folder / f"{index}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    model_cfg = OmegaConf.merge(
        OmegaConf.load(CONF / "model" / "resnet50.yaml"),
        OmegaConf.load(CONF / "framework" / "tensorflow.yaml").model,
        {"batch_size": 4, "eval_batch_size": 3, "data": {"path": str(root)}, "schedule": {"decay_end_epochs": 2}},
    )
    # as the runner hands it to the benchmark: the run spec of the composed config
    cfg = build_spec(OmegaConf.create({"model": model_cfg, "max_epochs": 2, "seed": 0, "input": {"synthetic": False}}))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    ctx = TFContext(strategy, "fp32", 0, 1, 0, root, {"bn_momentum": 0.9, "cache_decoded": True})
    bench = KerasResNet50(cfg, ctx)
    trainer = KerasTrainer(bench, cfg, ctx)
    batches = bench.train_batches(1)
    stats = trainer.train_steps(iter(batches), batches.samples, ProgressReporter("off"), "samples/s")
    quality = trainer.evaluate()
    copies_equal = all(
        np.array_equal(
            *[t.numpy() for t in strategy.experimental_local_results(strategy.run(lambda v=v: tf.identity(v.value)))]
        )
        for v in trainer.model.variables
    )
    return {
        "replicas": ctx.world_size,
        "global_batch": trainer.global_batch,
        "step_samples": list(batches.samples),
        "samples_seen": trainer.samples_seen,
        "train_loss": stats["train_loss"],
        "top1": quality["top1"],
        "copies_equal": copies_equal,
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
