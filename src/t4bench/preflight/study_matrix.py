"""Experiments that are a run matrix (`+experiment=study_r740`, conf/experiment/): expand the
matrix into command lines, print them for a dry run, and refuse a run outside it in one line.

A matrix experiment is a config node `experiment` with `name`, `dry_run` and `matrix.models`
(model names) and `matrix.hw` (hw profile -> GPU counts). Each run of it is an ordinary
`python -m t4bench` run; the matrix only says which ones the study made and on what hardware,
so a run on other hardware would not be one of them (hw=auto is resolved the way the run
resolves it, `t4bench.hardware`)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec


def expand(matrix: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every run of the matrix, as the overrides that select it: hw profile by hw profile, GPU
    count by count, model by model (the order a user would book the machines in)."""
    runs = []
    for hw, counts in matrix["hw"].items():
        for count in counts:
            for model in matrix["models"]:
                runs.append({"model": str(model), "hw": str(hw), "hw.count": str(int(count))})
    return runs


def command_lines(name: str, runs: Sequence[Mapping[str, str]]) -> list[str]:
    return [
        "python -m t4bench " + shlex.join([f"+experiment={name}", *(f"{k}={v}" for k, v in run.items())])
        for run in runs
    ]


def _resolved_hw(cfg: RunSpec) -> str:
    name = str(cfg.hw.name)
    if name != "auto":
        return name
    from t4bench import hardware

    return hardware.profile_for(hardware.detect())


def gate(cfg: RunSpec) -> bool:
    """For a config with a matrix experiment: print its runs and return True for a dry run (the
    caller exits 0, running nothing); raise T4BenchError (one line) for a run outside the matrix;
    return False to run. Configs without one: False, at once."""
    exp = cfg.get("experiment")
    if not isinstance(exp, DictConfig) or "matrix" not in exp:
        return False
    if is_dry_run(cfg):
        name = str(exp.name)
        lines = command_lines(name, expand(_matrix(cfg)))
        print(f"# +experiment={name}: {len(lines)} runs at scale={cfg.scale.name} (none started)")
        print("\n".join(lines))
        return True
    check(cfg)
    return False


def is_dry_run(cfg: RunSpec) -> bool:
    """A matrix experiment asked only to list its runs (nothing is read or created)."""
    exp = cfg.get("experiment")
    return isinstance(exp, DictConfig) and "matrix" in exp and bool(exp.get("dry_run"))


def _matrix(cfg: RunSpec) -> dict[str, Any]:
    """The matrix experiment's `experiment.matrix`, resolved."""
    return {str(k): v for k, v in cfg.lookup("experiment.matrix").items()}


def check(cfg: RunSpec) -> None:
    """One line (T4BenchError) for a run outside its matrix experiment; nothing for other configs."""
    exp = cfg.get("experiment")
    if not isinstance(exp, DictConfig) or "matrix" not in exp:
        return
    name, matrix = str(exp.name), _matrix(cfg)
    hw, count, model = _resolved_hw(cfg), int(cfg.hw.count), str(cfg.model.name)
    allowed = {str(k): [int(n) for n in v] for k, v in matrix["hw"].items()}
    where = f"hw={hw}" + (" (hw=auto on this machine)" if str(cfg.hw.name) == "auto" else "")
    if hw not in allowed:
        problem = f"runs on {' or '.join(allowed)} only, not {where}"
    elif count not in allowed[hw]:
        problem = f"runs {hw} at hw.count {', '.join(map(str, allowed[hw]))}, not {count}"
    elif model not in matrix["models"]:
        problem = f"has no model={model} (it runs {', '.join(matrix['models'])})"
    else:
        return
    raise T4BenchError(f"+experiment={name} {problem}; `experiment.dry_run=true` lists its runs")
