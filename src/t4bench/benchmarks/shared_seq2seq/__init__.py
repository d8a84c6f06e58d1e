"""What GNMT and Transformer share: the translation benchmark base (`benchmark.py`, `parts.py`),
the mini pseudo-language task (`translation.py`, `ding.py`, `pseudo_*.py`), the WMT reference
corpora (`wmt.py`), the `model:` section (`config.py`) and the `ABOUT` both build (`about`). Not a
benchmark itself."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.about import About, QualityMetric, ReferenceData
from t4bench.benchmarks.shared_seq2seq.config import Seq2SeqSection

#: the newest mlperf-logging training ruleset that still knows GNMT and Transformer
RULESET = "0.7.0"
#: data/translation/{mini,ding}: the mini pseudo-language task and the Ding pairs
DATASETS = {"translation": "t4bench.benchmarks.shared_seq2seq.translation"}


def about(name: str, corpus: str, under: str) -> About:
    """The `ABOUT` of translation benchmark `name` (also its MLPerf name), whose reference scale
    reads WMT `corpus` from $T4BENCH_<CORPUS>_DIR or `under` the data root. Its metric is SacreBLEU
    (0..100; the MLPerf log writes it as a fraction)."""

    def check(directory: Path) -> str:  # `t4bench data check <corpus>`
        from t4bench.benchmarks.shared_seq2seq import wmt

        return wmt.check(corpus, directory)

    reference = {corpus: ReferenceData(check, f"T4BENCH_{corpus.upper()}_DIR", under)}
    bleu = (QualityMetric("bleu", "percent"),)
    return About(name, name, RULESET, bleu, Seq2SeqSection, True, datasets=DATASETS, reference_data=reference)
