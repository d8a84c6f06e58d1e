"""One benchmark run in this process: validate, set up tracking, call the loop, always close the run."""

from __future__ import annotations

import importlib
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from t4bench import distributed, hardware, launch, loop, seeding
from t4bench.benchmark import Benchmark
from t4bench.context import RunContext
from t4bench.errors import T4BenchError
from t4bench.mlperf import MLPerfLog, constants
from t4bench.progress import ProgressReporter
from t4bench.tracking import RunTracker, contract_tags, resolved_config


class RunTerminated(BaseException):
    """SIGTERM, turned into an exception so the MLflow run is closed as KILLED."""


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
    """Entry from the Hydra app: check inputs before anything is created, then train."""
    bench_cls = benchmark_class(cfg)
    if not cfg.data.synthetic:
        bench_cls.check_inputs(cfg)
    hardware.check(cfg)
    if launch.should_spawn(cfg):
        return launch.spawn(cfg)
    return run_rank(cfg, output_dir)


def run_rank(cfg: DictConfig, output_dir: Path, run_id: str | None = None) -> dict[str, Any]:
    """Train on this rank. Rank 0 owns the MLflow run (`run_id` when a launcher made it already)."""
    init_started = time.perf_counter()
    launch.init_process_group(cfg)
    rank, world = distributed.rank(), distributed.world_size()
    bench_cls = benchmark_class(cfg)
    device = hardware.device_for(cfg, launch.local_rank())
    ctx = RunContext(
        device=device,
        precision=str(cfg.hw.precision),
        rank=rank,
        world_size=world,
        local_rank=launch.local_rank(),
        seed=int(cfg.seed),
        data_root=Path(str(cfg.paths.data_root)),
        channels_last=bool(cfg.model.get("channels_last", False)) and device.type == "cuda",
        num_workers=int(cfg.hw.get("loader_workers", 0)),
    )
    main = rank == 0
    tracker = RunTracker(str(cfg.tracking.uri), run_id) if main else RunTracker.disabled()
    progress = ProgressReporter(str(cfg.progress), enabled=main)
    mlperf = MLPerfLog(output_dir / "mlperf.log" if main else None, str(cfg.model.name))
    callbacks = [instantiate(c) for c in (cfg.callbacks or {}).values()] if main else []
    status, outcome = "FAILED", "failed"
    result: loop.RunResult | None = None
    try:
        with sigterm_raises():
            mlperf.start(constants.INIT_START)
            run_id = distributed.broadcast_object(
                tracker.start(cfg, contract_tags(cfg, bench_cls.throughput_unit))
            )
            tracker.set_tags({"t4bench.world_size": world, "t4bench.global_batch_size": int(cfg.model.batch_size) * world})
            tracker.log_metrics({"global_batch_size": int(cfg.model.batch_size) * world})
            seeding.seed_everything(int(cfg.seed))
            mlperf.event(constants.SEED, int(cfg.seed))
            for callback in callbacks:
                if hasattr(callback, "on_run_start"):
                    callback.on_run_start(run_id)
            bench = bench_cls(cfg, ctx)
            mode = loop.measure_throughput if cfg.data.synthetic else loop.train_to_target
            kwargs = {} if cfg.data.synthetic else {"callbacks": callbacks}
            result = mode(
                bench, cfg, ctx, mlperf=mlperf, progress=progress, logger=tracker,
                init_started=init_started, **kwargs,
            )
            outcome = result.outcome
            status = "FINISHED"
    except (KeyboardInterrupt, RunTerminated):
        status, outcome = "KILLED", "killed"
        raise
    finally:
        mlperf.close()
        _close_run(cfg, tracker, output_dir, mlperf, status, outcome, result)
    summary = summarize(result, run_id)
    progress.summary(f"{cfg.model.name} ({cfg.scale.name}) on {cfg.hw.name} x{world}", summary)
    return summary


def _close_run(
    cfg: DictConfig,
    tracker: RunTracker,
    output_dir: Path,
    mlperf: MLPerfLog,
    status: str,
    outcome: str,
    result: loop.RunResult | None,
) -> None:
    if not tracker.enabled or not tracker.run_id:
        return
    config_file = output_dir / "resolved_config.yaml"
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(OmegaConf.to_yaml(OmegaConf.create(resolved_config(cfg))))
    tracker.log_artifact(config_file)
    if mlperf.path is not None:
        tracker.log_artifact(mlperf.path)
    if result is not None:
        tracker.log_metrics(summary_metrics(result))
    tracker.set_tags({"t4bench.outcome": outcome})
    tracker.end(status)


def summary_metrics(result: loop.RunResult) -> dict[str, float]:
    return {
        # NaN (not a made-up epoch count) when the target was not reached
        "epochs_to_converge": float(result.epochs_to_converge or float("nan")),
        "epochs_run": float(result.epochs_run),
        "time_to_train_s": result.time_to_train_s,
        "converged": 1.0 if result.converged else 0.0,
        "avg_throughput": result.avg_throughput,
    }


def summarize(result: loop.RunResult | None, run_id: str | None) -> dict[str, Any]:
    assert result is not None
    return {
        "outcome": result.outcome,
        **summary_metrics(result),
        **result.final_quality,
        "run_id": run_id or "",
    }


