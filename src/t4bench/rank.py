"""One rank's run: join the group, own the MLflow run on rank 0 (or adopt the launcher's), train
through the loop, always close the run. The runner (`t4bench.runner`) checks inputs first."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from t4bench import distributed, hardware, launch, loop, seeding, telemetry
from t4bench.context import RunContext
from t4bench.errors import RunTerminated
from t4bench.mlperf import MLPerfLog, constants
from t4bench.progress import ProgressReporter
from t4bench.runner import benchmark_class, sigterm_raises
from t4bench.tracking import RunTracker, contract_tags, resolved_config


def _share_output_dir(output_dir: Path) -> Path:
    """Under torchrun/horovodrun/srun every rank ran Hydra; ranks > 0 did so without writing its
    record or job log (`t4bench.__main__`). All ranks use rank 0's output directory; a non-zero
    rank's own one, left empty when its timestamp differed, is removed."""
    shared = Path(distributed.broadcast_object(str(output_dir)))
    if distributed.rank() != 0 and shared.resolve() != output_dir.resolve():
        try:
            output_dir.rmdir()  # only when empty: never anything a user or rank 0 wrote
        except OSError:
            pass
    return shared


def _apply_threads(cfg: DictConfig) -> int:
    """Set torch's CPU threads for this rank (hw.threads, or the host's cores split between its
    local ranks); returns the count in effect."""
    chosen = hardware.threads_per_rank(cfg, max(hardware.outer_local_world_size(), 1))
    if chosen is not None:
        torch.set_num_threads(chosen)
    return torch.get_num_threads()


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
    threads = _apply_threads(cfg)
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
                "t4bench.threads": threads,
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


