"""`perf.warmup_shapes`: the init-phase warm-up for models whose batch shapes vary (translation with
real sentences). Each new (batch, source, target) shape costs its first step kernel selection,
cuBLAS and attention plans and allocator growth; on one H200 that made Transformer `scale=ding`'s
epoch 1 ~1.4x a later one. Here each shape runs once before run_start, as MLPerf's init phase allows:
on generated tokens (`Benchmark.warmup_batches`), forward and backward without an optimizer step,
inside a forked RNG, with the model's buffers put back, so the run that follows trains exactly as
it would have without it.
"""

from __future__ import annotations

import time

import torch

from t4bench.benchmark import Benchmark
from t4bench.progress import ProgressReporter
from t4bench.pytorch import distributed
from t4bench.pytorch.trainer import Trainer


def warm_up(trainer: Trainer, bench: Benchmark, progress: ProgressReporter) -> int:
    """Run `perf.warmup_shapes` of the benchmark's batch shapes through forward and backward;
    returns how many ran (0 when off, the benchmark has none, or under Horovod)."""
    limit = trainer.perf.warmup_shapes
    if limit == 0:
        return 0
    if distributed.backend() == "horovod":
        # hvd.DistributedOptimizer reduces in its gradient hooks and expects a step after each
        # backward: a backward without one would be counted against the next real step
        progress.line("perf.warmup_shapes: skipped under dist=horovod")
        return 0
    batches = bench.warmup_batches(limit)
    if not batches:
        progress.line(f"perf.warmup_shapes: {bench.name} has no varying batch shapes to warm up")
        return 0
    started = time.perf_counter()
    ctx, model = trainer.ctx, trainer.train_model
    buffers = {name: buffer.clone() for name, buffer in trainer.model.named_buffers()}
    devices = [ctx.device] if ctx.device.type == "cuda" else []
    model.train()
    with torch.random.fork_rng(devices=devices):
        for batch in batches:
            with ctx.autocast():
                loss, _ = bench.loss(model, ctx.to_device(batch))
            trainer.scaler.scale(loss).backward()
            trainer.optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        for name, buffer in trainer.model.named_buffers():
            buffer.copy_(buffers[name])
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    progress.line(
        f"warm-up: {len(batches)} batch shapes, forward + backward in {time.perf_counter() - started:.1f}s "
        f"(perf.warmup_shapes={limit}, before run_start)"
    )
    return len(batches)
