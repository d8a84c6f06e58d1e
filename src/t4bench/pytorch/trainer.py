"""One run's optimisation state for the PyTorch loop: model, optimizer, LR schedule, precision, the
step counters, and the divergence watch. `t4bench.pytorch.loop` decides when to train, evaluate and stop."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import torch

from t4bench import schedule as schedules
from t4bench.benchmark import Benchmark
from t4bench.errors import T4BenchError
from t4bench.progress import ProgressReporter
from t4bench.pytorch import distributed, optim
from t4bench.pytorch.averaging import WeightAverage
from t4bench.pytorch.context import RunContext
from t4bench.pytorch.divergence import DivergenceGuard, DivergenceRule
from t4bench.pytorch.perf import PerfOptions
from t4bench.pytorch.perf_step import build_step, prefetched
from t4bench.spec import RunSpec
from t4bench.tracking.epoch_metrics import train_stats

# how often (in steps) the loss is read back to the host for the progress bar and divergence check;
# reading it every step would force a device sync per step on GPUs
LOSS_READ_INTERVAL = 20


class Trainer:
    """Optimizer, LR schedule, precision and the step counters of one run."""

    def __init__(self, bench: Benchmark, cfg: RunSpec, ctx: RunContext) -> None:
        self.bench = bench
        # the `perf` group: precision/memory-format overrides, compile, fused optimizer, CUDA graphs
        self.perf = PerfOptions.from_config(cfg, ctx.device)
        ctx = self.perf.context(ctx)
        self.ctx = ctx
        model = bench.build_model().to(ctx.device)
        if ctx.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.global_batch = int(cfg.model.batch_size) * ctx.world_size
        ref_batch = int(cfg.model.schedule.ref_batch_size)
        lr = schedules.base_lr(cfg.model.optimizer, self.global_batch, ref_batch)
        self.train_model = self.perf.prepare_model(distributed.wrap_for_data_parallel(model, ctx.device))
        optimizer = self.perf.prepare_optimizer(optim.build(bench.param_groups(model), cfg.model.optimizer, lr))
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.optimizer = distributed.wrap_optimizer(optimizer, model)
        self.schedule = schedules.from_config(cfg.model.schedule, bench.train_size)
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=ctx.precision == "fp16")
        # with Horovod the gradients are reduced before the scaler unscales them (scaler_step)
        optimizer_step = distributed.scaler_step
        clip = float(cfg.model.optimizer.get("clip_grad_norm") or 0.0)
        if clip > 0:
            if self.perf.cuda_graphs:
                raise T4BenchError("model.optimizer.clip_grad_norm does not combine with perf.cuda_graphs=true")
            optimizer_step = distributed.clipped_scaler_step(clip, list(model.parameters()))
        self._train_step = build_step(
            bench.loss, self.train_model, self.optimizer, self.scaler, ctx, self.perf, optimizer_step
        )
        self.guard = DivergenceGuard(DivergenceRule.from_config(cfg.get("divergence")))
        self.samples_seen = 0  # global, across ranks
        self.steps = 0
        # ema.half_life_epochs > 0: evaluation reads an average of the weights (t4bench.pytorch.averaging)
        self.average = WeightAverage.from_config(cfg, model, bench.train_size, self.global_batch)

    def current_lr(self) -> float:
        return self.base_lrs[0] * self.schedule.factor(self.samples_seen, self.steps)

    def step(self, batch: Any) -> tuple[torch.Tensor, int]:
        factor = self.schedule.factor(self.samples_seen, self.steps)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor
        samples = self.bench.samples_in(batch)
        loss, units = self._train_step(self.ctx.to_device(batch))
        self.steps += 1
        if self.average is not None:
            self.average.update(self.model)
        # every rank steps in lock-step on equally sized shards, so the global count is local x ranks
        self.samples_seen += samples * self.ctx.world_size
        loss = loss.detach()
        self.guard.observe(loss)
        return loss, units

    def train_steps(
        self, batches: Iterator[Any], count: int, progress: ProgressReporter, unit: str
    ) -> dict[str, float]:
        """Train on the next `count` batches (fewer if `batches` runs out); return the global
        train_loss, throughput and timing of these steps. Raises `divergence.Diverged`."""
        self.train_model.train()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.ctx.device)
        n_batches, units = 0, 0
        started = time.perf_counter()
        steps: Iterator[Any] = itertools.islice(batches, count)
        if self.perf.prefetch:
            steps = prefetched(steps, self.ctx)
        for batch in steps:
            loss, batch_units = self.step(batch)
            loss_sum += loss.double()
            n_batches += 1
            units += batch_units
            if n_batches % self.perf.loss_read_interval == 0:  # a read waits for the GPU: never each step
                value = float(loss)
                if self.ctx.world_size == 1:  # ranks decide together below, never one alone
                    self.guard.check(value)
                elapsed = time.perf_counter() - started
                progress.batch_done(value, units * self.ctx.world_size / elapsed, unit, steps=n_batches)
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
        train_time = time.perf_counter() - started
        local_reference = self.guard.reference
        total_loss, total_batches, total_units, reference_sum = distributed.all_reduce_sum(
            [float(loss_sum), n_batches, units, local_reference or 0.0], self.ctx.device
        )
        (slowest,) = distributed.all_reduce_max([train_time], self.ctx.device)
        train_loss = total_loss / max(total_batches, 1)
        # the same global numbers on every rank: every rank reaches the same verdict
        reference = reference_sum / self.ctx.world_size if local_reference is not None else None
        self.guard.check(train_loss, "mean train loss", reference=reference)
        return train_stats(train_loss, total_units, slowest, self.current_lr())

    def evaluate(self) -> dict[str, float]:
        """Quality on rank 0 (replicas are identical after each step); every rank gets the result.
        With `ema.half_life_epochs` on, of the averaged weights."""
        metrics: dict[str, float] = {}
        if self.ctx.is_main:
            evaluated = self.average.module if self.average is not None else self.model
            evaluated.eval()
            with torch.no_grad(), self.ctx.autocast():
                metrics = {k: float(v) for k, v in self.bench.evaluate(evaluated).items()}
            self.model.train()
        return distributed.broadcast_object(metrics)
