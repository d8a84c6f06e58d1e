"""The one training loop, with MLPerf timing semantics.

init (untimed: data, model) -> run_start -> per epoch: train, evaluate, stop at the target quality
or at max_epochs -> run_stop (success / aborted). Every PyTorch benchmark plugs in through
`t4bench.benchmark.Benchmark`; nothing here knows which model it trains.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from omegaconf import DictConfig

from t4bench import distributed, optim
from t4bench import schedule as schedules
from t4bench.benchmark import Benchmark
from t4bench.context import RunContext
from t4bench.mlperf import MLPerfLog, constants
from t4bench.progress import ProgressReporter

# how often (in steps) the loss is read back to the host for the progress bar and divergence check;
# reading it every step would force a device sync per step on GPUs
LOSS_READ_INTERVAL = 20


class StopRun(Exception):
    """Raised by an epoch callback to end the run early (e.g. an Optuna pruner)."""

    def __init__(self, outcome: str, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome


class EpochCallback(Protocol):
    def on_epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> None: ...


class EpochLogger(Protocol):
    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None: ...


@dataclass
class RunResult:
    #: converged | not_converged | diverged | pruned | throughput_only
    outcome: str
    epochs_run: int
    epochs_to_converge: int | None
    time_to_train_s: float
    avg_throughput: float
    final_quality: dict[str, float] = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        return self.outcome == "converged"


def reached_target(metrics: Mapping[str, float], target: Mapping[str, float]) -> bool:
    return all(metrics[name] >= float(threshold) for name, threshold in target.items())


class Trainer:
    """Optimizer, LR schedule, precision and the step counters of one run."""

    def __init__(self, bench: Benchmark, cfg: DictConfig, ctx: RunContext) -> None:
        self.bench = bench
        self.ctx = ctx
        model = bench.build_model().to(ctx.device)
        if ctx.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.global_batch = int(cfg.model.batch_size) * ctx.world_size
        ref_batch = int(cfg.model.schedule.ref_batch_size)
        lr = optim.base_lr(cfg.model.optimizer, self.global_batch, ref_batch)
        self.train_model = distributed.wrap_for_data_parallel(model, ctx.device)
        optimizer = optim.build(bench.param_groups(model), cfg.model.optimizer, lr)
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.optimizer = distributed.wrap_optimizer(optimizer, model)
        self.schedule = schedules.from_config(cfg.model.schedule, bench.train_size)
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=ctx.precision == "fp16")
        self.samples_seen = 0  # global, across ranks
        self.steps = 0

    def current_lr(self) -> float:
        return self.base_lrs[0] * self.schedule.factor(self.samples_seen, self.steps)

    def step(self, batch: Any) -> tuple[torch.Tensor, int]:
        factor = self.schedule.factor(self.samples_seen, self.steps)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor
        samples = self.bench.samples_in(batch)
        batch = self.ctx.to_device(batch)
        with torch.autocast(
            device_type=self.ctx.device.type,
            dtype=self.ctx.amp_dtype or torch.float32,
            enabled=self.ctx.amp_dtype is not None,
        ):
            loss, units = self.bench.loss(self.train_model, batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        # step + update; with Horovod the gradients are reduced before the scaler unscales them
        distributed.scaler_step(self.scaler, self.optimizer)
        self.steps += 1
        # every rank steps in lock-step on equally sized shards, so the global count is local x ranks
        self.samples_seen += samples * self.ctx.world_size
        return loss.detach(), units

    def train_epoch(self, batches: Iterable[Any], progress: ProgressReporter, unit: str) -> dict[str, float]:
        """Train over `batches`; return global train_loss, throughput and timing."""
        self.train_model.train()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.ctx.device)
        n_batches, units = 0, 0
        started = time.perf_counter()
        for batch in batches:
            loss, batch_units = self.step(batch)
            loss_sum += loss.double()
            n_batches += 1
            units += batch_units
            if n_batches % LOSS_READ_INTERVAL == 0 or progress.mode == "bar":
                elapsed = time.perf_counter() - started
                progress.batch_done(float(loss), units * self.ctx.world_size / elapsed, unit)
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
        train_time = time.perf_counter() - started
        total_loss, total_batches, total_units = distributed.all_reduce_sum(
            [float(loss_sum), n_batches, units], self.ctx.device
        )
        (slowest,) = distributed.all_reduce_max([train_time], self.ctx.device)
        return {
            "train_loss": total_loss / max(total_batches, 1),
            "throughput": total_units / slowest if slowest > 0 else 0.0,
            "train_time_s": slowest,
            "lr": self.current_lr(),
        }

    def evaluate(self) -> dict[str, float]:
        """Quality on rank 0 (replicas are identical after each step); every rank gets the result."""
        metrics: dict[str, float] = {}
        if self.ctx.is_main:
            self.model.eval()
            with (
                torch.no_grad(),
                torch.autocast(
                    device_type=self.ctx.device.type,
                    dtype=self.ctx.amp_dtype or torch.float32,
                    enabled=self.ctx.amp_dtype is not None,
                ),
            ):
                metrics = {k: float(v) for k, v in self.bench.evaluate(self.model).items()}
            self.model.train()
        return distributed.broadcast_object(metrics)


def train_to_target(
    bench: Benchmark,
    cfg: DictConfig,
    ctx: RunContext,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
    callbacks: Sequence[EpochCallback] = (),
    init_started: float,
) -> RunResult:
    """Train until every `cfg.model.target` metric is reached or `cfg.max_epochs` epochs ran."""
    trainer = Trainer(bench, cfg, ctx)
    target: Mapping[str, float] = cfg.model.target
    quality_key = next(iter(target))
    max_epochs = int(cfg.max_epochs)
    unit = bench.throughput_unit
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    mlperf.event(constants.TRAIN_SAMPLES, bench.train_size)
    mlperf.event("target_quality", dict(target))
    distributed.barrier()
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    run_started = time.perf_counter()
    progress.line(f"init took {run_started - init_started:.1f}s; training to {dict(target)}")

    outcome, epochs_to_converge, epoch = "not_converged", None, 0
    throughputs: list[float] = []
    metrics: dict[str, float] = {}
    for epoch in range(1, max_epochs + 1):
        mlperf.start(constants.EPOCH_START, epoch_num=epoch)
        epoch_started = time.perf_counter()
        batches = bench.train_batches(epoch)
        progress.epoch_start(epoch, len(batches))
        stats = trainer.train_epoch(batches, progress, unit)
        mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
        throughputs.append(stats["throughput"])
        if not math.isfinite(stats["train_loss"]):
            outcome = "diverged"
            progress.epoch_end(epoch, {**stats, "epoch_time_s": time.perf_counter() - epoch_started}, unit)
            break
        mlperf.start(constants.EVAL_START, epoch_num=epoch)
        quality = trainer.evaluate()
        mlperf.end(constants.EVAL_STOP, epoch_num=epoch)
        mlperf.event(constants.EVAL_ACCURACY, quality[quality_key], epoch_num=epoch)
        metrics = {
            **stats,
            "eval_quality": quality[quality_key],
            **{f"eval_{name}": value for name, value in quality.items()},
            "epoch_time_s": time.perf_counter() - epoch_started,
        }
        logger.log_epoch(epoch, metrics)
        progress.epoch_end(epoch, metrics, unit)
        if reached_target(quality, target):
            outcome, epochs_to_converge = "converged", epoch
            break
        stop = _run_callbacks(callbacks, epoch, metrics) if ctx.is_main else None
        stop = distributed.broadcast_object(stop)
        if stop is not None:
            outcome = stop
            break

    time_to_train = time.perf_counter() - run_started
    status = constants.SUCCESS if outcome == "converged" else constants.ABORTED
    mlperf.end(constants.RUN_STOP, status=status)
    return RunResult(
        outcome=outcome,
        epochs_run=epoch,
        epochs_to_converge=epochs_to_converge,
        time_to_train_s=time_to_train,
        avg_throughput=sum(throughputs) / len(throughputs) if throughputs else 0.0,
        final_quality={k: v for k, v in metrics.items() if k.startswith("eval_")},
    )


def measure_throughput(
    bench: Benchmark,
    cfg: DictConfig,
    ctx: RunContext,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
    init_started: float,
) -> RunResult:
    """`data=synthetic`: the same training step on one generated batch, for a fixed step count."""
    trainer = Trainer(bench, cfg, ctx)
    # once, before timing: Trainer.step then finds it on the device (NCF builds it on the host)
    batch = ctx.to_device(bench.synthetic_batch())
    unit = bench.throughput_unit
    mlperf.event(constants.GLOBAL_BATCH_SIZE, trainer.global_batch)
    # untimed warm-up: kernel selection, allocator growth, lazy init
    trainer.train_epoch([batch] * int(cfg.data.warmup_steps), ProgressReporter("off"), unit)
    distributed.barrier()
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    started = time.perf_counter()
    progress.epoch_start(1, int(cfg.data.steps))
    stats = trainer.train_epoch([batch] * int(cfg.data.steps), progress, unit)
    elapsed = time.perf_counter() - started
    metrics = {**stats, "epoch_time_s": elapsed}
    logger.log_epoch(1, metrics)
    progress.epoch_end(1, metrics, unit)
    mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
    return RunResult(
        outcome="throughput_only",
        epochs_run=0,
        epochs_to_converge=None,
        time_to_train_s=elapsed,
        avg_throughput=stats["throughput"],
    )


def _run_callbacks(callbacks: Sequence[EpochCallback], epoch: int, metrics: Mapping[str, float]) -> str | None:
    """The outcome a callback asked for, or None to keep training."""
    for callback in callbacks:
        try:
            callback.on_epoch_end(epoch, metrics)
        except StopRun as stop:
            return stop.outcome
    return None
