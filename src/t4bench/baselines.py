"""Trivial baselines: the quality a predictor reaches without learning anything from the inputs,
so a run can say when its target is no test of training (issue 17.7).

- NCF: rank candidates by training popularity (the same user gets the same list)
- classification: always the most frequent training class
- detection: `t4bench.benchmarks.shared_detection.coco.prior_results` (boxes of each category's median size on a grid,
  scored by category frequency, never looking at the image)
- translation: copy the source / word-by-word (in the translation data modules)

Each benchmark logs its baseline as the metric `trivial_quality` (the first target metric) and the
run prints one warning line when the target is at or below it, or when an epoch has only a handful
of optimizer steps (epochs-to-target then counts almost nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from t4bench.benchmark import Benchmark
from t4bench.framework import EpochLogger
from t4bench.progress import ProgressReporter
from t4bench.tracking import names

#: fewer optimizer steps than this per epoch: epochs are too coarse a unit to compare runs by
MIN_STEPS_PER_EPOCH = 10


def popularity_hit_rate(
    train_items: np.ndarray, num_items: int, candidates: np.ndarray, k: int = 10
) -> dict[str, float]:
    """HR@k and NDCG@k of ranking each user's candidates (column 0 the held-out positive, the rest
    its sampled negatives) by how often the item occurs in training; the rank counts negatives
    scored strictly above the positive, as NCF's own evaluation does."""
    popularity = np.bincount(train_items, minlength=num_items).astype(np.float64)
    scores = popularity[candidates]
    rank = (scores[:, 1:] > scores[:, :1]).sum(axis=1)
    hits = rank < k
    ndcg = np.where(hits, 1.0 / np.log2(rank + 2.0), 0.0)
    return {f"hr_at_{k}": float(hits.mean()), f"ndcg_at_{k}": float(ndcg.mean())}


def majority_class_accuracy(train_labels: np.ndarray, val_labels: np.ndarray) -> dict[str, float]:
    """top1 of always answering the most frequent training class."""
    if len(val_labels) == 0:
        return {"top1": 0.0}
    majority = int(np.bincount(train_labels).argmax())
    return {"top1": float(np.mean(val_labels == majority))}


def target_warning(target: Mapping[str, float], trivial: Mapping[str, float], baseline: str) -> str | None:
    """One line when every target metric is at or below what the trivial baseline scores (meeting
    such a target says nothing about the model), else None."""
    shared = [name for name in target if name in trivial]
    if not shared or any(float(target[name]) > trivial[name] for name in shared):
        return None
    pairs = ", ".join(f"{name} {float(target[name]):g} <= {trivial[name]:.4g}" for name in shared)
    return f"warning: the target is no better than a trivial baseline ({baseline}: {pairs}); raise model.target"


def steps_per_epoch(train_size: int, global_batch: int) -> int:
    return max(math.ceil(train_size / max(global_batch, 1)), 0)


def few_steps_warning(train_size: int, global_batch: int, minimum: int = MIN_STEPS_PER_EPOCH) -> str | None:
    """One line when an epoch is fewer than `minimum` optimizer steps, else None."""
    steps = steps_per_epoch(train_size, global_batch)
    if steps >= minimum:
        return None
    return (
        f"warning: an epoch is only {steps} optimizer step(s) ({train_size} samples / global batch {global_batch}); "
        f"epochs to target measure little below {minimum} steps: lower model.batch_size or use more data"
    )


def trivial_metrics(target: Mapping[str, float], trivial: Mapping[str, float]) -> dict[str, float]:
    """What to log: `trivial_quality` (the first target metric's baseline) and `trivial_<metric>`."""
    first = next(iter(target), None)
    metrics = {f"{names.TRIVIAL_PREFIX}{name}": float(value) for name, value in trivial.items()}
    if first is not None and first in trivial:
        metrics[names.TRIVIAL_QUALITY] = float(trivial[first])
    return metrics


def announce(
    bench: Benchmark,
    global_batch: int,
    target: Mapping[str, float],
    logger: EpochLogger,
    progress: ProgressReporter,
    is_main: bool,
) -> None:
    """Log the trivial baseline's quality (step 0) and warn, one line each, when the target is no
    better than it or an epoch is only a handful of optimizer steps (issue 17.7). Every
    framework's loop calls it in init (untimed)."""
    trivial = dict(bench.trivial_quality()) if is_main else {}
    if trivial:
        logger.log_epoch(0, trivial_metrics(target, trivial))
    notes = dict(getattr(bench, "data_notes", dict)()) if is_main else {}  # what the loader left out
    if notes:
        logger.log_epoch(0, {f"data_{name}": float(count) for name, (count, _) in notes.items()})
    warnings: list[str | None] = [f"data: {line}" for _, line in notes.values()]
    warnings.append(few_steps_warning(bench.train_size, global_batch))
    if trivial:
        warnings.append(target_warning(target, trivial, bench.trivial_baseline))
    for line in warnings:
        if line:
            progress.line(line)
