"""The `model:` section GNMT and Transformer share: sentence lengths and the decoder's
regularisation, on top of the common section (t4bench.benchmarks.model_section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.benchmarks.model_section import DataSection, ModelSection, bounded
from t4bench.spec.bounds import POSITIVE_INT, UNIT_OPEN, Number


@dataclass(frozen=True)
class Seq2SeqData(DataSection):
    #: pairs longer than this many subword tokens on a side are left out of training
    max_len: int = bounded(POSITIVE_INT, 50)
    #: null: the whole test set
    eval_max_sentences: int | None = bounded(Number(integer=True, low=1, nullable=True), None)


@dataclass(frozen=True)
class Seq2SeqArch:
    dropout: float = bounded(UNIT_OPEN, 0.0)
    label_smoothing: float = bounded(UNIT_OPEN, 0.0)


@dataclass(frozen=True)
class Seq2SeqSection(ModelSection):
    data: Seq2SeqData = field(default_factory=Seq2SeqData)
    arch: Seq2SeqArch = field(default_factory=Seq2SeqArch)
