"""What a benchmark may know about the run it is part of: device, precision, rank, data, seeds."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


@dataclass(frozen=True)
class RunContext:
    device: torch.device
    #: "fp32", "fp16" (autocast + GradScaler) or "bf16" (autocast)
    precision: str
    rank: int
    world_size: int
    local_rank: int
    #: the run's `seed`: model initialisation and dropout (seeded globally by the rank session)
    seed: int
    data_root: Path
    channels_last: bool = False
    num_workers: int = 0
    #: the run's `data_seed` (null: `seed`), read through `sampling_seed`
    data_seed: int | None = None

    @property
    def sampling_seed(self) -> int:
        """The seed of the data order and sampling; per-rank streams come from it via `rank_seed()`."""
        return self.seed if self.data_seed is None else self.data_seed

    @property
    def worker_start_method(self) -> str | None:
        """fork for DataLoader workers where the OS has it: PyTorch's own default on Linux, named
        here because a process started by a joblib (loky) launcher makes loky's start method the
        default, and DataLoader workers fail to start with it ('Process' has no attribute 'env')."""
        if self.num_workers > 0 and "fork" in multiprocessing.get_all_start_methods():
            return "fork"
        return None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def amp_dtype(self) -> torch.dtype | None:
        return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.precision)

    def autocast(self) -> torch.autocast:
        """The run's mixed precision around a forward: autocast to `amp_dtype`, off at fp32/tf32."""
        return torch.autocast(
            device_type=self.device.type, dtype=self.amp_dtype or torch.float32, enabled=self.amp_dtype is not None
        )

    def rank_seed(self, stream: int = 0) -> int:
        """A seed for this rank's private randomness (negative sampling, augmentation)."""
        return (self.sampling_seed * 1_000_003 + self.rank * 7919 + stream) % (2**31 - 1)

    def generator(self, stream: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.rank_seed(stream))

    def make_loader(
        self,
        dataset: Dataset[Any],
        batch_size: int,
        *,
        epoch: int,
        shuffle: bool = True,
        drop_last: bool = False,
        collate_fn: Callable[[list[Any]], Any] | None = None,
    ) -> DataLoader[Any]:
        """A loader over this rank's shard; the order depends only on (seed, epoch), not on rank count
        beyond the sharding itself, so every rank sees a disjoint slice of the same permutation."""
        sampler: DistributedSampler[Any] = DistributedSampler(
            dataset,
            num_replicas=self.world_size,
            rank=self.rank,
            shuffle=shuffle,
            seed=self.sampling_seed,
            drop_last=drop_last,
        )
        sampler.set_epoch(epoch)
        return DataLoader(
            dataset,
            batch_size=batch_size,
            sampler=sampler,
            drop_last=drop_last,
            collate_fn=collate_fn,
            num_workers=self.num_workers,
            multiprocessing_context=self.worker_start_method,
            pin_memory=self.device.type == "cuda",
            persistent_workers=False,
        )

    def eval_loader(
        self,
        dataset: Dataset[Any],
        batch_size: int,
        *,
        collate_fn: Callable[[list[Any]], Any] | None = None,
    ) -> DataLoader[Any]:
        """The whole held-out set in order, unsharded: evaluation runs on rank 0 only."""
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=False,
            num_workers=self.num_workers,
            multiprocessing_context=self.worker_start_method,
            collate_fn=collate_fn,
            pin_memory=self.device.type == "cuda",
        )

    def shard_indices(self, n: int, *, epoch: int, shuffle: bool = True) -> torch.Tensor:
        """This rank's indices into `n` items for `epoch` (the DistributedSampler permutation)."""
        sampler: DistributedSampler[int] = DistributedSampler(
            range(n),  # type: ignore[arg-type]  # any sized sequence works; torch's stub says Dataset
            num_replicas=self.world_size,
            rank=self.rank,
            shuffle=shuffle,
            seed=self.sampling_seed,
        )
        sampler.set_epoch(epoch)
        return torch.tensor(list(sampler), dtype=torch.long)

    def tensor_batches(
        self, tensors: Sequence[torch.Tensor], batch_size: int, *, epoch: int, shuffle: bool = True
    ) -> list[tuple[torch.Tensor, ...]]:
        """Batches of this rank's shard of equally long tensors, sliced without per-sample
        collation (which costs more than a small model's step on CPU)."""
        index = self.shard_indices(len(tensors[0]), epoch=epoch, shuffle=shuffle)
        return list(zip(*(chunked(tensor[index], batch_size) for tensor in tensors), strict=True))

    def to_device(self, batch: Any) -> Any:
        """Move a (nested) batch to the device; non-blocking from pinned memory on GPU."""
        non_blocking = self.device.type == "cuda"
        if isinstance(batch, torch.Tensor):
            moved = batch.to(self.device, non_blocking=non_blocking)
            if self.channels_last and moved.dim() == 4 and moved.is_floating_point():
                moved = moved.contiguous(memory_format=torch.channels_last)
            return moved
        if isinstance(batch, Mapping):
            return {key: self.to_device(value) for key, value in batch.items()}
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
            return type(batch)(*(self.to_device(value) for value in batch))
        if isinstance(batch, (list, tuple)):
            return type(batch)(self.to_device(value) for value in batch)
        return batch


class Sliceable(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, index: slice, /) -> Any: ...


SliceableT = TypeVar("SliceableT", bound=Sliceable)


def chunked(items: SliceableT, size: int) -> Iterator[SliceableT]:
    """Consecutive slices of at most `size` items (a list, a tensor along its first dimension): the
    one way batches are cut here, for training shards, length buckets and evaluation alike."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
