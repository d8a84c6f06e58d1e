"""The PyTorch wing as the run machinery sees it (`t4bench.frameworks` lists it): joining a rank,
spawning `hw.count` ranks, checking the ranks' backends before any run exists, and `resume=`.
Importing this module loads no torch: the launcher's module is light, and the rank and resume
modules (torch) load when a run calls for them."""

from __future__ import annotations

from typing import Any

from t4bench.framework import Framework, RankSession, Resume, loading
from t4bench.pytorch import launch
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec

NAME = "pytorch"


def join(cfg: RunSpec, env: RunEnvironment) -> RankSession:
    with loading(NAME):
        from t4bench.pytorch import rank
    return rank.join(cfg, env)


def reopened_run(cfg: RunSpec, env: RunEnvironment) -> Any:
    with loading(NAME):
        from t4bench.pytorch import resume
    return resume.reopened_run(cfg, env)


def restore(client: Any, run_id: str, status: str, outcome: str | None) -> None:
    with loading(NAME):
        from t4bench.pytorch import resume
    resume.restore(client, run_id, status, outcome)


PYTORCH = Framework(NAME, join, launch.spawn, launch.preflight, Resume(reopened_run, restore))
