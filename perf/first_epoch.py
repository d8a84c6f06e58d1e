"""Where a translation model's first epoch goes (Transformer/GNMT `scale=ding` on a GPU), through the
loop's Trainer in this process:

    python perf/first_epoch.py model=transformer scale=ding hw=h200 [--epochs 3]

Per epoch: the time to build the batches' loader, each step timed with a device sync around it
(the sync costs some overlap; the split is what matters), split into steps whose (source, target)
shape was new to the process and steps whose shape was seen before; the number of distinct shapes;
then the evaluation (greedy decoding), with the decoded lengths. With `perf.warmup_shapes` on (the
H200 and H100 profiles' Transformer), its init-phase warm-up runs first, as in the loop. With `--profile`, epoch 1's ten
costliest CUDA/CPU ops from torch.profiler are printed too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from harness_overhead import CONF, run_context, synchronize
from hydra import compose, initialize_config_dir

from t4bench.benchmark import benchmark_class
from t4bench.progress import ProgressReporter
from t4bench.pytorch import shape_warmup
from t4bench.pytorch.loop import Trainer
from t4bench.spec import build_spec


def timed_epoch(trainer: Trainer, bench, epoch: int, seen: set[tuple[int, ...]]) -> dict[str, float]:
    device = trainer.ctx.device
    started = time.perf_counter()
    batches = bench.train_batches(epoch)
    iterator = iter(batches)
    loader_start = time.perf_counter() - started
    new_t, old_t, new_n, old_n, waits = 0.0, 0.0, 0, 0, 0.0
    trainer.train_model.train()
    while True:
        fetch = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            break
        waits += time.perf_counter() - fetch
        shape = (*batch.src.shape, *batch.tgt_in.shape)
        synchronize(device)
        step_start = time.perf_counter()
        trainer.step(batch)
        synchronize(device)
        spent = time.perf_counter() - step_start
        if shape in seen:
            old_t, old_n = old_t + spent, old_n + 1
        else:
            seen.add(shape)
            new_t, new_n = new_t + spent, new_n + 1
    train = time.perf_counter() - started
    eval_start = time.perf_counter()
    quality = trainer.evaluate()
    evaluation = time.perf_counter() - eval_start
    return {
        "train_s": train,
        "loader_start_s": loader_start,
        "batch_wait_s": waits,
        "new_shape_steps": new_n,
        "new_shape_s": new_t,
        "seen_shape_steps": old_n,
        "seen_shape_s": old_t,
        "eval_s": evaluation,
        **{f"eval_{k}": v for k, v in quality.items()},
    }


def decoded_lengths(trainer: Trainer, bench, count: int = 200) -> float:
    """Mean length of greedy outputs for the first `count` test sentences (untrained: max length)."""
    trainer.model.eval()
    with torch.no_grad(), trainer.ctx.autocast():
        texts = bench.translate(trainer.model, bench._test_ids[:count])
    trainer.model.train()
    return statistics.mean(len(bench.tokenizer.encode([t])[0]) for t in texts)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            # compose() has no Hydra runtime to resolve the default data root from
            data_root = os.environ.get("T4BENCH_DATA_DIR", str(Path.cwd() / "data"))
            cfg = build_spec(
                compose(
                    config_name="config",
                    overrides=[
                        "progress=off",
                        f"paths.data_root={data_root}",
                        f"tracking.uri=sqlite:///{tmp}/unused.db",
                        *args.overrides,
                    ],
                )
            )
        ctx = run_context(cfg, Path(str(cfg.paths.data_root)))
        torch.manual_seed(int(cfg.seed))
        started = time.perf_counter()
        bench = benchmark_class(cfg)(cfg, ctx)
        trainer = Trainer(bench, cfg, ctx)
        print(
            f"init (data + tokenisation + model): {time.perf_counter() - started:.2f}s; "
            f"cudnn.benchmark={torch.backends.cudnn.benchmark}; workers={ctx.num_workers}; tmp {tmp}",
            flush=True,
        )
        # perf.warmup_shapes (the loop's init-phase warm-up, before run_start): the epochs below
        # then show what is left of epoch 1's extra time
        shape_warmup.warm_up(trainer, bench, ProgressReporter("plain"))
        print(f"mean decoded length before training: {decoded_lengths(trainer, bench):.1f} tokens", flush=True)
        seen: set[tuple[int, ...]] = set()
        for epoch in range(1, args.epochs + 1):
            if epoch == 1 and args.profile:
                from torch.profiler import ProfilerActivity, profile

                activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.device.type == "cuda" else [])
                with profile(activities=activities) as prof:
                    stats = timed_epoch(trainer, bench, epoch, seen)
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10), flush=True)
            else:
                stats = timed_epoch(trainer, bench, epoch, seen)
            print(
                f"epoch {epoch}: "
                + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in stats.items()),
                flush=True,
            )
            print(
                f"  mean decoded length after epoch {epoch}: {decoded_lengths(trainer, bench):.1f} tokens", flush=True
            )
        print(f"distinct (src, tgt) batch shapes: {len(seen)}")


if __name__ == "__main__":
    main(sys.argv[1:])
