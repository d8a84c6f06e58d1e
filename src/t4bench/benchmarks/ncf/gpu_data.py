"""GPU-resident training data for NCF: the positives live in GPU memory, each epoch's negatives are
sampled there (rejection sampling against the sorted positive keys, as `LeaveOneOut.sample_negatives`
does on the host) and the epoch's batches are slices of one shuffled GPU tensor.

Why: mini NCF on an H200 spent its time on the host (NumPy sampling, per-step host-to-device copies),
so the GPU trained no faster than two CPU cores. Here an epoch costs a handful of kernels plus one
view per batch.

`GpuResidentNCF` (conf/model/ncf.yaml's benchmark) is `NCFBenchmark` with these batches when
`perf.gpu_data` is on: `python -m t4bench model=ncf hw=h200` (perf/h200 sets it). On a CPU the same
code runs on host tensors (`perf.gpu_data=true`), which is how CI exercises this path. The
negatives differ from the host sampler's (another random stream), not their law.
"""

from __future__ import annotations

import torch

from t4bench.benchmarks.ncf.model import NCFBenchmark
from t4bench.benchmarks.ncf.movielens import LeaveOneOut
from t4bench.pytorch.context import RunContext
from t4bench.pytorch.perf import PerfOptions
from t4bench.spec import RunSpec


class GpuNegativeSampler:
    """Positives plus `negatives` unseen items per positive, drawn on `ctx.device` each epoch."""

    def __init__(self, data: LeaveOneOut, negatives: int, ctx: RunContext) -> None:
        device = ctx.device
        self.ctx = ctx
        self.negatives = negatives
        self.num_items = data.num_items
        self.users = torch.from_numpy(data.train_users).to(device)
        self.items = torch.from_numpy(data.train_items).to(device)
        self.keys = torch.from_numpy(data.positive_keys).to(device)  # sorted (np.unique)
        self.generator = torch.Generator(device=device)

    def _is_positive(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        keys = users * self.num_items + items
        found = torch.searchsorted(self.keys, keys).clamp_(max=len(self.keys) - 1)
        return self.keys[found] == keys

    def epoch_samples(self, epoch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(users, items, labels) of the epoch, on the device; the same on every rank (seed, epoch)."""
        self.generator.manual_seed(self.ctx.sampling_seed * 1_000_003 + epoch)
        neg_users = self.users.repeat_interleave(self.negatives)
        neg_items = torch.randint(0, self.num_items, neg_users.shape, device=neg_users.device, generator=self.generator)
        bad = self._is_positive(neg_users, neg_items)
        # each round redraws only the rejected draws; a few rounds (one host read each) per epoch
        while bool(bad.any()):
            where = bad.nonzero().squeeze(1)
            redrawn = torch.randint(0, self.num_items, where.shape, device=where.device, generator=self.generator)
            neg_items[where] = redrawn
            bad[where] = self._is_positive(neg_users[where], redrawn)
        users = torch.cat([self.users, neg_users])
        items = torch.cat([self.items, neg_items])
        labels = torch.cat(
            [torch.ones(len(self.users), device=users.device), torch.zeros(len(neg_users), device=users.device)]
        )
        return users, items, labels

    def shard(self, n: int, epoch: int) -> torch.Tensor:
        """This rank's indices of a shared permutation (DistributedSampler's layout: padded with
        the permutation's head to a multiple of the world size, then every world_size-th index)."""
        self.generator.manual_seed(self.ctx.sampling_seed * 1_000_033 + epoch)
        order = torch.randperm(n, device=self.users.device, generator=self.generator)
        world = self.ctx.world_size
        total = -(-n // world) * world
        if total > n:
            order = torch.cat([order, order[: total - n]])
        return order[self.ctx.rank : total : world]

    def batches(self, epoch: int, batch_size: int) -> list[tuple[torch.Tensor, ...]]:
        samples = self.epoch_samples(epoch)
        index = self.shard(len(samples[0]), epoch)
        shuffled = [tensor[index] for tensor in samples]
        return [
            tuple(tensor[start : start + batch_size] for tensor in shuffled)
            for start in range(0, len(index), batch_size)
        ]


class GpuResidentNCF(NCFBenchmark):
    """NCF with `GpuNegativeSampler` batches when `perf.gpu_data` is on (on the run's device, GPU or
    CPU); exactly `NCFBenchmark` otherwise. The evaluation candidates are moved to the device once."""

    def __init__(self, cfg: RunSpec, ctx: RunContext) -> None:
        super().__init__(cfg, ctx)
        self.sampler: GpuNegativeSampler | None = None
        if self.data is not None and PerfOptions.from_config(cfg, ctx.device).gpu_data:
            self.sampler = GpuNegativeSampler(self.data, self.train_negatives, ctx)
            self.eval_items = self.eval_items.to(ctx.device)

    def train_batches(self, epoch: int) -> list[tuple[torch.Tensor, ...]]:
        if self.sampler is None:
            return super().train_batches(epoch)
        return self.sampler.batches(epoch, int(self.cfg.model.batch_size))
