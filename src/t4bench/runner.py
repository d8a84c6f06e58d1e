"""One benchmark run in this process: validate, set up tracking, call the loop, always close the run."""

from __future__ import annotations

import importlib
import logging
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from t4bench import distributed, hardware, launch, loop, seeding, telemetry
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
    """Entry from the Hydra app: check inputs and hardware before anything is created, then train
    here, or start `hw.count` ranks (one MLflow run, made here and handed to them)."""
    bench_cls = benchmark_class(cfg)
    found = hardware.resolve(cfg)  # hw=auto -> the detected profile; hw.count under a launcher
    if not cfg.data.synthetic:
        bench_cls.check_inputs(cfg)
    checked = hardware.check(cfg, found)
    launch.preflight(cfg)
    hw_tags = checked.tags()
    if checked.cpu_fallback:
        hw_tags["t4bench.device"] = "cpu (no CUDA here; hw.strict=false)"
    if launch.should_spawn(cfg):
        return _spawn_ranks(cfg, output_dir, bench_cls, hw_tags)
    return run_rank(cfg, output_dir, hw_tags=hw_tags)


def _spawn_ranks(
    cfg: DictConfig, output_dir: Path, bench_cls: type[Benchmark], hw_tags: dict[str, str]
) -> dict[str, Any]:
    """hw.count=N without an outer launcher: make the MLflow run, start N ranks on it (torch
    elastic_launch, or horovod.run for dist=horovod), and mark it FAILED/KILLED if they die."""
    # ranks are fresh interpreters without Hydra: hand them the config with ${...} resolved here
    plain = OmegaConf.to_container(cfg, resolve=True)
    hw_tags = {**hw_tags, "t4bench.launcher": "horovod.run" if launch.dist_backend(cfg) == "horovod" else "elastic_launch"}
    tracker = RunTracker(str(cfg.tracking.uri))
    run_id = tracker.start(cfg, {**contract_tags(cfg, bench_cls.throughput_unit), **hw_tags})
    status = "FAILED"
    try:
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


def _share_output_dir(output_dir: Path) -> Path:
    """Under torchrun/horovodrun every rank ran Hydra: all ranks use rank 0's output directory,
    and a non-zero rank's own one (when its timestamp differed) is removed with its log handler."""
    shared = Path(distributed.broadcast_object(str(output_dir)))
    if distributed.rank() != 0:
        for handler in list(logging.getLogger().handlers):
            if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == output_dir:
                logging.getLogger().removeHandler(handler)
                handler.close()
        if shared.resolve() != output_dir.resolve() and output_dir.is_dir():
            leftovers = {p.name for p in output_dir.iterdir()}
            if leftovers <= {".hydra", "__main__.log", "t4bench.log"}:
                shutil.rmtree(output_dir, ignore_errors=True)
    return shared


class _TelemetryMarks:
    """The MLPerf log the loop writes to, telling telemetry when training starts and stops."""

    def __init__(self, log: MLPerfLog, telem: telemetry.Telemetry) -> None:
        self._log = log
        self._telem = telem

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._log.start(key, value, **metadata)
        if key == constants.RUN_START:
            self._telem.mark_start()

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        if key == constants.RUN_STOP:
            self._telem.mark_stop()
        self._log.end(key, value, **metadata)


