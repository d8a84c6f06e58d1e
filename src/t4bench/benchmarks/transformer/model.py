"""Transformer (MLPerf Training v0.5 translation, WMT17 En-De; "big" at reference size).

Encoder-decoder with shared source/target/output embeddings (one joint subword vocabulary),
sinusoidal positions, post- or pre-LayerNorm layers (`arch.norm_first`). Data, loss (label
smoothing), greedy decoding and BLEU are `t4bench.benchmarks.shared_seq2seq.benchmark`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from t4bench.benchmarks.shared_seq2seq.benchmark import TranslationBenchmark
from t4bench.benchmarks.shared_seq2seq.parts import PAD, sinusoidal_positions


class Transformer(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        heads: int,
        ff: int,
        layers: int,
        dropout: float,
        norm_first: bool = False,
        max_len: int = 1024,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)
        self.positions: torch.Tensor
        self.register_buffer("positions", sinusoidal_positions(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        kwargs: dict[str, Any] = dict(
            d_model=d_model, nhead=heads, dim_feedforward=ff, dropout=dropout, batch_first=True, norm_first=norm_first
        )
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**kwargs),
            layers,
            norm=nn.LayerNorm(d_model) if norm_first else None,
            enable_nested_tensor=False,
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(**kwargs), layers, norm=nn.LayerNorm(d_model) if norm_first else None
        )

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.positions[: tokens.size(1)]
        return self.dropout(x)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pad_mask = src == PAD
        return self.encoder(self._embed(src), src_key_padding_mask=pad_mask), pad_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """Decoder outputs [B, T, d] (before the tied output projection)."""
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device, dtype=torch.bool)
        return self.decoder(
            self._embed(tgt_in),
            memory,
            tgt_mask=causal,
            tgt_is_causal=True,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=pad_mask,
        )

    def forward(self, src: torch.Tensor, src_len: Sequence[int], tgt_in: torch.Tensor) -> torch.Tensor:
        memory, pad_mask = self.encode(src)
        return self.decode(tgt_in, memory, pad_mask) @ self.embed.weight.t()

    def start(self, src: torch.Tensor, src_len: Sequence[int]) -> dict[str, Any]:
        memory, pad_mask = self.encode(src)
        return {"memory": memory, "pad_mask": pad_mask, "prefix": src.new_zeros((src.size(0), 0))}

    def step(self, state: dict[str, Any], prev: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        # the whole prefix again each step (no key/value cache): short sentences, greedy only
        prefix = torch.cat([state["prefix"], prev.unsqueeze(1)], dim=1)
        last = self.decode(prefix, state["memory"], state["pad_mask"])[:, -1]
        return last @ self.embed.weight.t(), {**state, "prefix": prefix}


class TransformerBenchmark(TranslationBenchmark):
    name = "transformer"
    #: WMT17 En-De training pairs, about 4.59M (approximate; only the LR schedule of input=synthetic
    #: uses it)
    reference_train_samples = 4_590_000

    def build_model(self) -> nn.Module:
        arch = self.model_cfg.arch
        return Transformer(
            self.vocab_size,
            int(arch.d_model),
            int(arch.heads),
            int(arch.ff),
            int(arch.layers),
            float(arch.dropout),
            bool(arch.get("norm_first", False)),
        )
