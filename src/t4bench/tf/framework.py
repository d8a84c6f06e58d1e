"""The TensorFlow wing as the run machinery sees it (`t4bench.frameworks` lists it): joining a
rank and spawning `hw.count` ranks; it has no backend to check before the run and cannot resume.
Importing this module loads no TensorFlow (nor does the rank's module: TensorFlow loads when the
rank starts)."""

from __future__ import annotations

from t4bench.framework import Framework, RankSession, loading
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec
from t4bench.tf import launch

NAME = "tensorflow"


def join(cfg: RunSpec, env: RunEnvironment) -> RankSession:
    with loading(NAME):
        from t4bench.tf import rank
    return rank.join(cfg, env)


TENSORFLOW = Framework(NAME, join, launch.spawn)
