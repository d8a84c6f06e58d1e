"""What a config value may be: the bounds a typed field carries (`field(metadata={"rule": ...})` in
the benchmarks' model-section dataclasses, and the preflight's keys outside the model section),
each able to say in words what it allows, for the one-line refusal `<key>=<value>: must be ...`.

Only the standard library loads here: the preflight checks values before torch or MLflow load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Number:
    """An int (`integer=True`) or a finite real in [low, high] (open ends with `*_open`)."""

    integer: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False

    def allowed(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {format_number(self.low)}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {format_number(self.high)}")
        text = f"{kind} {' and '.join(bounds)}" if bounds else kind
        return f"{text}, or null" if self.nullable else text

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]
    nullable: bool = False

    def allowed(self) -> str:
        return "one of " + ", ".join(self.options) + (", or null" if self.nullable else "")

    def accepts(self, value: Any) -> bool:
        return (value is None and self.nullable) or (isinstance(value, str) and value in self.options)


@dataclass(frozen=True)
class Flag:
    def allowed(self) -> str:
        return "true or false"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Numbers:
    """A list of numbers, each `item`, of exactly `length` entries when given."""

    item: Number
    length: int | None = None

    def allowed(self) -> str:
        size = f"{self.length} " if self.length else ""
        return f"a list of {size}numbers, each {self.item.allowed()}"

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, (list, tuple)):
            return False
        return (self.length is None or len(value) == self.length) and all(self.item.accepts(v) for v in value)


Rule = Number | Choice | Flag | Numbers

POSITIVE_INT = Number(integer=True, low=1)
NON_NEGATIVE_INT = Number(integer=True, low=0)
POSITIVE = Number(low=0, low_open=True)
NON_NEGATIVE = Number(low=0)
PROBABILITY = Number(low=0, high=1)
#: dropout, label smoothing, momentum, Adam betas: 1 would stop learning altogether
UNIT_OPEN = Number(low=0, high=1, high_open=True)


def format_number(value: float) -> str:
    """A bound or value as written in a config: 1, not 1.0; 1e-08 for small reals."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"
