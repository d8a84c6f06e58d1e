"""GNMT v2 (MLPerf Training v0.5 translation, WMT16 En-De): `model.py` (model and benchmark); data,
BLEU and the `model:` section are shared with Transformer (t4bench.benchmarks.shared_seq2seq).
Only the standard library loads with this package (t4bench.benchmarks.registry)."""

from __future__ import annotations

from t4bench.benchmarks import shared_seq2seq
from t4bench.benchmarks.about import About
from t4bench.benchmarks.shared_seq2seq.config import Seq2SeqSection

ABOUT = About(
    name="gnmt",
    mlperf_name="gnmt",
    ruleset="0.7.0",
    metrics=(shared_seq2seq.BLEU,),
    config=Seq2SeqSection,
    bleu=True,
    datasets=shared_seq2seq.DATASETS,
    reference_data=shared_seq2seq.wmt_reference("wmt16", "T4BENCH_WMT16_DIR", "wmt16_de_en"),
)
