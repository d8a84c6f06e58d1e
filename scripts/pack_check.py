"""Would RUNS runs of one command line fit one GPU at once? t4bench's own packing check
(t4bench.packing.check), for scripts that start several packed sweeps side by side
(scripts/gpu/arms.sh): each sweep checks only its own `hw.runs_per_gpu`, so two sweeps of 12 each
passed on an H100 where their 24 runs together filled the memory (2026-12-05).

    python scripts/pack_check.py RUNS [--total-gib GIB] OVERRIDE...    # exit 0: fits; 2: one line why not

--total-gib stands in for the GPU's memory (NVML's by default), for hosts without a GPU.
"""

from __future__ import annotations

import argparse
import sys

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

from t4bench import packing
from t4bench.errors import T4BenchError
from t4bench.preflight.hardware import CONF_DIR
from t4bench.spec import build_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, help="runs on the GPU at once, all sweeps together")
    parser.add_argument("--total-gib", type=float, default=None, help="the GPU's memory (default: NVML's)")
    parser.add_argument("overrides", nargs="*", help="one run's command line (model=... scale=... hw=...)")
    args = parser.parse_intermixed_args(argv)
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*args.overrides, f"hw.runs_per_gpu={args.runs}"])
    except HydraException as err:
        print(f"pack_check: {' '.join(args.overrides)}: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        packing.check(build_spec(cfg), totals_gib=None if args.total_gib is None else [args.total_gib])
    except T4BenchError as err:
        print(f"pack_check: all {args.runs} runs at once: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
