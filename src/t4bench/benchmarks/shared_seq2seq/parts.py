"""The model-side pieces GNMT and Transformer share: special token ids, the sentencepiece tokenizer,
padded batches and length-bucketed batching, the label-smoothed loss, greedy decoding and
sinusoidal positions.

A translation model used here is an `nn.Module` with
- `forward(src, src_len, tgt_in) -> logits [B, T, V]` (teacher forcing), and
- `start(src, src_len) -> state` and `step(state, prev [B]) -> (logits [B, V], state)` for decoding,
where `src_len` is the source lengths as host ints (a batch's `src_len`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from t4bench.pytorch.context import chunked

PAD, UNK, BOS, EOS = 0, 1, 2, 3


class Tokenizer:
    """A sentencepiece model; ids 0-3 are pad, unk, bos, eos (as `prepare` trains them)."""

    def __init__(self, model_path: Path | str) -> None:
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(model_path))
        if (self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id()) != (PAD, BOS, EOS):
            raise ValueError(f"{model_path}: expected pad/bos/eos ids {PAD}/{BOS}/{EOS}")

    @property
    def vocab_size(self) -> int:
        return int(self.sp.get_piece_size())

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return [list(ids) for ids in self.sp.encode(list(lines))]

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return [str(text) for text in self.sp.decode([list(x) for x in ids])]


class TranslationBatch(NamedTuple):
    src: torch.Tensor  # [B, S] padded with PAD
    # [B] source lengths as host ints, never moved to the GPU (to_device leaves ints alone): GNMT
    # packs its sequences by them, and reading a GPU copy back each step would stall the host
    src_len: tuple[int, ...]
    tgt_in: torch.Tensor  # [B, T]: BOS + target
    tgt_out: torch.Tensor  # [B, T]: target + EOS
    # tgt_out's non-PAD positions (the loss's tokens, the throughput unit), counted on the host:
    # counting them on the GPU each step made the host wait for the step before
    tokens: int


def collate(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> TranslationBatch:
    src_len = tuple(len(s) for s, _ in pairs)
    src = torch.full((len(pairs), max(src_len)), PAD, dtype=torch.long)
    tgt_width = max(len(t) for _, t in pairs) + 1
    tgt_in = torch.full((len(pairs), tgt_width), PAD, dtype=torch.long)
    tgt_out = torch.full((len(pairs), tgt_width), PAD, dtype=torch.long)
    for row, (s, t) in enumerate(pairs):
        src[row, : len(s)] = torch.tensor(s, dtype=torch.long)
        tgt_in[row, : len(t) + 1] = torch.tensor([BOS, *t], dtype=torch.long)
        tgt_out[row, : len(t) + 1] = torch.tensor([*t, EOS], dtype=torch.long)
    return TranslationBatch(src, src_len, tgt_in, tgt_out, sum(len(t) + 1 for _, t in pairs))


def bucketed_batches(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator, bucket_batches: int = 50
) -> list[list[int]]:
    """Indices grouped into batches of similar length: a random permutation, sorted by length
    within windows of `bucket_batches` batches, then cut into batches (fairseq/NVIDIA style)."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    batches: list[list[int]] = []
    for window in chunked(order, batch_size * bucket_batches):
        batches.extend(chunked(sorted(window, key=lambda i: lengths[i]), batch_size))
    return batches


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Mean over non-pad target tokens of (1-eps)·NLL + eps·(uniform cross-entropy)."""
    logprobs = F.log_softmax(logits.float(), dim=-1).flatten(0, -2)
    target = target.flatten()
    mask = target != PAD
    nll = -logprobs.gather(1, target.unsqueeze(1)).squeeze(1)
    smooth = -logprobs.mean(dim=-1)
    per_token = (1.0 - smoothing) * nll + smoothing * smooth
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


@torch.no_grad()
def greedy_decode(model: Any, src: torch.Tensor, src_len: Sequence[int], max_len: int) -> list[list[int]]:
    """Greedy (argmax) decoding; each output stops at its first EOS."""
    state = model.start(src, src_len)
    prev = torch.full((src.size(0),), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    steps = []
    for _ in range(max_len):
        logits, state = model.step(state, prev)
        prev = logits.argmax(dim=-1).masked_fill(done, PAD)
        steps.append(prev)
        done |= prev == EOS
        if bool(done.all()):
            break
    out = torch.stack(steps, dim=1).tolist()
    return [
        [t for t in row[: row.index(EOS)] if t != PAD] if EOS in row else [t for t in row if t != PAD] for row in out
    ]


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table
