"""`python -m t4bench.data.prepare [NAME ...]`: write the mini-scale datasets under the data root.

Each dataset module exposes `prepare(data_root)`, idempotent and deterministic. Nothing prepared
here is committed; `scripts/setup.sh` runs this once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

from t4bench.errors import T4BenchError

DATASETS: dict[str, str] = {
    "movielens-100k": "t4bench.data.movielens",
    "fashion-mnist-folder": "t4bench.data.fashion_folder",
    "fashion-coco": "t4bench.data.fashion_coco",
    # data/translation/{mini,ding}: the GNMT/Transformer mini pseudo-language task and Ding pairs
    "translation": "t4bench.data.translation",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"default: all of {', '.join(DATASETS)}")
    parser.add_argument(
        "--data-root",
        type=Path,
        default=Path(os.environ.get("T4BENCH_DATA_DIR", "data")),
        help="default: $T4BENCH_DATA_DIR or ./data",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(DATASETS))
    if unknown:
        parser.error(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(DATASETS)}")
    for name in args.names or DATASETS:
        started = time.perf_counter()
        try:
            importlib.import_module(DATASETS[name]).prepare(args.data_root.resolve())
        except T4BenchError as err:  # a missing or damaged source, named by the module
            print(f"t4bench: error: prepare {name}: {err}", file=sys.stderr)
            return 2
        except subprocess.CalledProcessError as err:  # pip download (no index reachable, ...)
            print(
                f"t4bench: error: prepare {name}: `{' '.join(map(str, err.cmd))}` failed (exit {err.returncode})",
                file=sys.stderr,
            )
            return 1
        except OSError as err:  # a read-only or full data root
            print(
                f"t4bench: error: prepare {name}: {err.strerror or err}: {err.filename or args.data_root}",
                file=sys.stderr,
            )
            return 1
        print(f"prepared {name} in {args.data_root} ({time.perf_counter() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
