"""NCF / NeuMF (MLPerf Training v0.5 recommendation) on MovieLens: `model.py` (model and benchmark),
`gpu_data.py` (GPU-resident batches), `movielens.py` (the data reader), `config.py` (its `model:`
section). Only the standard library loads with this package (t4bench.benchmarks.registry)."""

from __future__ import annotations

from pathlib import Path

from t4bench.benchmarks.about import About, QualityMetric, ReferenceData
from t4bench.benchmarks.ncf.config import NCFConfig


def _check_ml20m(directory: Path) -> str:
    from t4bench.benchmarks.ncf import movielens

    movielens.check("ml-20m", directory)
    return f"{movielens.expected_file('ml-20m', directory).name} has the ratings header"


ABOUT = About(
    "ncf",
    "ncf",
    None,  # no mlperf-logging training ruleset knows NCF
    (QualityMetric("hr_at_10", "fraction"), QualityMetric("ndcg_at_10", "fraction")),
    NCFConfig,
    datasets={"movielens-100k": "t4bench.benchmarks.ncf.movielens"},
    reference_data={"ml-20m": ReferenceData(_check_ml20m, "T4BENCH_ML20M_DIR", "ml-20m")},
)
