"""MLPerf-style `:::MLLOG` lines through mlperf_logging.mllog, written by rank 0 only."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from mlperf_logging import mllog
from mlperf_logging.mllog import constants


class MLPerfLog:
    """One run's MLPerf log file. Each run gets its own Python logger so that several runs in one
    process (Hydra multirun) never write into each other's files."""

    def __init__(self, path: Path | None, benchmark: str) -> None:
        self.path = path
        self._logger = mllog.get_mllogger()
        self._handler: logging.Handler | None = None
        if path is None:  # non-zero ranks: every call is a no-op
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        run_logger = logging.getLogger(f"t4bench.mllog.{uuid.uuid4().hex}")
        run_logger.propagate = False
        run_logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(path)
        run_logger.addHandler(self._handler)
        mllog.config(logger=run_logger, default_stack_offset=1)
        self._logger = mllog.get_mllogger()
        self.event(constants.SUBMISSION_BENCHMARK, benchmark)
        self.event(constants.SUBMISSION_ORG, "t4bench")
        self.event(constants.SUBMISSION_DIVISION, "open")
        self.event(constants.SUBMISSION_STATUS, "research")

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def event(self, key: str, value: Any = None, **metadata: Any) -> None:
        if self.enabled:
            self._logger.event(key=key, value=value, metadata=metadata or None)

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        if self.enabled:
            self._logger.start(key=key, value=value, metadata=metadata or None)

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        if self.enabled:
            self._logger.end(key=key, value=value, metadata=metadata or None)

    def close(self) -> None:
        if self._handler is not None:
            self._handler.close()
            self._handler = None


__all__ = ["MLPerfLog", "constants"]
