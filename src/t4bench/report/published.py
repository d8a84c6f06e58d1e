"""The published figures of the R740 study (conf/study/r740.yaml), typed: speed-up ranges of
V100-PCIe over T4 per model, epochs to converge per GPU count, scaling against one GPU.

The YAML is the one place the numbers live; this module only reads and checks it, so a typo in a
figure or a key fails here with the file named, never as a silently missing row."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from t4bench import resources
from t4bench.report.errors import ReportError

#: conf/study/r740.yaml as shipped in the package (t4bench.resources)
STUDY_FILE = resources.conf_dir() / "study" / "r740.yaml"


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    #: the study's figure holds from this GPU count up
    min_count: int = 1
    #: "time" (time to train) or "throughput"
    measure: str = "time"

    def text(self) -> str:
        span = f"{self.low:g}" if self.low == self.high else f"{self.low:g}–{self.high:g}"
        extra = [f"{self.min_count}+ GPUs"] if self.min_count > 1 else []
        extra += ["throughput"] if self.measure != "time" else []
        return f"{span}×" + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class Published:
    source: str
    slower: str
    faster: str
    speedup: dict[str, Range]
    overall: Range
    #: model -> hw -> GPU count -> epochs
    epochs: dict[str, dict[str, dict[int, float]]]
    same_epochs: tuple[str, ...]
    #: model -> hw -> GPU count -> time-to-train speed-up against 1 GPU
    scaling: dict[str, dict[str, dict[int, float]]]

    @property
    def models(self) -> list[str]:
        return sorted({*self.speedup, *self.epochs, *self.same_epochs})

    @property
    def hws(self) -> tuple[str, str]:
        return self.slower, self.faster


def _range(raw: dict[str, Any]) -> Range:
    return Range(float(raw["low"]), float(raw["high"]), int(raw.get("min_count", 1)), str(raw.get("measure", "time")))


def _per_count(raw: dict[str, dict[str, dict[Any, Any]]]) -> dict[str, dict[str, dict[int, float]]]:
    return {
        model: {hw: {int(n): float(v) for n, v in counts.items()} for hw, counts in by_hw.items()}
        for model, by_hw in raw.items()
    }


def load(path: Path = STUDY_FILE) -> Published:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Published(
            source=" ".join(str(raw["source"]).split()),
            slower=str(raw["slower"]),
            faster=str(raw["faster"]),
            speedup={model: _range(r) for model, r in raw["speedup"].items()},
            overall=_range(raw["overall"]),
            epochs=_per_count(raw.get("epochs") or {}),
            same_epochs=tuple(raw.get("same_epochs") or ()),
            scaling=_per_count(raw.get("scaling") or {}),
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise ReportError(f"{path}: not a readable study file ({type(err).__name__}: {err})") from None
