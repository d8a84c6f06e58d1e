"""`python -m t4bench.data.check NAME [DIR]`: is a reference dataset where and as `scale=reference`
reads it? One line: `NAME: complete at DIR (...)` and exit 0, or `t4bench: error: check NAME: ...`
naming what is missing or malformed and exit 2.

NAME is one a benchmark folder names (ml-20m, imagenet, coco2017, wmt16, wmt17); DIR defaults to where
conf/model_scale/<model>_reference.yaml looks (its environment variable, else under the data root).
The checks read what the loaders read first (headers, folder layout, annotation records, one image
per split, the tokenizer); a damaged record deep inside a file still surfaces only when training.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from t4bench.benchmarks import registry
from t4bench.benchmarks.about import ReferenceData
from t4bench.errors import ArgumentParser, one_line

#: what `--help` says (`t4bench data check` and `python -m t4bench.data.check`)
DESCRIPTION = (
    "Is a reference dataset where and as scale=reference reads it? One line and exit 0, "
    "or one line naming what is missing or malformed and exit 2."
)


def checks() -> dict[str, ReferenceData]:
    """Every benchmark folder's reference datasets (t4bench.benchmarks.registry), each once."""
    return {name: data for about in registry.every() for name, data in about.reference_data.items()}


def default_dir(name: str) -> Path:
    data = checks()[name]
    return Path(os.environ.get(data.env) or Path(os.environ.get("T4BENCH_DATA_DIR", "data")) / data.under)


def main(argv: Sequence[str] | None = None, prog: str = "python -m t4bench.data.check") -> int:
    parser = ArgumentParser(prog=prog, description=DESCRIPTION)
    known = checks()
    parser.add_argument("name", choices=sorted(known), metavar="NAME", help=", ".join(known))
    parser.add_argument("directory", nargs="?", type=Path, help="default: where scale=reference reads it")
    args = parser.parse_args(argv)
    directory = args.directory or default_dir(args.name)
    summary, status = one_line(f"check {args.name}", lambda: known[args.name].check(directory), directory)
    if summary is None:
        return status
    print(f"{args.name}: complete at {directory} ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
