"""Put the repository's sweeps/ folder on Hydra's search path: `python -m t4bench --multirun
+sweeps=ncf_robust` selects sweeps/ncf_robust.yaml. T4BENCH_SWEEPS_ROOT names another folder that
holds a sweeps/ folder (e.g. for a non-editable install).

The search path gets `search_root/` beside this file, whose only entry is a link to the repository's
sweeps/: putting the repository root itself there made Hydra walk data/, outputs/ and mlartifacts/
for every `--help` (13-25 s) and list them as config groups."""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


def sweeps_root() -> Path | None:
    env = os.environ.get("T4BENCH_SWEEPS_ROOT")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).parent / "search_root")  # search_root/sweeps -> <repo>/sweeps
    for root in candidates:
        if (root / "sweeps").is_dir():
            return root
    return None


class T4BenchSweepsSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        root = sweeps_root()
        if root is not None:
            search_path.append(provider="t4bench-sweeps", path=f"file://{root}")
