"""GNMT v2 (MLPerf Training v0.5 translation, WMT16 En-De; NVIDIA's PyTorch reference design).

Encoder: embedding, a bidirectional LSTM layer, then unidirectional LSTM layers with residual
connections from the third layer on. Decoder: an LSTM layer whose output queries normalized
additive (Bahdanau) attention over the encoder outputs; the attention context is concatenated to
the input of every further decoder LSTM layer (residual from the third on); a linear classifier.
Data, loss (label smoothing), greedy decoding and BLEU are `t4bench.benchmarks.shared_seq2seq.benchmark`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from t4bench.benchmarks.shared_seq2seq.benchmark import TranslationBenchmark
from t4bench.benchmarks.shared_seq2seq.parts import PAD


def _host_to(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on `device` without waiting for the GPU: a blocking copy would wait for
    every kernel queued before it; from pinned memory the copy is queued like a kernel."""
    if device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


class AdditiveAttention(nn.Module):
    """score(q, k) = g · v/|v| · tanh(W_q q + W_k k + b) (GNMT's normalized Bahdanau attention)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.v = nn.Parameter(torch.empty(hidden).uniform_(-0.1, 0.1))
        self.g = nn.Parameter(torch.tensor(1.0 / hidden**0.5))

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, pad_mask: torch.Tensor
    ) -> torch.Tensor:
        # query [B, T, H], keys (already projected) / values [B, S, H], pad_mask [B, S]
        hidden = torch.tanh(self.query(query).unsqueeze(2) + keys.unsqueeze(1) + self.bias)
        v = self.g * self.v / self.v.norm()
        scores = (hidden @ v).masked_fill(pad_mask.unsqueeze(1), float("-inf"))  # [B, T, S]
        return torch.softmax(scores.float(), dim=-1).to(values.dtype) @ values


class GNMT(nn.Module):
    def __init__(
        self, vocab_size: int, hidden: int, num_layers: int, dropout: float, share_embedding: bool = True
    ) -> None:
        super().__init__()
        if num_layers < 2:
            raise ValueError("GNMT needs at least 2 layers (the first encoder layer is bidirectional)")
        self.dropout = nn.Dropout(dropout)
        self.src_embed = nn.Embedding(vocab_size, hidden, padding_idx=PAD)
        self.tgt_embed = self.src_embed if share_embedding else nn.Embedding(vocab_size, hidden, padding_idx=PAD)
        self.enc_bi = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.enc = nn.ModuleList(
            [nn.LSTM(2 * hidden if i == 0 else hidden, hidden, batch_first=True) for i in range(num_layers - 1)]
        )
        self.dec_att = nn.LSTM(hidden, hidden, batch_first=True)
        self.attention = AdditiveAttention(hidden)
        self.dec = nn.ModuleList([nn.LSTM(2 * hidden, hidden, batch_first=True) for _ in range(num_layers - 1)])
        self.classifier = nn.Linear(hidden, vocab_size)
        for name, param in self.named_parameters():
            if name.startswith(("enc", "dec")):  # the LSTMs, as NVIDIA's GNMT initialises them
                nn.init.uniform_(param, -0.1, 0.1)

    def bidirectional(self, x: torch.Tensor, src_len: Sequence[int], pack: bool) -> torch.Tensor:
        """The bidirectional layer over x [B, S, H]: packed by `src_len` (the backward direction
        starts at each sentence's end, not in its padding), or, for a batch without padding, as
        it is. Neither waits for the GPU: torch's own unsorted packing copies its sort order to the
        GPU and its inverse back with blocking copies (two host syncs a step); here both orders are
        made on the host and sent ahead from pinned memory."""
        if not pack:
            # contiguous as pad_packed_sequence's output is: the next dropout's mask follows the
            # memory layout, and both paths must draw the same one
            return self.enc_bi(x)[0].contiguous()
        # torch's own sort on the host, as its packing does: tied lengths land in the same order,
        # so even the weights' gradients (summed over the packed rows) are the same to the bit
        lengths, order = torch.sort(torch.tensor(src_len, dtype=torch.long), descending=True)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel())
        index, unsort = _host_to(torch.stack([order, inverse]), x.device).unbind(0)
        packed = pack_padded_sequence(x.index_select(0, index), lengths, batch_first=True, enforce_sorted=True)
        out = pad_packed_sequence(self.enc_bi(packed)[0], batch_first=True, total_length=x.size(1))[0]
        return out.index_select(0, unsort)

    def encode(self, src: torch.Tensor, src_len: Sequence[int]) -> torch.Tensor:
        x = self.bidirectional(self.dropout(self.src_embed(src)), src_len, pack=min(src_len) < src.size(1))
        for i, layer in enumerate(self.enc):
            y, _ = layer(self.dropout(x))
            x = y + x if i >= 1 else y
        return x

    def decode(
        self, emb: torch.Tensor, memory: dict[str, torch.Tensor], hidden: list[Any]
    ) -> tuple[torch.Tensor, list[Any]]:
        """Run the decoder over emb [B, T, H]; returns (logits [B, T, V], new hidden states)."""
        new_hidden = []
        x, h = self.dec_att(self.dropout(emb), hidden[0])
        new_hidden.append(h)
        context = self.attention(x, memory["keys"], memory["values"], memory["pad_mask"])
        for i, layer in enumerate(self.dec):
            y, h = layer(torch.cat([self.dropout(x), context], dim=-1), hidden[i + 1])
            new_hidden.append(h)
            x = y + x if i >= 1 else y
        return self.classifier(self.dropout(x)), new_hidden

    def _memory(self, src: torch.Tensor, src_len: Sequence[int]) -> dict[str, torch.Tensor]:
        values = self.encode(src, src_len)
        return {"values": values, "keys": self.attention.key(values), "pad_mask": src == PAD}

    def forward(self, src: torch.Tensor, src_len: Sequence[int], tgt_in: torch.Tensor) -> torch.Tensor:
        memory = self._memory(src, src_len)
        logits, _ = self.decode(self.tgt_embed(tgt_in), memory, [None] * (len(self.dec) + 1))
        return logits

    def start(self, src: torch.Tensor, src_len: Sequence[int]) -> dict[str, Any]:
        return {"memory": self._memory(src, src_len), "hidden": [None] * (len(self.dec) + 1)}

    def step(self, state: dict[str, Any], prev: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        logits, hidden = self.decode(self.tgt_embed(prev.unsqueeze(1)), state["memory"], state["hidden"])
        return logits[:, -1], {"memory": state["memory"], "hidden": hidden}


class GNMTBenchmark(TranslationBenchmark):
    name = "gnmt"
    #: WMT16 En-De training pairs, about 4.5M (the round figure NVIDIA's GNMT documents; only the LR
    #: schedule of input=synthetic uses it)
    reference_train_samples = 4_500_000

    def build_model(self) -> nn.Module:
        arch = self.model_cfg.arch
        return GNMT(
            self.vocab_size,
            int(arch.hidden),
            int(arch.num_layers),
            float(arch.dropout),
            bool(arch.get("share_embedding", True)),
        )
