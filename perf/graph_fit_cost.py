"""Host cost of GraphStep's per-replay check (does this batch fit the captured step, and which
tensors to copy), this tree against a base tree's, timed in one process on the host CPU.

    git archive 19cfc5e src | tar x -C /tmp/base
    python perf/graph_fit_cost.py --base-src /tmp/base/src

The batch is a GNMT-shaped `TranslationBatch` (batch 128, 50 tokens a side: 128 host lengths, a
token count, three tensors). The base tree's check is its own code (`_replayable` then `_leaves`
of both sides, as its GraphStep called them), loaded from --base-src under another module name.
Rounds alternate base and this tree; each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from t4bench.benchmarks.shared_seq2seq.parts import collate
from t4bench.pytorch import perf_step


def load_base(src: Path) -> ModuleType:
    path = src / "t4bench" / "pytorch" / "perf_step.py"
    if not path.is_file():
        raise SystemExit(f"--base-src {src}: no {path}")
    spec = importlib.util.spec_from_file_location("base_perf_step", path)
    assert spec is not None and spec.loader is not None  # a .py file that exists always has both
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checks(base: ModuleType | None, static: Any) -> dict[str, Callable[[Any], Any]]:
    found: dict[str, Callable[[Any], Any]] = {"this tree": perf_step.CapturedBatch.of(static).inputs_for}
    if base is not None:
        found["base"] = lambda batch: base._replayable(static, batch) and list(
            zip(base._leaves(static), base._leaves(batch), strict=True)
        )
    return found


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-src", type=Path, help="a base tree's src/ (git archive REV src)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--number", type=int, default=5000, help="checks per round")
    args = parser.parse_args(argv)
    pairs = [([5] * 50, [6] * 50) for _ in range(128)]
    static, batch = collate(pairs), collate(pairs)
    paths = checks(load_base(args.base_src) if args.base_src else None, static)
    assert all(check(batch) for check in paths.values()), "a check refused a batch that fits"
    times: dict[str, list[float]] = {name: [] for name in paths}
    for round_index in range(args.rounds):
        order = list(paths) if round_index % 2 == 0 else list(paths)[::-1]
        for name in order:
            seconds = timeit.timeit(lambda name=name: paths[name](batch), number=args.number)
            times[name].append(seconds / args.number * 1e6)
    for name, values in times.items():
        print(f"{name:10s} {statistics.median(values):8.1f} us per check (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main(sys.argv[1:])
