"""What GNMT and Transformer share: tokenizer, length-bucketed batches, label-smoothed loss,
greedy decoding, SacreBLEU, and the benchmark class that ties them to the loop.

A translation model used here is an `nn.Module` with
- `forward(src, src_len, tgt_in) -> logits [B, T, V]` (teacher forcing), and
- `start(src, src_len) -> state` and `step(state, prev [B]) -> (logits [B, V], state)` for decoding.

Data layout (written by `t4bench.data.translation.prepare` for mini and Ding; the same layout for
the reference WMT sets): a directory with `train.src`, `train.tgt`, `test.src`, `test.tgt` (plain
text, one sentence a line) and a sentencepiece model, by default `spm.model` in that directory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from t4bench.benchmark import Benchmark
from t4bench.data.translation import bleu as corpus_bleu
from t4bench.errors import DatasetMissingError

PAD, UNK, BOS, EOS = 0, 1, 2, 3
#: the environment variable that conf/model_scale/<model>_reference.yaml reads the WMT directory from
REFERENCE_ENV = {"gnmt": "T4BENCH_WMT16_DIR", "transformer": "T4BENCH_WMT17_DIR"}


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
    src_len: torch.Tensor  # [B]
    tgt_in: torch.Tensor  # [B, T]: BOS + target
    tgt_out: torch.Tensor  # [B, T]: target + EOS


def collate(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> TranslationBatch:
    src_len = torch.tensor([len(s) for s, _ in pairs], dtype=torch.long)
    src = torch.full((len(pairs), int(src_len.max())), PAD, dtype=torch.long)
    tgt_width = max(len(t) for _, t in pairs) + 1
    tgt_in = torch.full((len(pairs), tgt_width), PAD, dtype=torch.long)
    tgt_out = torch.full((len(pairs), tgt_width), PAD, dtype=torch.long)
    for row, (s, t) in enumerate(pairs):
        src[row, : len(s)] = torch.tensor(s, dtype=torch.long)
        tgt_in[row, : len(t) + 1] = torch.tensor([BOS, *t], dtype=torch.long)
        tgt_out[row, : len(t) + 1] = torch.tensor([*t, EOS], dtype=torch.long)
    return TranslationBatch(src, src_len, tgt_in, tgt_out)


def bucketed_batches(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator, bucket_batches: int = 50
) -> list[list[int]]:
    """Indices grouped into batches of similar length: a random permutation, sorted by length
    within windows of `bucket_batches` batches, then cut into batches (fairseq/NVIDIA style)."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    window = batch_size * bucket_batches
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    return batches


class _BatchList(torch.utils.data.Dataset):
    """The epoch's pre-built batches as dataset items, so `ctx.make_loader` shards whole batches."""

    def __init__(self, pairs, batches: list[list[int]]) -> None:
        self.pairs, self.batches = pairs, batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> TranslationBatch:
        return collate([self.pairs[i] for i in self.batches[index]])


def _first(items: list[TranslationBatch]) -> TranslationBatch:
    return items[0]


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
def greedy_decode(model: Any, src: torch.Tensor, src_len: torch.Tensor, max_len: int) -> list[list[int]]:
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


def _data_files(data: Mapping[str, Any]) -> dict[str, Path]:
    """train.src, train.tgt, test.src, test.tgt and spm: `data.<split>_<side>` / `data.spm_model`
    where set, else <data.path>/<split>.<side> and <data.path>/spm.model."""
    directory = Path(str(data["path"]))
    files = {
        f"{split}.{side}": Path(str(data.get(f"{split}_{side}") or directory / f"{split}.{side}"))
        for split in ("train", "test")
        for side in ("src", "tgt")
    }
    files["spm"] = Path(str(data.get("spm_model") or directory / "spm.model"))
    return files


def _read_lines(path: Path, limit: int | None = None) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    return lines[:limit] if limit else lines


