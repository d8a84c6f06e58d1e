"""What a TensorFlow benchmark may know about the run it is part of (the counterpart of
`t4bench.pytorch.context.RunContext`): the tf.distribute strategy, precision, ranks, seed, data, and the
`tensorflow:` settings of conf/framework/tensorflow.yaml."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf


@dataclass(frozen=True)
class TFContext:
    strategy: tf.distribute.Strategy
    #: "fp32", "bf16" (mixed_bfloat16) or "fp16" (mixed_float16 + loss scaling)
    precision: str
    #: this worker (process) and the number of workers; each worker feeds one input pipeline
    rank: int
    workers: int
    #: the run's `seed`: initial weights (Keras' global generator, seeded by the rank session)
    seed: int
    data_root: Path
    #: cfg.tensorflow (xla, bn_momentum, cache_decoded, ...), per-scale values already picked
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: the run's `data_seed` (null: `seed`), read through `sampling_seed`
    data_seed: int | None = None

    @property
    def sampling_seed(self) -> int:
        """The seed of the data order, augmentation and synthetic batches."""
        return self.seed if self.data_seed is None else self.data_seed

    @property
    def world_size(self) -> int:
        """Replicas in sync (all workers' devices): the global batch is batch_size x this."""
        return int(self.strategy.num_replicas_in_sync)

    @property
    def replicas_per_worker(self) -> int:
        return self.world_size // self.workers

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def distribute(self, make: Callable[[], tf.data.Dataset]) -> Any:
        """This worker's dataset of per-replica batches, spread over its replicas."""
        return self.strategy.distribute_datasets_from_function(lambda _: make())

    @property
    def replicas(self) -> list[int]:
        """Global indices of this worker's replicas: each reads one shard of the data."""
        first = self.rank * self.replicas_per_worker
        return list(range(first, first + self.replicas_per_worker))

    def step_samples(self, dataset_size: int, batch_size: int) -> list[int]:
        """Global samples in each step of an epoch of `dataset_size` items: every replica holds an
        equal (DistributedSampler-padded) shard in batches of `batch_size`; the last step may be
        partial on all of them."""
        shard = -(-dataset_size // self.world_size)
        return [min(batch_size, shard - start) * self.world_size for start in range(0, shard, batch_size)]


@dataclass
class StepBatches:
    """An epoch's distributed batches with the global sample count of each step (sized, as the
    Benchmark contract asks: equal on every worker)."""

    batches: Any
    samples: Sequence[int]

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches)
