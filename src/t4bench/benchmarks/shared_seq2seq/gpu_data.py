"""GPU-resident training batches for GNMT and the Transformer (`perf.gpu_data`).

The training pairs are padded once, at init, into three tensors on the run's device (source,
BOS + target, target + EOS); an epoch's batch is then three `index_select`s of those, cut to the
batch's longest sentence, with the epoch's row indices sent to the device in one copy.

Why: with host batches every step built its batch in Python (`parts.collate`: a few hundred small
tensor operations for 128 pairs) and copied it to the device. Alone on a GPU that host work hides
behind the GPU's; with a dozen seed runs packed on one GPU (`hw.runs_per_gpu`) it is what each run
waits on. The batches are the same tensors as `collate` builds, in the same order (the same
`bucketed_batches`, the same DistributedSampler permutation of them), so a run trains the same
steps either way. On a CPU the same code runs on host tensors, which is how CI walks it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from t4bench.benchmarks.shared_seq2seq.parts import BOS, EOS, PAD, TranslationBatch
from t4bench.pytorch.context import RunContext


def _padded(rows: Sequence[Sequence[int]], width: int, offset: int) -> np.ndarray:
    """`rows` left-aligned in a PAD-filled [len(rows), width] array, each starting at column
    `offset`; one scatter instead of a copy per row."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    out = np.full((len(rows), width), PAD, dtype=np.int64)
    flat = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(lengths.sum()))
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[np.repeat(np.arange(len(rows)), lengths), np.arange(len(flat)) - starts + offset] = flat
    return out


class ResidentPairs:
    """The training pairs as padded tensors on `device`, with their lengths kept on the host (the
    batch's widths, GNMT's packing lengths and the token count are host numbers)."""

    def __init__(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], device: torch.device) -> None:
        self.device = device
        self.src_len = [len(s) for s, _ in pairs]
        self.tgt_len = [len(t) for _, t in pairs]
        width = max(self.tgt_len) + 1
        targets = [t for _, t in pairs]
        tgt_in = _padded(targets, width, 1)
        tgt_in[:, 0] = BOS
        tgt_out = _padded(targets, width, 0)
        tgt_out[np.arange(len(pairs)), self.tgt_len] = EOS
        self.src = torch.from_numpy(_padded([s for s, _ in pairs], max(self.src_len), 0)).to(device)
        self.tgt_in = torch.from_numpy(tgt_in).to(device)
        self.tgt_out = torch.from_numpy(tgt_out).to(device)

    def epoch(self, batches: Sequence[Sequence[int]], order: Sequence[int]) -> ResidentEpoch:
        """The batches `batches[k]` for k in `order` (this rank's shard, in its order)."""
        return ResidentEpoch(self, [batches[k] for k in order])

    def batch(self, rows: Sequence[int], index: torch.Tensor) -> TranslationBatch:
        """One batch: `rows` (host ids, for lengths) are `index` (the same ids, on the device)."""
        src_len = tuple(self.src_len[i] for i in rows)
        tgt_lens = [self.tgt_len[i] for i in rows]
        width = max(tgt_lens) + 1
        return TranslationBatch(
            self.src[:, : max(src_len)].index_select(0, index),
            src_len,
            self.tgt_in[:, :width].index_select(0, index),
            self.tgt_out[:, :width].index_select(0, index),
            sum(tgt_lens) + len(rows),
        )


class ResidentEpoch:
    """One epoch's batches of a `ResidentPairs`: sized (the loop places evaluations by batch count)
    and built as they are iterated. The epoch's row ids go to the device in one copy, on the first
    iteration."""

    def __init__(self, pairs: ResidentPairs, batches: list[Sequence[int]]) -> None:
        self.pairs, self.batches = pairs, batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[TranslationBatch]:
        flat = torch.tensor([i for rows in self.batches for i in rows], dtype=torch.long)
        if self.pairs.device.type == "cuda":  # from pinned memory the copy is queued, not waited on
            flat = flat.pin_memory()
        index = flat.to(self.pairs.device, non_blocking=True)
        start = 0
        for rows in self.batches:
            yield self.pairs.batch(rows, index[start : start + len(rows)])
            start += len(rows)


def resident_epoch(
    pairs: ResidentPairs, ctx: RunContext, batches: Sequence[Sequence[int]], epoch: int
) -> ResidentEpoch:
    """This rank's share of the epoch's `batches` in the order a DataLoader over them would give
    (`ctx.shard_indices`: DistributedSampler's permutation, seeded by the run and the epoch)."""
    return pairs.epoch(batches, ctx.shard_indices(len(batches), epoch=epoch, shuffle=True).tolist())
