"""Entry from the Hydra app: check the inputs before anything heavy loads, then train here or start
`hw.count` ranks on one MLflow run.

Only the preflight checks' light modules (Hydra, OmegaConf, stdlib) load at import: torch, MLflow
and the benchmark's module load after them, so a wrong `hw=` or `scale=` fails in about a second.
What one rank does lives in `t4bench.rank`.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from t4bench import launch, preflight
from t4bench.errors import RunTerminated, T4BenchError

if TYPE_CHECKING:
    from t4bench.benchmark import Benchmark
    from t4bench.tracking import RunTracker


@contextmanager
def sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (threaded sweep jobs)
        return

    def handler(signum: int, frame: Any) -> None:
        raise RunTerminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def benchmark_class(cfg: DictConfig) -> type[Benchmark]:
    module_name, _, class_name = str(cfg.model.benchmark).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as err:
        raise T4BenchError(f"model.benchmark={cfg.model.benchmark!r} cannot be loaded: {err}") from err
    return cls  # type: ignore[no-any-return]


def run(cfg: DictConfig, output_dir: Path) -> dict[str, Any]:
    """Check scale, hardware, backend and data before any run exists, then train here, or start
    `hw.count` ranks (one MLflow run, made here and handed to them)."""
    checked = preflight.check(cfg)  # no torch yet: hw=auto resolved, hw.count from a launcher
    launch.preflight(cfg)
    bench_cls = benchmark_class(cfg)
    if not cfg.data.synthetic:
        bench_cls.check_inputs(cfg)
    hw_tags = checked.tags()
    if checked.cpu_fallback:
        hw_tags["t4bench.device"] = "cpu (no CUDA here; hw.strict=false)"
    if launch.should_spawn(cfg):
        return _spawn_ranks(cfg, output_dir, bench_cls, hw_tags)
    from t4bench.rank import run_rank  # torch, MLflow: only now

    return run_rank(cfg, output_dir, hw_tags=hw_tags)




def _spawn_ranks(
    cfg: DictConfig, output_dir: Path, bench_cls: type[Benchmark], hw_tags: dict[str, str]
) -> dict[str, Any]:
    """hw.count=N without an outer launcher: make the MLflow run, start N ranks on it (torch
    elastic_launch, or horovod.run for dist=horovod), and mark it FAILED/KILLED if they die."""
    from t4bench.tracking import RunTracker, contract_tags

    # ranks are fresh interpreters without Hydra: hand them the config with ${...} resolved here
    plain = OmegaConf.to_container(cfg, resolve=True)
    hw_tags = {**hw_tags, "t4bench.launcher": "horovod.run" if launch.dist_backend(cfg) == "horovod" else "elastic_launch"}
    tracker = RunTracker(str(cfg.tracking.uri))
    run_id = tracker.start(cfg, {**contract_tags(cfg, bench_cls.throughput_unit), **hw_tags})
    status = "FAILED"
    try:
        with sigterm_raises():
            summary = launch.spawn(cfg, _spawned_rank, (plain, str(output_dir), run_id, hw_tags))
        status = "FINISHED"
        return summary  # type: ignore[no-any-return]
    except (KeyboardInterrupt, RunTerminated):
        status = "KILLED"
        raise
    finally:
        if status != "FINISHED":
            _fail_if_running(tracker, status)


def _spawned_rank(plain: dict[str, Any], output_dir: str, run_id: str, hw_tags: dict[str, str]) -> dict[str, Any]:
    """One rank started by `_spawn_ranks` (importable by name: ranks are fresh interpreters)."""
    from t4bench.rank import run_rank

    cfg = OmegaConf.create(plain)
    assert isinstance(cfg, DictConfig)
    try:
        return run_rank(cfg, Path(output_dir), run_id=run_id, hw_tags=hw_tags)
    except T4BenchError as err:
        print(f"t4bench: error: {err}", file=sys.stderr, flush=True)
        raise


def _fail_if_running(tracker: RunTracker, status: str) -> None:
    if tracker.client is None or not tracker.run_id:
        return
    try:
        if tracker.client.get_run(tracker.run_id).info.status == "RUNNING":
            tracker.set_tags({"t4bench.outcome": "killed" if status == "KILLED" else "failed"})
            tracker.end(status)
    except Exception:  # the store is gone too: nothing more to do
        pass
