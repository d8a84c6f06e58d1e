"""MLPerf `:::MLLOG` lines through mlperf_logging.mllog, written by rank 0 only, in the form the
official compliance checker (`python -m mlperf_logging.compliance_checker`) accepts.

The log writes the submission header itself (benchmark under its MLPerf name, open division,
platform, `cache_clear`), formats `eval_accuracy` as each benchmark's rules expect (BLEU as a
fraction, Mask R-CNN's {"BBOX", "SEGM"}), and records the file and line of the call in the
training code, not of this wrapper. Which ruleset checks which benchmark, and how its metric is
written, each benchmark's folder says (t4bench.benchmarks.registry).
"""

from __future__ import annotations

import inspect
import logging
import platform
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from mlperf_logging.mllog import constants
from mlperf_logging.mllog.mllog import MLLogger

from t4bench.benchmarks import registry
from t4bench.benchmarks.about import About

#: t4bench's own event (not an MLPerf key): the run's target metrics and thresholds
TARGET_QUALITY = "target_quality"


def _about(benchmark: str) -> About | None:
    """The benchmark folder's `ABOUT` for an MLPerf benchmark name."""
    return next((about for about in registry.every() if about.mlperf_name == benchmark), None)


def mlperf_name(model: str) -> str:
    """The MLPerf name of t4bench model `model` (the checker knows `resnet`, not `resnet50`)."""
    about = registry.find(model)
    return about.mlperf_name if about is not None else model


def ruleset(benchmark: str) -> str | None:
    """The newest mlperf-logging training ruleset that still knows `benchmark` (an MLPerf name);
    None: none does (NCF)."""
    about = _about(benchmark)
    return about.ruleset if about is not None else None


def accuracy_value(benchmark: str, quality: Mapping[str, float], first_key: str | None = None) -> Any:
    """The `eval_accuracy` value for `quality` (metric -> value) as the benchmark's rules want it."""
    about = _about(benchmark)
    if about is not None and about.accuracy_labels:
        return {label: float(quality[key]) for key, label in about.accuracy_labels.items() if key in quality}
    key = first_key if first_key is not None and first_key in quality else next(iter(quality))
    number = float(quality[key])
    return number / 100.0 if about is not None and about.bleu else number


def _call_site_offset(frame: FrameType | None, log: MLPerfLog) -> int:
    """mllog's `stack_offset` that points at the code calling the log.

    mllog counts from its own helper: offset 1 is the caller of `MLLogger.event`, which is
    `MLPerfLog._log` (`frame`). Frames of this module and methods of `log` itself (a subclass's
    overrides, e.g. t4bench.rank's run_start/run_stop hooks) are the log's own; each adds one.
    """
    depth = 0
    while frame is not None and (frame.f_code.co_filename == __file__ or frame.f_locals.get("self") is log):
        frame = frame.f_back
        depth += 1
    return depth + 1


class MLPerfLog:
    """One run's MLPerf log file. Each run has its own MLLogger on its own Python logger, so that
    several runs in one process (Hydra multirun, threaded sweep jobs) never write into each
    other's files."""

    def __init__(self, path: Path | None, benchmark: str, platform_name: str | None = None) -> None:
        self.path = path
        self.benchmark = mlperf_name(benchmark)
        self._target_key: str | None = None
        self._handler: logging.Handler | None = None
        self._logger: MLLogger | None = None
        if path is None:  # non-zero ranks: every call is a no-op
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        run_logger = logging.getLogger(f"{__name__}.mllog.{uuid.uuid4().hex}")
        run_logger.propagate = False
        run_logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(path)
        run_logger.addHandler(self._handler)
        self._logger = MLLogger(logger=run_logger)
        self.event(constants.SUBMISSION_BENCHMARK, self.benchmark)
        self.event(constants.SUBMISSION_ORG, "t4bench")
        self.event(constants.SUBMISSION_DIVISION, constants.OPEN)
        self.event(constants.SUBMISSION_STATUS, constants.RESEARCH)
        self.event(constants.SUBMISSION_PLATFORM, platform_name or platform.node() or "unknown")
        # honest value: t4bench does not drop the OS page cache before a run
        self.event(constants.CACHE_CLEAR, False)

    @property
    def enabled(self) -> bool:
        return self._logger is not None

    def _log(self, kind: str, key: str, value: Any, metadata: Mapping[str, Any]) -> None:
        if self._logger is None:
            return
        offset = _call_site_offset(inspect.currentframe(), self)
        log = getattr(self._logger, kind)
        log(key=key, value=value, metadata=dict(metadata) or None, stack_offset=offset)

    def event(self, key: str, value: Any = None, **metadata: Any) -> None:
        if key == TARGET_QUALITY and isinstance(value, Mapping) and value:
            self._target_key = str(next(iter(value)))
        if key == constants.EVAL_ACCURACY and not isinstance(value, Mapping):
            # a bare number is the first target metric (the loop's eval_quality)
            value = accuracy_value(self.benchmark, {self._target_key or "value": value}, self._target_key)
        self._log("event", key, value, metadata)

    def init_events(
        self, global_batch: int, train_samples: int, eval_samples: int | None, target: Mapping[str, float]
    ) -> None:
        """The events of a training run's init, in the order every loop writes them."""
        self.event(constants.GLOBAL_BATCH_SIZE, global_batch)
        self.event(constants.TRAIN_SAMPLES, train_samples)
        if eval_samples is not None:
            self.event(constants.EVAL_SAMPLES, eval_samples)
        self.event(TARGET_QUALITY, dict(target))

    def eval_accuracy(self, quality: Mapping[str, float], epoch: float) -> None:
        """All metrics of one evaluation, formatted for the benchmark's rules."""
        self._log(
            "event",
            constants.EVAL_ACCURACY,
            accuracy_value(self.benchmark, quality, self._target_key),
            {"epoch_num": epoch},
        )

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._log("start", key, value, metadata)

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._log("end", key, value, metadata)

    def close(self) -> None:
        if self._handler is not None:
            self._handler.close()
            self._handler = None
        self._logger = None


__all__ = ["MLPerfLog", "accuracy_value", "constants", "mlperf_name", "ruleset"]
