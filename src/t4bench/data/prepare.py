"""`python -m t4bench.data.prepare [NAME ...]`: write the mini-scale datasets under the data root.

Each benchmark folder names its datasets (`ABOUT.datasets`, t4bench.benchmarks.registry); each
dataset module exposes `prepare(data_root)`, idempotent and deterministic. Nothing prepared
here is committed; `scripts/setup.sh` runs this once.

`python -m t4bench.data.prepare wmt16|wmt17 --from DIR [--out OUT]` turns the public WMT downloads
(extracted under DIR) into what the GNMT / Transformer reference scale reads (`t4bench.benchmarks.shared_seq2seq.wmt`,
docs/reference_data.md); OUT defaults to where conf/model_scale/*_reference.yaml looks.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from t4bench.errors import ArgumentParser, one_line



def datasets() -> dict[str, str]:
    """Every benchmark folder's mini datasets (t4bench.benchmarks.registry): name -> the module
    whose `prepare(data_root)` writes it; a dataset two benchmarks share is listed once. In the
    order of the modules' paths, so a benchmark's own datasets come before the shared folders'
    and the list (`--help`, the default "all") reads the same on every machine."""
    from t4bench.benchmarks import registry

    found = {name: module for about in registry.every() for name, module in about.datasets.items()}
    return dict(sorted(found.items(), key=lambda item: item[1]))


#: reference datasets made from public downloads (`--from DIR`): never part of the default "all"
FROM_DOWNLOADS = ("wmt16", "wmt17")
#: what `--help` says (`t4bench data prepare` and `python -m t4bench.data.prepare`)
DESCRIPTION = (
    "Write the mini-scale datasets under the data root (idempotent, deterministic); "
    f"{' or '.join(FROM_DOWNLOADS)} --from DIR: the reference corpus from its extracted public downloads."
)


def main(argv: Sequence[str] | None = None, prog: str = "python -m t4bench.data.prepare") -> int:
    parser = ArgumentParser(prog=prog, description=DESCRIPTION)
    known_datasets = datasets()
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"default: all of {', '.join(known_datasets)}")
    parser.add_argument(
        "--data-root",
        type=Path,
        default=Path(os.environ.get("T4BENCH_DATA_DIR", "data")),
        help="default: $T4BENCH_DATA_DIR or ./data",
    )
    parser.add_argument("--from", dest="source", type=Path, help=f"{'/'.join(FROM_DOWNLOADS)}: the extracted downloads")
    parser.add_argument("--out", type=Path, help=f"{'/'.join(FROM_DOWNLOADS)}: output directory")
    parser.add_argument("--vocab-size", type=int, help=f"{'/'.join(FROM_DOWNLOADS)}: sentencepiece vocabulary size")
    args = parser.parse_args(argv)
    known = [*known_datasets, *FROM_DOWNLOADS]
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        parser.error(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    reference = [n for n in args.names if n in FROM_DOWNLOADS]
    if reference:
        return _from_downloads(parser, args, reference)
    if args.source or args.out or args.vocab_size:
        parser.error(f"--from, --out and --vocab-size are for {' and '.join(FROM_DOWNLOADS)} only")
    for name in args.names or known_datasets:
        started = time.perf_counter()
        module = importlib.import_module(known_datasets[name])
        # a missing or damaged source (2), a failed pip download, a read-only or full data root (1)
        _, status = one_line(
            f"prepare {name}", functools.partial(module.prepare, args.data_root.resolve()), args.data_root
        )
        if status:
            return status
        print(f"prepared {name} in {args.data_root} ({time.perf_counter() - started:.1f}s)")
    return 0


def _from_downloads(parser: argparse.ArgumentParser, args: argparse.Namespace, names: list[str]) -> int:
    from t4bench.benchmarks.shared_seq2seq import wmt

    if len(args.names) != 1 or args.source is None:
        parser.error(f"{'/'.join(FROM_DOWNLOADS)} are prepared one at a time, with --from DIR")
    name = names[0]
    out = args.out or args.data_root / wmt.CORPORA[name].directory
    manifest, status = one_line(
        f"prepare {name}", lambda: wmt.prepare_from(name, args.source, out, args.vocab_size), out
    )
    if manifest is None:
        return status
    print(f"prepared {name} in {out}: {manifest['train_pairs']} training pairs, {manifest['test_pairs']} test pairs")
    dropped = int(str(manifest["dropped_pairs"]))
    if dropped:  # said, not only written to the manifest: damaged downloads do not pass silently
        total = dropped + int(str(manifest["train_pairs"]))
        print(f"data: dropped {dropped} of {total} training pairs with an empty side or over {wmt.MAX_WORDS} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
