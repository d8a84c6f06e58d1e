"""One rank's run, framework-neutral: join the group through the benchmark's framework
(`t4bench.frameworks`), own the MLflow run, the MLPerf log and telemetry on rank 0 (or adopt the
run a launching process made), seed, train, and always close the run.

No framework is imported here: the PyTorch part is `t4bench.pytorch.rank`. The runner
(`t4bench.runner`) checks the inputs first and hands over the `RunEnvironment`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from t4bench import frameworks, gc_pause, hardware, seeding, telemetry
from t4bench.benchmark import Benchmark, benchmark_class
from t4bench.errors import RunTerminated, T4BenchError
from t4bench.framework import RankSession, RunServices, TrainResult
from t4bench.mlperf import MLPerfLog, constants
from t4bench.progress import ProgressReporter
from t4bench.run_env import RunEnvironment
from t4bench.signals import sigterm_raises
from t4bench.spec import RunSpec
from t4bench.tracking import names, process
from t4bench.tracking.run_facts import contract_tags, resolved_config

#: telemetry summary metrics that also go into the run's printed summary
_ENERGY_SUMMARY = (names.ENERGY_TO_TRAIN_KJ, names.AVG_POWER_W, names.MAX_TEMP_C, names.THROTTLED_FRACTION)


class WindowedLog(MLPerfLog):
    """The run's MLPerf log; its run_start and run_stop also open and close telemetry's window, so
    energy to train covers exactly the timed span whichever loop writes them."""

    def __init__(self, path: Path | None, benchmark: str) -> None:
        super().__init__(path, benchmark)
        self.window: telemetry.Telemetry = telemetry.Off("not started")
        #: called before init_stop (and run_start, for a loop without init_stop): rank 0 waits
        #: there, in the untimed init, for its MLflow run
        self.before_timing: Callable[[], object] = lambda: None

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        if key == constants.RUN_START:
            self.before_timing()
        super().start(key, value, **metadata)
        if key == constants.RUN_START:
            self.window.mark_start()
            gc_pause.resume()  # training collects only what training makes

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        if key == constants.INIT_STOP:
            self.before_timing()
        if key == constants.RUN_STOP:
            self.window.mark_stop()
        super().end(key, value, **metadata)


class RankRecords:
    """What rank 0 records of one run (MLflow run, MLPerf log, telemetry, progress, callbacks);
    on the other ranks every record is a no-op. `close` never leaves the MLflow run RUNNING."""

    def __init__(
        self, cfg: RunSpec, env: RunEnvironment, output_dir: Path, run_id: str | None, init_started: float
    ) -> None:
        main = env.is_main
        self.cfg, self.env, self.output_dir = cfg, env, output_dir
        if not main:
            process.discard()  # only rank 0 tracks the run
        # MLflow in a tracking process when the command started one (t4bench.tracking.process)
        self.tracker = process.tracker(str(cfg.tracking.uri) if main else "", run_id)
        budget = None if cfg.input.synthetic else int(cfg.max_epochs)  # throughput runs have no epochs
        self.progress = ProgressReporter(str(cfg.progress), enabled=main, max_epochs=budget)
        self.mlperf = WindowedLog(output_dir / names.MLPERF_LOG_FILE if main else None, str(cfg.model.name))
        self.callbacks = [instantiate(c) for c in (cfg.callbacks or {}).values()] if main else []
        self.telemetry: telemetry.Telemetry = telemetry.Off("not rank 0")
        self.status, self.outcome = names.FAILED, names.OUTCOME_FAILED
        self.result: TrainResult | None = None
        #: time.perf_counter() when the rank started: run_wall_s counts from it
        self.init_started = init_started
        self.wall_s = 0.0
        self.energy: dict[str, float] = {}
        self.heartbeat: process.Stoppable | None = None
        #: the run's id as rank 0 broadcast it, on every rank of a group of several
        self.shared_run_id = ""

    def open(self, session: RankSession, bench_cls: type[Benchmark]) -> None:
        """The MLPerf init, the MLflow run (made, or adopted) with its tags, telemetry. A tracking
        process makes the run while this one builds data and model: `run_id` waits for it, and
        run_start does, so no run trains without its MLflow run."""
        cfg, env = self.cfg, self.env
        self.mlperf.start(constants.INIT_START)
        self.tracker.begin(cfg, env, contract_tags(cfg, env, bench_cls))
        if env.world_size > 1:  # every rank names the run: rank 0's id, now
            self.shared_run_id = session.broadcast(self.tracker.run_id or "")
        if env.is_main:
            self.telemetry = self._start_telemetry()
            if self.tracker.enabled:  # host/pid/heartbeat tags: `t4bench runs repair` closes it if this process dies
                self.heartbeat = self.tracker.heartbeat()
            self.mlperf.window = self.telemetry
            self.mlperf.before_timing = lambda: self.run_id
        global_batch = int(cfg.model.batch_size) * env.world_size
        self.tracker.set_tags(
            {
                names.WORLD_SIZE: env.world_size,
                names.GLOBAL_BATCH_SIZE: global_batch,
                names.LAUNCHER: env.launcher,
                **session.tags(),
                **hardware.profile_tags(env.hw),
                **env.tags,
                **self.telemetry.tags(),
            }
        )
        self.tracker.log_metrics(
            {names.GLOBAL_BATCH_SIZE_METRIC: global_batch, names.WORLD_SIZE_METRIC: env.world_size}
        )

    @property
    def run_id(self) -> str:
        """The MLflow run's id ("" without one); rank 0 waits for a tracking process making it."""
        return self.shared_run_id or self.tracker.run_id or ""

    def _start_telemetry(self) -> telemetry.Telemetry:
        settings = self.env.hw.get("telemetry") or {}
        return telemetry.start(
            enabled=bool(settings.get("enabled", True)),
            on_gpu=self.env.device_kind == "cuda",
            gpus=max(self.env.local_world_size, 1),
            interval_s=float(settings.get("interval_s", 1.0)),
            log_interval_s=float(settings.get("log_interval_s", 10.0)),
            sink=self.tracker.telemetry_sink() if self.tracker.enabled else None,
        )

    def run_started(self) -> None:
        for callback in self.callbacks:
            if hasattr(callback, "on_run_start"):
                callback.on_run_start(self.run_id)

    def services(self, init_started: float) -> RunServices:
        return RunServices(self.mlperf, self.progress, self.tracker, self.callbacks, init_started)

    def finished(self, result: TrainResult) -> None:
        self.status, self.outcome, self.result = names.FINISHED, result.outcome, result

    def killed(self) -> None:
        self.status, self.outcome = names.KILLED, names.OUTCOME_KILLED
        self.tracker.stopping()  # a run a stalled store still makes is not waited for

    def close(self) -> None:
        """Close the MLPerf log and telemetry, and end the MLflow run with its artifacts and status."""
        self.wall_s = time.perf_counter() - self.init_started
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.mlperf.close()
        self.energy = self.telemetry.stop()
        if self.energy:
            self.tracker.log_metrics(self.energy)
        tracker = self.tracker
        if not tracker.enabled:
            return
        if not tracker.run_id:  # none made; a tracking process still making one closes it so
            tracker.end(self.status)
            return
        config_file = self.output_dir / names.RESOLVED_CONFIG_FILE
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(OmegaConf.to_yaml(OmegaConf.create(resolved_config(self.cfg, self.env))))
        tracker.log_artifact(config_file)
        if self.mlperf.path is not None:
            tracker.log_artifact(self.mlperf.path)
        outcome_tags = {names.OUTCOME: self.outcome}
        # every run, a failed or killed one too: how long this attempt took
        tracker.log_metrics({names.RUN_WALL_S: self.wall_s})
        if self.result is not None:
            tracker.log_metrics(summary_metrics(self.result))
            if self.result.note:
                outcome_tags[names.OUTCOME_NOTE] = self.result.note[:5000]  # MLflow caps tag values
        tracker.set_tags(outcome_tags)
        tracker.end(self.status)


