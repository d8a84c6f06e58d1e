"""What GNMT and Transformer share: the translation benchmark base (`benchmark.py`, `parts.py`),
the mini pseudo-language task (`translation.py`, `ding.py`, `pseudo_*.py`), the WMT reference
corpora (`wmt.py`), the `model:` section (`config.py`). Not a benchmark itself."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.about import QualityMetric, ReferenceData

DATASETS = {"translation": "t4bench.benchmarks.shared_seq2seq.translation"}
#: SacreBLEU, 0..100
BLEU = QualityMetric("bleu", "percent")


def wmt_reference(name: str, env: str, under: str) -> dict[str, ReferenceData]:
    """`t4bench data check wmt16|wmt17`: the corpus prepared by `t4bench data prepare NAME --from`."""

    def check(directory: Path) -> str:
        from t4bench.benchmarks.shared_seq2seq import wmt

        return wmt.check(name, directory)

    return {name: ReferenceData(check, env, under)}
