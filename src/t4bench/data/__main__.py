"""`python -m t4bench.data prepare|check ...` (also `t4bench data ...`): one entry for the dataset
commands, each still its own module (`python -m t4bench.data.prepare`, `python -m
t4bench.data.check`). The command's module loads only once it is chosen, so `--help` stays fast."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from t4bench.errors import ArgumentParser

#: subcommand: (its module, what it does)
COMMANDS = {
    "prepare": ("t4bench.data.prepare", "write the mini-scale datasets under the data root (default: all)"),
    "check": (
        "t4bench.data.check",
        "is a reference dataset where scale=reference reads it? (ml-20m, imagenet, coco2017, wmt16/17)",
    ),
}


def main(argv: Sequence[str] | None = None, prog: str = "python -m t4bench.data") -> int:
    listed = "\n".join(f"  {name:<8}  {text}" for name, (_, text) in COMMANDS.items())
    parser = ArgumentParser(
        prog=prog,
        description="The datasets: prepare the mini ones, check the reference ones.",
        epilog=f"commands (`{prog} COMMAND --help` for each):\n{listed}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND", help=" or ".join(COMMANDS))
    # the rest is the chosen command's, parsed by its own module (its --help included)
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # argparse would name the hidden remainder among the missing arguments
        parser.error(f"a command is required: {' or '.join(COMMANDS)}")
    args = parser.parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    return int(module.main(args.args, prog=f"{prog} {args.command}"))


if __name__ == "__main__":
    sys.exit(main())
