"""What GNMT and Transformer share as benchmarks: the data layout, SacreBLEU evaluation by greedy
decoding, synthetic batches, and the benchmark class that ties the parts
(`t4bench.benchmarks.shared_seq2seq.parts`) to the loop; subclasses build the model.

Data layout (written by `t4bench.benchmarks.shared_seq2seq.translation.prepare` for mini and Ding; the same layout for
the reference WMT sets): a directory with `train.src`, `train.tgt`, `test.src`, `test.tgt` (plain
text, one sentence a line) and a sentencepiece model, by default `spm.model` in that directory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from t4bench.benchmark import Benchmark
from t4bench.benchmarks import data_checks, registry
from t4bench.benchmarks.shared_seq2seq.parts import (
    UNK,
    Tokenizer,
    TranslationBatch,
    bucketed_batches,
    collate,
    greedy_decode,
    label_smoothed_loss,
)
from t4bench.benchmarks.shared_seq2seq.translation import bleu as corpus_bleu
from t4bench.errors import DatasetMissingError
from t4bench.pytorch.context import RunContext, chunked
from t4bench.spec import RunSpec


def _reference_env(model: str) -> str:
    """The environment variable conf/model_scale/<model>_reference.yaml reads the WMT directory
    from (the folder's `ABOUT.reference_data`); model.data.path for a model without one."""
    about = registry.find(model)
    envs = [data.env for data in about.reference_data.values()] if about is not None else []
    return envs[0] if envs else "model.data.path"


class _BatchList(Dataset[TranslationBatch]):
    """The epoch's pre-built batches as dataset items, so `ctx.make_loader` shards whole batches."""

    def __init__(self, pairs: Sequence[tuple[list[int], list[int]]], batches: list[list[int]]) -> None:
        self.pairs, self.batches = pairs, batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> TranslationBatch:
        return collate([self.pairs[i] for i in self.batches[index]])


class Dropped(NamedTuple):
    """Training pairs left out of `pairs`: with an empty side, or too long."""

    pairs: int = 0
    empty: int = 0
    long: int = 0


def keep_pairs(
    src: Sequence[list[int]], tgt: Sequence[list[int]], max_len: int
) -> tuple[list[tuple[list[int], list[int]]], Dropped]:
    """The (source, target) id pairs that train: both sides non-empty (an empty side is a sentence
    without its translation) and at most `max_len` tokens each; and what was left out."""
    kept, empty, long = [], 0, 0
    for s, t in zip(src, tgt, strict=True):
        if not s or not t:
            empty += 1
        elif len(s) > max_len or len(t) > max_len:
            long += 1
        else:
            kept.append((s, t))
    return kept, Dropped(len(src), empty, long)


def _first(items: list[TranslationBatch]) -> TranslationBatch:
    return items[0]


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


class TranslationBenchmark(Benchmark[RunContext]):
    """The data, loss, decoding and BLEU side of GNMT and Transformer; subclasses build the model.

    cfg.model.data: path (directory of the layout above), spm_model (optional), max_len (train
    pairs longer than this many subword tokens on either side are dropped), eval_max_sentences
    (optional cap on the test set), synthetic_src_len / synthetic_tgt_len (reference shapes).
    cfg.model.arch.vocab_size is used only without a tokenizer (synthetic mode).
    """

    throughput_unit: ClassVar[str] = "tokens/s"

    def __init__(self, cfg: RunSpec, ctx: RunContext) -> None:
        super().__init__(cfg, ctx)
        self.model_cfg = cfg.model
        data = cfg.model.data
        self.tokenizer: Tokenizer | None = None
        self.train_pairs: list[tuple[list[int], list[int]]] = []
        self.dropped = Dropped()
        if self.synthetic:
            self.vocab_size = int(cfg.model.arch.vocab_size)
            return
        files = _data_files(data)
        self.tokenizer = Tokenizer(files["spm"])
        self.vocab_size = self.tokenizer.vocab_size
        max_len = int(data.max_len)
        # one line naming the file (and line) for unequal line counts, non-UTF-8 text, empty files
        train_src, train_tgt = data_checks.read_parallel(files["train.src"], files["train.tgt"])
        self.train_pairs, self.dropped = keep_pairs(
            self.tokenizer.encode(train_src), self.tokenizer.encode(train_tgt), max_len
        )
        self._lengths = [max(len(s), len(t)) for s, t in self.train_pairs]
        limit = data.get("eval_max_sentences")
        self.test_src, self.test_ref = data_checks.read_parallel(files["test.src"], files["test.tgt"], limit)
        self._test_ids = self.tokenizer.encode(self.test_src)

    @classmethod
    def check_inputs(cls, cfg: RunSpec) -> None:
        missing = [str(path) for path in _data_files(cfg.model.data).values() if not path.is_file()]
        if missing:
            scale = str(cfg.get("scale", {}).get("name", "?"))
            hint = (
                f"set the directory with {_reference_env(str(cfg.model.name))} or model.data.path"
                if scale == "reference"
                else "write it with `python -m t4bench.data.prepare translation`"
            )
            raise DatasetMissingError(
                f"{cfg.model.name} {scale} needs {cfg.model.data.dataset}: expected {', '.join(missing)} ({hint})"
            )
        files = _data_files(cfg.model.data)
        # the structure now, before any run exists; the sentences' bytes when the run reads them
        data_checks.check_parallel(files["train.src"], files["train.tgt"])
        data_checks.check_parallel(files["test.src"], files["test.tgt"])
        if files["spm"].stat().st_size == 0:
            raise data_checks.DataError(f"{files['spm']}: empty file (a sentencepiece model expected)")

    def dataset_train_size(self) -> int:
        return len(self.train_pairs)

    def data_notes(self) -> Mapping[str, tuple[int, str]]:
        dropped, notes = self.dropped, {}
        if dropped.empty:
            notes["dropped_empty_pairs"] = (
                dropped.empty,
                f"dropped {dropped.empty} of {dropped.pairs} training pairs with an empty side "
                "(a sentence without its translation)",
            )
        if dropped.long:
            notes["dropped_long_pairs"] = (
                dropped.long,
                f"dropped {dropped.long} of {dropped.pairs} training pairs longer than "
                f"model.data.max_len={int(self.model_cfg.data.max_len)} subword tokens on a side",
            )
        return notes

    def dataset_eval_size(self) -> int:
        return len(self.test_src)

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        # the same batches on every rank (seed and epoch only); the loader shards them
        generator = torch.Generator().manual_seed(self.ctx.sampling_seed * 100_003 + epoch)
        return bucketed_batches(self._lengths, int(self.model_cfg.batch_size), generator)

    def train_batches(self, epoch: int) -> DataLoader[TranslationBatch]:
        dataset = _BatchList(self.train_pairs, self._epoch_batches(epoch))
        return self.ctx.make_loader(dataset, 1, epoch=epoch, shuffle=True, collate_fn=_first)

    def warmup_batches(self, limit: int) -> list[TranslationBatch]:
        """Generated tokens in each of epoch 1's batch shapes (sentences, longest source, longest
        target + 1), the most frequent first: only the lengths of the training pairs are read, the
        same shape list on every rank (so DDP's reductions pair up)."""
        pairs = self.train_pairs
        shapes = Counter(
            (len(rows), max(len(pairs[i][0]) for i in rows), max(len(pairs[i][1]) for i in rows) + 1)
            for rows in self._epoch_batches(1)
        )
        generator = torch.Generator().manual_seed(self.ctx.rank_seed(2))
        return [self._generated(*shape, generator) for shape, _ in shapes.most_common(limit)]

    def _generated(self, rows: int, src_len: int, tgt_len: int, generator: torch.Generator) -> TranslationBatch:
        """Random tokens (never PAD/BOS/EOS/UNK) in one batch shape, every source full length."""
        src = torch.randint(4, self.vocab_size, (rows, src_len), generator=generator)
        tgt = torch.randint(4, self.vocab_size, (rows, tgt_len + 1), generator=generator)
        return TranslationBatch(src, (src_len,) * rows, tgt[:, :-1], tgt[:, 1:], rows * tgt_len)

    def loss(self, model: nn.Module, batch: TranslationBatch) -> tuple[torch.Tensor, int]:
        logits = model(batch.src, batch.src_len, batch.tgt_in)
        loss = label_smoothed_loss(logits, batch.tgt_out, float(self.model_cfg.arch.label_smoothing))
        return loss, batch.tokens

    def translate(self, model: nn.Module, sentences_ids: Sequence[Sequence[int]]) -> list[str]:
        assert self.tokenizer is not None
        device = next(model.parameters()).device
        size = int(self.model_cfg.eval_batch_size)
        order = sorted(range(len(sentences_ids)), key=lambda i: len(sentences_ids[i]))
        out: dict[int, list[int]] = {}
        for rows in chunked(order, size):
            batch = collate([(sentences_ids[i] or [UNK], []) for i in rows])
            max_len = max(batch.src_len) * 3 // 2 + 5
            out.update(zip(rows, greedy_decode(model, batch.src.to(device), batch.src_len, max_len), strict=True))
        return self.tokenizer.decode([out[i] for i in range(len(sentences_ids))])

    def evaluate(self, model: nn.Module) -> Mapping[str, float]:
        # eval mode, no_grad and autocast come from the loop's Trainer.evaluate
        hypotheses = self.translate(model, self._test_ids)
        return {"bleu": corpus_bleu(hypotheses, self.test_ref)}

    trivial_baseline: ClassVar[str] = "copying the source sentence"

    def trivial_quality(self) -> Mapping[str, float]:
        # the source sentence as its own translation: what a model that learned nothing but to copy
        # scores (the word-by-word dictionary baseline of docs/translation.md needs the dictionary)
        if self.synthetic:
            return {}
        return {"bleu": corpus_bleu(self.test_src, self.test_ref)}

    def synthetic_batch(self) -> TranslationBatch:
        data = self.model_cfg.data
        generator = torch.Generator().manual_seed(self.ctx.rank_seed(1))
        shape = (int(self.model_cfg.batch_size), int(data.synthetic_src_len), int(data.synthetic_tgt_len))
        # on the device already, as the loop's and a bare loop's steps both expect it
        return self.ctx.to_device(self._generated(*shape, generator))
