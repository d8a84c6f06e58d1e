"""`hydra/sweeper=optuna`: Optuna 5 behind Hydra's sweeper interface (conf/hydra/sweeper/optuna.yaml).

Thin: the study loop is t4bench.sweep.study.OptunaStudyRunner; this class adapts it to Hydra."""

from __future__ import annotations

import sys
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from t4bench import packing
from t4bench.errors import T4BenchError
from t4bench.spec import build_spec


class T4OptunaSweeper(Sweeper):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.sweeper_cfg = kwargs
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from t4bench.sweep.study import OptunaStudyRunner

        assert self.config is not None and self.launcher is not None
        cfg = OmegaConf.select(self.config, "hydra.sweeper")
        # the resolved sweeper node (study_name may interpolate the model name); sampler and pruner
        # stay DictConfigs for hydra.utils.instantiate
        resolved = {k: cfg[k] for k in cfg if k not in ("_target_",)}
        try:
            spec = build_spec(self.config)
            # hw.runs_per_gpu=N: n_jobs defaults to N x GPUs, spread round-robin over the GPUs
            # (the memory check ran before, in the packing callback)
            resolved["n_jobs"] = packing.sweep_jobs(spec, resolved.get("n_jobs"))
            resolved["gpus"] = packing.gpu_count() if packing.runs_per_gpu(spec) > 1 else 1
            runner = OptunaStudyRunner(resolved, spec, self.launcher, arguments)
            seeds = resolved.get("validate_seeds")
            if seeds:  # python -m t4bench.sweep.holdout: held-out seeds, no study trials
                return runner.validate([int(s) for s in seeds])
            return runner.run()
        except T4BenchError as err:  # bad input (e.g. a sweep id of another sweep): one line, exit 2
            print(f"t4bench: error: {err}", file=sys.stderr)
            sys.exit(2)
