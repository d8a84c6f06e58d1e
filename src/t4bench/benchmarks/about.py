"""What a benchmark folder says about itself without loading a framework: its MLPerf names, its
quality metrics' scales, the typed class of its `model:` section and its datasets. Each folder's
`__init__.py` defines one `ABOUT`; the registry (`t4bench.benchmarks.registry`) hands it to the
preflight, the MLPerf log and the data commands, so none of them keeps a per-model table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class QualityMetric:
    """One metric the benchmark's `evaluate` returns, and its scale: a target of 0 is met before
    training, above the top never."""

    name: str
    scale: Literal["fraction", "percent"]

    @property
    def high(self) -> float:
        return 1.0 if self.scale == "fraction" else 100.0


@dataclass(frozen=True)
class ReferenceData:
    """A reference-scale dataset `t4bench data check NAME` looks at: its check (returns a summary,
    raises `DatasetMissingError` / `DataError`), and where scale=reference reads it (an
    environment variable, else this folder under the data root)."""

    check: Callable[[Path], str]
    env: str
    under: str


@dataclass(frozen=True)
class About:
    name: str
    #: the name the MLPerf compliance checker knows (`resnet`, not `resnet50`)
    mlperf_name: str
    #: the newest mlperf-logging training ruleset that still knows it; None: none does (NCF)
    ruleset: str | None
    metrics: tuple[QualityMetric, ...]
    #: the dataclass of its `model:` section (t4bench.benchmarks.model_section)
    config: type
    #: BLEU is 0-100 from sacrebleu; the MLPerf rules expect a fraction
    bleu: bool = False
    #: `eval_accuracy` as a map of these labels (metric -> label), as Mask R-CNN's rules want it
    #: ({"BBOX": ..., "SEGM": ...}); empty: the first target metric's number
    accuracy_labels: Mapping[str, str] = field(default_factory=dict)
    #: mini datasets `t4bench data prepare NAME` writes: name -> module with `prepare(data_root)`
    datasets: Mapping[str, str] = field(default_factory=dict)
    reference_data: Mapping[str, ReferenceData] = field(default_factory=dict)

    def metric(self, name: str) -> QualityMetric | None:
        return next((metric for metric in self.metrics if metric.name == name), None)
