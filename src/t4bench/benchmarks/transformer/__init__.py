"""Transformer (MLPerf Training v0.5 translation, WMT17 En-De): `model.py` (model and benchmark);
data, BLEU and the `model:` section are shared with GNMT (t4bench.benchmarks.shared_seq2seq).
Only the standard library loads with this package (t4bench.benchmarks.registry)."""

from __future__ import annotations

from t4bench.benchmarks import shared_seq2seq
from t4bench.benchmarks.about import About
from t4bench.benchmarks.shared_seq2seq.config import Seq2SeqSection

ABOUT = About(
    name="transformer",
    mlperf_name="transformer",
    ruleset="0.7.0",
    metrics=(shared_seq2seq.BLEU,),
    config=Seq2SeqSection,
    bleu=True,
    datasets=shared_seq2seq.DATASETS,
    reference_data=shared_seq2seq.wmt_reference("wmt17", "T4BENCH_WMT17_DIR", "wmt17_de_en"),
)
