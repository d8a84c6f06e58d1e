"""The benchmarks t4bench knows: every folder `benchmarks/<name>/` whose `__init__.py` defines
`ABOUT` (t4bench.benchmarks.about). Folders named `shared_*` hold code two benchmarks share and are
no benchmark.

Adding a seventh benchmark touches only its folder and its conf files: `benchmarks/<name>/`
(`__init__.py` with `ABOUT`, its `config.py`, its model and data readers) plus conf/model/<name>.yaml
and conf/model_scale/<name>_*.yaml. The folder is found here by its package path,
`t4bench.benchmarks.<name>`; the preflight's key rules, the MLPerf names and the dataset commands
follow from its `ABOUT`.

A folder's package loads only the standard library (its model loads when the runner asks for
`model.benchmark`), so asking here costs milliseconds.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path

from t4bench.benchmarks.about import About

#: folders of shared code, not benchmarks
SHARED_PREFIX = "shared_"
PACKAGE = __name__.rpartition(".")[0]


@functools.cache
def names() -> tuple[str, ...]:
    """Every benchmark folder's name, sorted."""
    folder = Path(__file__).parent
    found = (info.name for info in pkgutil.iter_modules([str(folder)]) if info.ispkg)
    return tuple(sorted(name for name in found if not name.startswith(SHARED_PREFIX)))


def find(name: str) -> About | None:
    """The `ABOUT` of benchmark `name`; None when no folder has that name (a model of the user's own,
    named by `model.benchmark`)."""
    if name not in names():
        return None
    about = importlib.import_module(f"{PACKAGE}.{name}").ABOUT
    if not isinstance(about, About):
        raise TypeError(f"{PACKAGE}.{name}.ABOUT is not a t4bench.benchmarks.about.About")
    return about


def every() -> list[About]:
    return [about for about in map(find, names()) if about is not None]
