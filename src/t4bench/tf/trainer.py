"""Model, optimizer, precision and the distributed step functions of one TensorFlow run.

The MLPerf v0.5 TensorFlow reference's recipe: SGD with momentum, L2 weight decay added to the
loss for the variables the benchmark's `param_groups` decay (ResNet: all but the batch-norm
parameters and biases), the benchmark's loss (ResNet: softmax cross entropy with label
smoothing), the LR scaled linearly with the global batch. Gradients are summed
over replicas by the Keras optimizer (`tf.distribute` convention), so each replica's loss is
divided by the replica count: the update is the global-batch mean, as with DDP.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from t4bench.benchmark import Benchmark
from t4bench.progress import ProgressReporter
from t4bench.schedule import base_lr
from t4bench.spec import RunSpec
from t4bench.tf import schedule as schedules
from t4bench.tf.context import TFContext
from t4bench.tf.divergence import DivergenceGuard
from t4bench.tracking.epoch_metrics import train_stats

#: how often (in steps) the loss is read back for the progress bar (a read forces a device sync)
LOSS_READ_INTERVAL = 20
#: hw.precision -> Keras dtype policy (mixed: float32 variables, low-precision compute)
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def build_optimizer(optimizer_cfg: Any, lr: float, precision: str) -> keras.optimizers.Optimizer:
    name = str(optimizer_cfg.name).lower()
    if name != "sgd":
        raise ValueError(f"the TensorFlow ResNet trains with optimizer.name=sgd (the reference's), got {name!r}")
    optimizer: keras.optimizers.Optimizer = keras.optimizers.SGD(
        learning_rate=lr,
        momentum=float(optimizer_cfg.get("momentum", 0.0)),
        nesterov=bool(optimizer_cfg.get("nesterov", False)),
    )
    if precision == "fp16":  # dynamic loss scaling, as torch's GradScaler
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


class KerasTrainer:
    """One run's model and optimizer; the step counters are global (all replicas)."""

    def __init__(self, bench: Benchmark, cfg: RunSpec, ctx: TFContext) -> None:
        self.bench = bench
        self.strategy = ctx.strategy
        self.replicas = ctx.world_size
        keras.mixed_precision.set_dtype_policy(POLICIES[ctx.precision])
        model_cfg = cfg.model
        self.global_batch = int(model_cfg.batch_size) * self.replicas
        self.base_lr = base_lr(model_cfg.optimizer, self.global_batch, int(model_cfg.schedule.ref_batch_size))
        self.schedule = schedules.from_config(model_cfg.schedule, bench.train_size, int(cfg.max_epochs))
        weight_decay = float(model_cfg.optimizer.get("weight_decay", 0.0))
        with self.strategy.scope():
            # a Keras model (the contract's annotation names torch's Module)
            self.model: keras.Model = bench.build_model()
            self.optimizer = build_optimizer(model_cfg.optimizer, self.base_lr, ctx.precision)
            self.optimizer.build(self.model.trainable_variables)
        # (variable, its weight decay) for every decayed variable of the benchmark's groups
        self._decayed = [
            (variable, float(group.get("weight_decay", weight_decay)))
            for group in bench.param_groups(self.model)
            for variable in group["params"]
            if float(group.get("weight_decay", weight_decay)) > 0
        ]
        self._grads = tf.function(self._forward_backward, jit_compile=bool(ctx.settings.get("xla", False)))
        self._train_step = tf.function(self._distributed_train_step)
        self._gather_max = tf.function(self._distributed_gather_max)
        self._gather = tf.function(self._distributed_gather)
        self._sync_statistics = tf.function(self._distributed_sync_statistics)
        self.workers = ctx.workers
        self.guard = DivergenceGuard(cfg.get("divergence"))
        self._first_losses: list[float] = []
        self.samples_seen = 0
        self.steps = 0

    # ---------------------------------------------------------------------------------------
    # step functions (traced once)

    def _forward_backward(self, batch: Sequence[tf.Tensor]) -> tuple[tf.Tensor, list[tf.Tensor]]:
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            loss, _ = self.bench.loss(self.model, batch)
            # L2 added to the loss as the TF reference does; d/dw of wd * ||w||^2 / 2 is wd * w,
            # torch SGD's (coupled) weight decay
            l2 = tf.add_n([decay * tf.nn.l2_loss(v) for v, decay in self._decayed]) if self._decayed else 0.0
            scaled = self.optimizer.scale_loss((loss + l2) / self.replicas)
        return loss, tape.gradient(scaled, variables)

    def _replica_train_step(self, *batch: tf.Tensor) -> tf.Tensor:
        loss, grads = self._grads(batch)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        return loss

    def _distributed_train_step(self, batch: Sequence[Any]) -> tf.Tensor:
        per_replica = self.strategy.run(self._replica_train_step, args=tuple(batch))
        return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    def _distributed_sync_statistics(self) -> None:
        variables = self.model.non_trainable_variables
        # read each replica's own copy in replica context; average and assign in cross-replica
        # context (a replica-context assign of these aggregation-NONE variables is refused)
        per_replica = self.strategy.run(lambda: [tf.identity(v.value) for v in variables])
        for variable, copies in zip(variables, per_replica, strict=True):
            variable.assign(self.strategy.reduce(tf.distribute.ReduceOp.MEAN, copies, axis=None))

    def _distributed_gather_max(self, local: tf.Tensor) -> tf.Tensor:
        # tf.distribute reduces by SUM or MEAN only: gather every replica's row, take the max
        gathered = self.strategy.gather(self.strategy.run(tf.identity, args=(local,)), axis=0)
        return tf.reduce_max(gathered, axis=0)

    # ---------------------------------------------------------------------------------------
    # called by the loop

    def current_lr(self) -> float:
        return self.base_lr * self.schedule.factor(self.samples_seen, self.steps)

    def train_steps(
        self, batches: Iterator[Any], step_samples: Sequence[int], progress: ProgressReporter, unit: str
    ) -> dict[str, float]:
        """Train `len(step_samples)` steps from the distributed `batches` (global sizes in
        `step_samples`); return the global train_loss, throughput and timing (every worker gets
        the same numbers). Raises `Diverged` when a loss read back breaks the divergence rule."""
        losses: list[tf.Tensor] = []
        started = time.perf_counter()
        done = 0
        for samples in step_samples:
            self.optimizer.learning_rate = self.current_lr()
            losses.append(self._train_step(next(batches)))
            self.steps += 1
            self.samples_seen += samples
            done += samples
            if self.steps <= self.guard.reference_steps:  # the rule's reference: the first losses
                self._first_losses.append(float(losses[-1]))
                self.guard.set_reference(self._first_losses)
            if len(losses) % LOSS_READ_INTERVAL == 0:  # a read waits for the device: never each step
                loss = float(losses[-1])
                self.guard.check(loss)
                progress.batch_done(loss, done / (time.perf_counter() - started), unit, steps=len(losses))
        mean_loss = float(tf.reduce_mean(tf.stack(losses))) if losses else float("nan")  # one sync
        self.guard.check(mean_loss)
        if self.replicas > 1:
            # each replica moved its batch-norm statistics with its own batches (as DDP without
            # SyncBatchNorm); their mean makes the copies one model again before evaluation
            self._sync_statistics()
        (slowest,) = self.all_reduce_max([time.perf_counter() - started])
        return train_stats(mean_loss, done, slowest, self.current_lr())

    def evaluate(self) -> dict[str, float]:
        """The benchmark's quality metrics (every worker gets the same)."""
        return {k: float(v) for k, v in self.bench.evaluate(self.model).items()}

    def weights_digests(self) -> list[str]:
        """SHA-256 of every worker's local copy of the weights (trainable and batch-norm moving
        statistics), in worker order: data parallelism must leave them identical."""
        local = b"".join(np.ascontiguousarray(w).tobytes() for w in self.model.get_weights())
        row = tf.constant([list(hashlib.sha256(local).digest())], tf.int32)
        rows = self._gather(row).numpy()[:: self.replicas // self.workers]  # one row per worker
        return [bytes(int(b) for b in r).hex() for r in rows]

    def _distributed_gather(self, local: tf.Tensor) -> tf.Tensor:
        return self.strategy.gather(self.strategy.run(tf.identity, args=(local,)), axis=0)

    def all_reduce_max(self, values: Sequence[float]) -> list[float]:
        """Host values (same length on every worker) -> their maximum over workers."""
        local = tf.constant([[float(v) for v in values]], tf.float64)
        return [float(v) for v in self._gather_max(local).numpy()]