class TranslationBenchmark(Benchmark):
    """The data, loss, decoding and BLEU side of GNMT and Transformer; subclasses build the model.

    cfg.model.data: path (directory of the layout above), spm_model (optional), max_len (train
    pairs longer than this many subword tokens on either side are dropped), eval_max_sentences
    (optional cap on the test set), synthetic_src_len / synthetic_tgt_len (reference shapes).
    cfg.model.arch.vocab_size is used only without a tokenizer (synthetic mode).
    """

    throughput_unit: ClassVar[str] = "tokens/s"

    def __init__(self, cfg, ctx) -> None:
        super().__init__(cfg, ctx)
        self.model_cfg = cfg.model
        data = cfg.model.data
        self.tokenizer: Tokenizer | None = None
        self.train_pairs: list[tuple[list[int], list[int]]] = []
        if self.synthetic:
            self.vocab_size = int(cfg.model.arch.vocab_size)
            return
        files = _data_files(data)
        self.tokenizer = Tokenizer(files["spm"])
        self.vocab_size = self.tokenizer.vocab_size
        max_len = int(data.max_len)
        src = self.tokenizer.encode(_read_lines(files["train.src"]))
        tgt = self.tokenizer.encode(_read_lines(files["train.tgt"]))
        if len(src) != len(tgt):
            raise DatasetMissingError(
                f"{files['train.src']} has {len(src)} lines but {files['train.tgt']} has {len(tgt)}: "
                "parallel files must hold one sentence pair per line"
            )
        self.train_pairs = [
            (s, t) for s, t in zip(src, tgt, strict=True) if 0 < len(s) <= max_len and len(t) <= max_len
        ]
        self._lengths = [max(len(s), len(t)) for s, t in self.train_pairs]
        limit = data.get("eval_max_sentences")
        self.test_src = _read_lines(files["test.src"], limit)
        self.test_ref = _read_lines(files["test.tgt"], limit)
        self._test_ids = self.tokenizer.encode(self.test_src)

    @classmethod
    def check_inputs(cls, cfg) -> None:
        missing = [str(path) for path in _data_files(cfg.model.data).values() if not path.is_file()]
        if missing:
            scale = str(cfg.get("scale", {}).get("name", "?"))
            hint = (
                f"set the directory with {REFERENCE_ENV.get(cfg.model.name, 'model.data.path')} or model.data.path"
                if scale == "reference"
                else "write it with `python -m t4bench.data.prepare translation`"
            )
            raise DatasetMissingError(
                f"{cfg.model.name} {scale} needs {cfg.model.data.dataset}: expected {', '.join(missing)} ({hint})"
            )

    def dataset_train_size(self) -> int:
        return len(self.train_pairs)

    def train_batches(self, epoch: int) -> DataLoader[TranslationBatch]:
        # the same batches on every rank (seed and epoch only); the loader shards them
        generator = torch.Generator().manual_seed(self.ctx.seed * 100_003 + epoch)
        batches = bucketed_batches(self._lengths, int(self.model_cfg.batch_size), generator)
        dataset = _BatchList(self.train_pairs, batches)
        return self.ctx.make_loader(dataset, 1, epoch=epoch, shuffle=True, collate_fn=_first)

    def loss(self, model: nn.Module, batch: TranslationBatch) -> tuple[torch.Tensor, int]:
        logits = model(batch.src, batch.src_len, batch.tgt_in)
        loss = label_smoothed_loss(logits, batch.tgt_out, float(self.model_cfg.arch.label_smoothing))
        return loss, int((batch.tgt_out != PAD).sum())

    def translate(self, model: nn.Module, sentences_ids: Sequence[Sequence[int]]) -> list[str]:
        assert self.tokenizer is not None
        device = next(model.parameters()).device
        size = int(self.model_cfg.eval_batch_size)
        order = sorted(range(len(sentences_ids)), key=lambda i: len(sentences_ids[i]))
        out: dict[int, list[int]] = {}
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            batch = collate([(sentences_ids[i] or [UNK], []) for i in rows])
            src, src_len = batch.src.to(device), batch.src_len.to(device)
            max_len = int(src_len.max() * 3 // 2) + 5
            out.update(zip(rows, greedy_decode(model, src, src_len, max_len), strict=True))
        return self.tokenizer.decode([out[i] for i in range(len(sentences_ids))])

    def evaluate(self, model: nn.Module) -> Mapping[str, float]:
        # eval mode, no_grad and autocast come from the loop's Trainer.evaluate
        hypotheses = self.translate(model, self._test_ids)
        return {"bleu": corpus_bleu(hypotheses, self.test_ref)}

    def synthetic_batch(self) -> TranslationBatch:
        data = self.model_cfg.data
        generator = torch.Generator().manual_seed(self.ctx.rank_seed(1))
        batch, src_len, tgt_len = (
            int(self.model_cfg.batch_size),
            int(data.synthetic_src_len),
            int(data.synthetic_tgt_len),
        )
        src = torch.randint(4, self.vocab_size, (batch, src_len), generator=generator)
        tgt = torch.randint(4, self.vocab_size, (batch, tgt_len + 1), generator=generator)
        # on the device already, as the loop's and a bare loop's steps both expect it
        return self.ctx.to_device(
            TranslationBatch(src, torch.full((batch,), src_len, dtype=torch.long), tgt[:, :-1], tgt[:, 1:])
        )
