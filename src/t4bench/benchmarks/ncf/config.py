"""NCF's `model:` section: sampled negatives and the embeddings' init, on top of the common
section (t4bench.benchmarks.model_section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from t4bench.benchmarks.model_section import DataSection, ModelSection, bounded
from t4bench.spec.bounds import NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT


@dataclass(frozen=True)
class NCFData(DataSection):
    #: random unseen items per positive, resampled each epoch
    train_negatives: int = bounded(NON_NEGATIVE_INT, 4)
    #: fixed unseen items each held-out item is ranked among
    eval_negatives: int = bounded(POSITIVE_INT, 100)
    #: `input=synthetic`: the reference dataset's sizes (ml-20m), for embedding tables of its size
    synthetic_users: int = bounded(POSITIVE_INT, 138_493)
    synthetic_items: int = bounded(POSITIVE_INT, 26_744)


@dataclass(frozen=True)
class NCFArch:
    gmf_factors: int = 8
    mlp_layers: tuple[int, ...] = (64, 32, 16)
    #: std of the normal init of the four embedding tables (the MLPerf reference's 0.01)
    init_std: float = bounded(POSITIVE, 0.01)


@dataclass(frozen=True)
class NCFConfig(ModelSection):
    data: NCFData = field(default_factory=NCFData)
    arch: NCFArch = field(default_factory=NCFArch)
