"""Where t4bench's YAML lives: the Hydra configs (conf/) and the sweep presets (sweeps/), found
through the package itself, never through a checkout.

The repository keeps conf/ and sweeps/ at its top (the layout users and the MLproject expect); the
package reaches them through two committed relative links, `src/t4bench/conf -> ../../conf` and
`src/t4bench/search_root/sweeps -> ../../../sweeps`. An editable install or PYTHONPATH=src follows
the links to the checkout's files; building the wheel copies the files behind them (package-data
in pyproject.toml), so an installed t4bench holds `t4bench/conf/**` and
`t4bench/search_root/sweeps/*` in site-packages and needs no checkout.

The sweeps get a folder of their own, `search_root/`, because Hydra's search path takes a root
whose every sub-folder becomes a config group: the package folder itself would list benchmarks/,
pytorch/, ... as groups. Standard library only: `t4bench --help` reads these without Hydra.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the package's own folder (site-packages/t4bench, or src/t4bench of a checkout)
PACKAGE_DIR = Path(__file__).resolve().parent
#: names another folder that holds a sweeps/ folder, searched instead of the shipped one
SWEEPS_ROOT_ENV = "T4BENCH_SWEEPS_ROOT"


def conf_dir() -> Path:
    """The Hydra app's config folder (config.yaml, model/, hw/, ...)."""
    return PACKAGE_DIR / "conf"


def sweeps_root() -> Path:
    """The folder put on Hydra's search path for `+sweeps=<name>`: $T4BENCH_SWEEPS_ROOT when it
    holds a sweeps/ folder, else the shipped one."""
    override = os.environ.get(SWEEPS_ROOT_ENV)
    if override and (Path(override) / "sweeps").is_dir():
        return Path(override)
    return PACKAGE_DIR / "search_root"  # its only entry: the shipped sweeps/


def sweeps_dir() -> Path:
    """The sweep presets `+sweeps=<name>` selects (sweeps/<name>.yaml)."""
    return sweeps_root() / "sweeps"
