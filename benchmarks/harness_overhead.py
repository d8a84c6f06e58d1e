"""Synthetic throughput through t4bench vs a bare PyTorch loop of the same model, batch and precision.

    python benchmarks/harness_overhead.py model=resnet50 hw=h200 [more overrides]

Both measurements run in this one process on the same device: first `t4bench` in `data=synthetic`
mode (its full training step: LR schedule, autocast, GradScaler, progress), then a bare loop over
the same model class, generated batch and loss — zero_grad / forward / backward / step, nothing
else. Prints both figures and their ratio. Needs no dataset.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from t4bench import hardware, optim
from t4bench.context import RunContext
from t4bench.runner import benchmark_class, run_rank

CONF = Path(__file__).resolve().parents[1] / "conf"


def bare_loop_throughput(cfg, ctx: RunContext) -> float:  # type: ignore[no-untyped-def]
    bench = benchmark_class(cfg)(cfg, ctx)
    model = bench.build_model().to(ctx.device)
    if ctx.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = optim.build(model.parameters(), cfg.model.optimizer, float(cfg.model.optimizer.lr))
    scaler = torch.amp.GradScaler(ctx.device.type, enabled=ctx.precision == "fp16")
    batch = ctx.to_device(bench.synthetic_batch())

    def step() -> int:
        with torch.autocast(ctx.device.type, dtype=ctx.amp_dtype or torch.float32,
                            enabled=ctx.amp_dtype is not None):
            loss, units = bench.loss(model, batch)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return units

    for _ in range(int(cfg.data.warmup_steps)):
        step()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize()
    started, units = time.perf_counter(), 0
    for _ in range(int(cfg.data.steps)):
        units += step()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize()
    return units / (time.perf_counter() - started)


def main(overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = ["data=synthetic", "progress=off", f"tracking.uri=sqlite:///{tmp}/mlflow.db",
                f"paths.data_root={tmp}", *overrides]
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="config", overrides=base)
        harness = run_rank(cfg, Path(tmp))["avg_throughput"]
        device = hardware.device_for(cfg, 0)
        ctx = RunContext(device=device, precision=str(cfg.hw.precision), rank=0, world_size=1,
                         local_rank=0, seed=int(cfg.seed), data_root=Path(tmp),
                         channels_last=bool(cfg.model.get("channels_last", False)) and device.type == "cuda")
        bare = bare_loop_throughput(cfg, ctx)
    unit = benchmark_class(cfg).throughput_unit
    print(f"{cfg.model.name} batch {cfg.model.batch_size} {cfg.hw.precision} on {device}: "
          f"t4bench {harness:,.1f} {unit}, bare loop {bare:,.1f} {unit}, ratio {harness / bare:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
