"""Put t4bench's sweep presets on Hydra's search path: `t4bench sweep +sweeps=ncf_robust` selects
sweeps/ncf_robust.yaml. The folder comes from `t4bench.resources.sweeps_root()`: the one shipped
inside the package (so an installed wheel has them), or $T4BENCH_SWEEPS_ROOT when that names a
folder holding a sweeps/ folder of one's own.

The root put on the path holds only sweeps/: a root with more in it (the repository's, with data/,
outputs/ and mlartifacts/) made Hydra walk all of it for every `--help` (13-25 s) and list each
folder as a config group."""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from t4bench import resources


class T4BenchSweepsSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        root = resources.sweeps_root()
        if (root / "sweeps").is_dir():
            search_path.append(provider="t4bench-sweeps", path=f"file://{root}")
