"""`python -m t4bench`: the Hydra app. Heavy imports (torch, mlflow) happen only inside `main`,
so `--help` and `--cfg job` stay fast."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from t4bench.errors import T4BenchError


@hydra.main(version_base="1.3", config_path="../../conf", config_name="config")
def main(cfg: DictConfig) -> dict[str, Any]:
    try:
        from t4bench.runner import run

        return run(cfg, Path(HydraConfig.get().runtime.output_dir))
    except T4BenchError as err:
        print(f"t4bench: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