def _share_output_dir(session: RankSession, env: RunEnvironment, output_dir: Path) -> Path:
    """Under torchrun/horovodrun/srun every rank ran Hydra; ranks > 0 did so without writing its
    record or job log (`t4bench.__main__`). All ranks use rank 0's output directory; a non-zero
    rank's own one, left empty when its timestamp differed, is removed."""
    shared = Path(session.broadcast(str(output_dir)))
    if not env.is_main and shared.resolve() != output_dir.resolve():
        with contextlib.suppress(OSError):
            output_dir.rmdir()  # only when empty: never anything a user or rank 0 wrote
    return shared


def run_rank(cfg: RunSpec, env: RunEnvironment, output_dir: Path, run_id: str | None = None) -> dict[str, Any]:
    """Train on this rank. Rank 0 owns the MLflow run (`run_id` when a launching process made it)."""
    init_started = time.perf_counter()
    bench_cls = benchmark_class(cfg)
    session = frameworks.join(cfg, env, bench_cls)
    if env.outer_launcher and env.world_size > 1 and run_id is None:
        output_dir = _share_output_dir(session, env, output_dir)
    records = RankRecords(cfg, env, output_dir, run_id, init_started)
    try:
        with sigterm_raises():
            records.open(session, bench_cls)
            seeding.seed_python(int(cfg.seed))
            session.seed(int(cfg.seed))
            records.mlperf.event(constants.SEED, int(cfg.seed))
            records.run_started()
            records.finished(session.train(bench_cls, records.services(init_started)))
    except (KeyboardInterrupt, RunTerminated) as stop:
        records.killed()
        if isinstance(stop, RunTerminated):
            stop.run_id = records.run_id
            if records.tracker.run_pending:
                stop.closed = "no MLflow run had been created (the tracking store had not made it yet)"
        raise
    except T4BenchError as err:  # the one line names the run it ended (t4bench.__main__)
        err.run_id = records.run_id
        raise
    finally:
        records.close()
    summary = summarize(records.result, records.run_id)
    summary[names.RUN_WALL_S] = records.wall_s
    summary.update({k: v for k, v in records.energy.items() if k in _ENERGY_SUMMARY})
    records.progress.summary(f"{cfg.model.name} ({cfg.scale.name}) on {env.hw.name} x{env.world_size}", summary)
    # only after a finished run: leaving the group while other ranks wait in a collective can hang
    session.close()
    return summary


def summary_metrics(result: TrainResult) -> dict[str, float]:
    """The run's once-logged metrics. time_to_train_s and epochs_to_converge only when it converged:
    MLPerf has no time to train for a run that did not (a value there, even NaN, sorts and averages
    as one); run_train_s says how long every run trained."""
    scores: dict[str, float] = {}
    if result.converged and result.time_to_train_s is not None and result.epochs_to_converge is not None:
        scores = {names.TIME_TO_TRAIN_S: result.time_to_train_s, names.EPOCHS_TO_CONVERGE: result.epochs_to_converge}
    return {
        **scores,
        names.EPOCHS_RUN: float(result.epochs_run),
        names.RUN_TRAIN_S: result.train_s,
        names.CONVERGED: 1.0 if result.converged else 0.0,
        names.AVG_THROUGHPUT: result.avg_throughput,
        **({} if result.peak_memory_gib is None else {names.PEAK_GPU_MEMORY_GIB: result.peak_memory_gib}),
    }


def summarize(result: TrainResult | None, run_id: str | None) -> dict[str, Any]:
    assert result is not None
    return {
        "outcome": result.outcome,
        **summary_metrics(result),
        **result.final_quality,
        "run_id": run_id or "",
    }
