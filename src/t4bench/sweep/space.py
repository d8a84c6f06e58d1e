"""Hydra override syntax -> Optuna distributions, and trial parameters -> overrides.

key=interval(a,b)                 FloatDistribution(a, b)
key=int(interval(a,b))            IntDistribution(a, b)
key=tag(log,interval(a,b))        log scale (also with int(...))
key=range(start,stop[,step])      IntDistribution / FloatDistribution with step (stop exclusive,
                                  as in Hydra's basic sweeper)
key=choice(a,b,c)  or  key=a,b,c  CategoricalDistribution (lists and dicts are kept as their
                                  override text, e.g. choice([64,32],[128,64]))
key=value                         not searched: passed to every job as is
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    RangeSweep,
)

from t4bench.errors import T4BenchError

_PRIMITIVE = (bool, int, float, str, type(None))
_SAFE_STRING = re.compile(r"^[A-Za-z_/.][\w./\-+]*$")


@dataclass
class SearchSpace:
    distributions: dict[str, Any] = field(default_factory=dict)  # name -> optuna distribution
    #: categorical parameters whose choices are override text (non-primitive values)
    textual: set[str] = field(default_factory=set)
    fixed: list[str] = field(default_factory=list)  # overrides passed to every job
    #: seeds taken from a `seed=` sweep override, if one was given
    seeds: list[int] | None = None

    def grid(self) -> dict[str, list[Any]]:
        """The search space for optuna's GridSampler (categorical / stepped ranges only)."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        grid: dict[str, list[Any]] = {}
        for name, dist in self.distributions.items():
            if isinstance(dist, CategoricalDistribution):
                grid[name] = list(dist.choices)
            elif isinstance(dist, IntDistribution) and not dist.log:
                grid[name] = list(range(dist.low, dist.high + 1, dist.step))
            elif isinstance(dist, FloatDistribution) and dist.step is not None:
                n = round((dist.high - dist.low) / dist.step)
                grid[name] = [dist.low + i * dist.step for i in range(n + 1)]
            else:
                raise ValueError(f"grid sampler: {name} is a continuous interval; use choice() or range()")
        return grid

    def overrides(self, params: Mapping[str, Any], strict: bool = True) -> list[str]:
        """Job overrides for a trial's parameters (strict: only those of this search space;
        otherwise all, list/dict choices recognised by their text)."""
        out = []
        for name, value in params.items():
            if strict and name not in self.distributions:
                continue
            textual = name in self.textual or (isinstance(value, str) and value[:1] in "[{")
            text = str(value) if textual else format_value(value)
            out.append(f"{name}={text}")
        return out


def format_value(value: Any) -> str:
    """A Python value as Hydra override text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if _SAFE_STRING.match(value) and value not in ("null", "true", "false"):
            return value
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)


def check_sweep(override: Override) -> None:
    """One line naming the parameter for a search range Optuna would refuse deep inside the
    sweeper (or search without effect): empty or inverted, a log scale reaching 0, one choice."""
    value, line = override.value(), override.input_line
    log = "log" in getattr(value, "tags", set())
    if isinstance(value, ChoiceSweep) and len(value.list) < 2:
        only = format_value(value.list[0]) if value.list else "<a value>"
        raise T4BenchError(f"{line}: one option is no search; set {override.key_or_group}={only} instead")
    if isinstance(value, IntervalSweep) and value.start is not None and value.end is not None:
        if not float(value.start) < float(value.end):
            raise T4BenchError(f"{line}: empty or inverted interval; the low end must be below the high end")
        if log and float(value.start) <= 0:
            raise T4BenchError(f"{line}: a log scale needs a low end > 0")
    if isinstance(value, RangeSweep) and None not in (value.start, value.stop, value.step):
        start, stop, step = float(value.start), float(value.stop), float(value.step)  # type: ignore[arg-type]
        if step == 0 or (stop - start) / step <= 0:
            raise T4BenchError(f"{line}: empty range (stop is exclusive; step {value.step})")
        if math.ceil((stop - start) / step) < 2:
            raise T4BenchError(f"{line}: one value is no search; set {override.key_or_group}={value.start} instead")


def _distribution(override: Override) -> tuple[Any, bool]:
    """(optuna distribution, textual?) for one sweep override."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    value = override.value()
    log = "log" in getattr(value, "tags", set())
    check_sweep(override)
    if isinstance(value, ChoiceSweep):
        choices = list(value.list)
        if all(isinstance(c, _PRIMITIVE) for c in choices):
            return CategoricalDistribution(choices), False  # type: ignore[arg-type]
        return CategoricalDistribution([format_value(c) for c in choices]), True
    if isinstance(value, RangeSweep):
        assert value.start is not None and value.stop is not None
        start, stop, step = value.start, value.stop, value.step
        if all(isinstance(x, int) for x in (start, stop, step)):
            last = start + step * ((stop - 1 - start) // step)
            return IntDistribution(int(start), int(last), step=int(step)), False
        n = math.ceil((float(stop) - float(start)) / float(step)) - 1
        return FloatDistribution(float(start), float(start) + n * float(step), step=float(step)), False
    if isinstance(value, IntervalSweep):
        assert value.start is not None and value.end is not None
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(int(value.start), int(value.end), log=log), False
        return FloatDistribution(float(value.start), float(value.end), log=log), False
    raise ValueError(f"unsupported sweep override {override.input_line!r}")


def parse(arguments: Sequence[str], params: Mapping[str, str] | None = None) -> SearchSpace:
    """The search space from `hydra.sweeper.params` (key -> override text) and command-line
    overrides (the command line wins for a key given in both)."""
    lines = [f"{k}={v}" for k, v in (params or {}).items()]
    lines += list(arguments)
    parsed = OverridesParser.create().parse_overrides(lines)
    by_key: dict[str, Override] = {}
    for override in parsed:
        by_key[override.get_key_element()] = override
    space = SearchSpace()
    for key, override in by_key.items():
        if override.is_sweep_override():
            if key == "seed":
                if not override.is_discrete_sweep():
                    raise T4BenchError("seed= must be a list or range of seeds, e.g. seed='range(0,3)'")
                space.seeds = [int(s) for s in override.sweep_string_iterator()]
                continue
            dist, textual = _distribution(override)
            space.distributions[key] = dist
            if textual:
                space.textual.add(key)
        else:
            space.fixed.append(f"{key}={override.get_value_element_as_str()}")
    return space
