"""Transformer (MLPerf Training v0.5 translation, WMT17 En-De): `model.py` (model and benchmark);
data, BLEU and the `model:` section are shared with GNMT (t4bench.benchmarks.shared_seq2seq).
Only the standard library loads with this package (t4bench.benchmarks.registry)."""

from t4bench.benchmarks import shared_seq2seq

ABOUT = shared_seq2seq.about("transformer", "wmt17", "wmt17_de_en")
