"""Rank functions for the t4bench.tf.launch tests: importable by name in the worker processes,
and light (no framework import)."""

from __future__ import annotations

import json
import os
import time

from t4bench.errors import T4BenchError


def report_rank() -> dict[str, object]:
    """What a started rank sees of its launch."""
    config = json.loads(os.environ["TF_CONFIG"])
    return {
        "rank": os.environ["RANK"],
        "world": os.environ["WORLD_SIZE"],
        "index": config["task"]["index"],
        "workers": config["cluster"]["worker"],
    }


def fail_on_rank_one() -> None:
    """Rank 1 fails with a one-line error; rank 0 would wait (as in a collective) until stopped."""
    if os.environ["RANK"] == "1":
        raise T4BenchError("rank one broke")
    time.sleep(120)