def _telemetry_sink(tracking_uri: str, run_id: str) -> telemetry.Sink:
    """Telemetry points to MLflow from the sampler thread, on a client of its own."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)

    def sink(points: list[telemetry.MetricPoint]) -> None:
        metrics = [Metric(name, value, stamp, step) for name, value, stamp, step in points]
        for start in range(0, len(metrics), 100):
            client.log_batch(run_id, metrics=metrics[start : start + 100])

    return sink


def _start_telemetry(cfg: DictConfig, ctx: RunContext, run_id: str) -> telemetry.Telemetry:
    settings = cfg.hw.get("telemetry") or {}
    return telemetry.start(
        enabled=bool(settings.get("enabled", True)),
        on_gpu=ctx.device.type == "cuda",
        gpus=max(hardware.outer_local_world_size(), 1),
        interval_s=float(settings.get("interval_s", 1.0)),
        log_interval_s=float(settings.get("log_interval_s", 10.0)),
        sink=_telemetry_sink(str(cfg.tracking.uri), run_id) if run_id else None,
    )


def run_rank(
    cfg: DictConfig,
    output_dir: Path,
    run_id: str | None = None,
    hw_tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Train on this rank. Rank 0 owns the MLflow run (`run_id` when a launcher made it already)."""
    init_started = time.perf_counter()
    launch.init_process_group(cfg)
    rank, world = distributed.rank(), distributed.world_size()
    if world > 1 and launch.launched_world_size() > 1 and launch.launcher() != "none" and run_id is None:
        output_dir = _share_output_dir(output_dir)
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
        num_workers=int(cfg.hw.get("loader_workers", 0) or 0),
    )
    main = rank == 0
    tracker = RunTracker(str(cfg.tracking.uri), run_id) if main else RunTracker.disabled()
    progress = ProgressReporter(str(cfg.progress), enabled=main)
    mlperf = MLPerfLog(output_dir / "mlperf.log" if main else None, str(cfg.model.name))
    callbacks = [instantiate(c) for c in (cfg.callbacks or {}).values()] if main else []
    telem: telemetry.Telemetry = telemetry.Off("not rank 0")
    status, outcome = "FAILED", "failed"
    result: loop.RunResult | None = None
    try:
        with sigterm_raises():
            mlperf.start(constants.INIT_START)
            run_id = distributed.broadcast_object(
                tracker.start(cfg, contract_tags(cfg, bench_cls.throughput_unit))
            )
            if main:
                telem = _start_telemetry(cfg, ctx, run_id)
            global_batch = int(cfg.model.batch_size) * world
            tracker.set_tags({
                "t4bench.world_size": world,
                "t4bench.global_batch_size": global_batch,
                "t4bench.dist_backend": f"{launch.dist_backend(cfg)}/{distributed.backend()}" if world > 1 else "none",
                "t4bench.launcher": launch.launcher(),
                "t4bench.device": f"{device.type} x{world}",
                **hardware.profile_tags(cfg),
                **(hw_tags or {}),
                **telem.tags(),
            })
            tracker.log_metrics({"global_batch_size": global_batch, "world_size": world})
            seeding.seed_everything(int(cfg.seed))
            mlperf.event(constants.SEED, int(cfg.seed))
            for callback in callbacks:
                if hasattr(callback, "on_run_start"):
                    callback.on_run_start(run_id)
            bench = bench_cls(cfg, ctx)
            mode = loop.measure_throughput if cfg.data.synthetic else loop.train_to_target
            kwargs = {} if cfg.data.synthetic else {"callbacks": callbacks}
            result = mode(
                bench, cfg, ctx, mlperf=_TelemetryMarks(mlperf, telem), progress=progress, logger=tracker,
                init_started=init_started, **kwargs,
            )
            outcome = result.outcome
            status = "FINISHED"
    except (KeyboardInterrupt, RunTerminated):
        status, outcome = "KILLED", "killed"
        raise
    finally:
        mlperf.close()
        energy = telem.stop()
        if energy:
            tracker.log_metrics(energy)
        _close_run(cfg, tracker, output_dir, mlperf, status, outcome, result)
    summary = summarize(result, run_id)
    summary.update({k: v for k, v in energy.items() if k in _ENERGY_SUMMARY})
    progress.summary(f"{cfg.model.name} ({cfg.scale.name}) on {cfg.hw.name} x{world}", summary)
    distributed.shutdown()
    return summary


_ENERGY_SUMMARY = ("energy_to_train_kj", "avg_power_w", "max_temp_c", "throttled_fraction")


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


