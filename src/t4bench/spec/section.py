"""A section of the run spec: typed fields, each checked by the rule its annotation carries, and the
section's remaining keys (`rest`, read-only) for what no field types yet.

`build(cls, node, prefix)` reads a composed config node into `cls`: every field's value is looked up
(interpolations resolved), checked against its `Annotated[..., rule]` and stored; a field whose type
is another section is built from the child node. The first bad value is one `T4BenchError` line
`<key>=<value>: must be <allowed>`, so building a spec is validating it. An absent key keeps the
field's default (a config written for another model lacks some sections).

Attributes a section does not type are read from `rest` (`spec.hw.runs_per_gpu`, `spec.perf`), so code
below the runner reads one object; a room that types its keys moves them into fields.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from t4bench.benchmarks.bounds import Choice, Flag, Number, Numbers, Rule
from t4bench.errors import T4BenchError

ABSENT: Any = object()


def empty_node() -> DictConfig:
    return OmegaConf.create({})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Section:
    """Typed fields (in subclasses) over the section's composed node, `rest`."""

    rest: DictConfig = dataclasses.field(default_factory=empty_node, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not fields; dunders (pickle's probes) and `rest` itself
        # (absent while unpickling) are not config keys
        if name.startswith("__") or name == "rest":
            raise AttributeError(name)
        return getattr(self.rest, name)

    def __contains__(self, key: str) -> bool:
        return key in self._typed() or key in self.rest

    def _typed(self) -> set[str]:
        return {f.name for f in dataclasses.fields(self)} - {"rest"}

    def get(self, key: str, default: Any = None) -> Any:
        """A key's value: a typed field's when it is one, else the composed node's."""
        if key in self._typed():
            return getattr(self, key)
        return self.rest.get(key, default)


S = TypeVar("S", bound=Section)


def shown(value: Any) -> str:
    if isinstance(value, (ListConfig, DictConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def lookup(node: DictConfig, key: str, path: str) -> Any:
    """The resolved value at `key` of `node`, `ABSENT` when it has no such key (`path`: the full key
    for the error line)."""
    try:
        value = OmegaConf.select(node, key, default=ABSENT, throw_on_missing=True)
    except OmegaConfBaseException as err:
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise T4BenchError(f"{path}: cannot be resolved ({detail})") from None
    if isinstance(value, (ListConfig, DictConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _parts(hint: Any) -> tuple[Any, Rule | None]:
    """(the type without Annotated, the rule it carries)."""
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        rules = [extra for extra in extras if isinstance(extra, (Number, Choice, Flag, Numbers))]
        return base, rules[0] if rules else None
    return hint, None


def _section_type(hint: Any) -> type[Section] | None:
    """The Section class of a field typed `X` or `X | None`."""
    candidates = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, Section):
            return candidate
    return None


def _stored(base: Any, value: Any) -> Any:
    """The checked value as the field holds it: floats as floats, lists as tuples."""
    if value is None:
        return None
    if base is float or float in get_args(base):
        return float(value) if not isinstance(value, bool) and isinstance(value, (int, float)) else value
    if isinstance(value, list):
        return tuple(value)
    return value


def build(
    cls: type[S],
    node: DictConfig | None,
    prefix: str = "",
    makers: Mapping[str, Callable[[DictConfig | None], Section]] | None = None,
) -> S:
    """`cls` read from the composed `node` (None: the section is absent), each value checked, in
    field order; `makers` build the named sections their own way (the model's: t4bench.spec.model)."""
    node = empty_node() if node is None else node
    hints = typing.get_type_hints(cls, include_extras=True)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name == "rest":
            continue
        path = f"{prefix}{field.name}"
        section = _section_type(hints[field.name])
        if makers and field.name in makers:
            child = OmegaConf.select(node, field.name, default=None)
            values[field.name] = makers[field.name](child if isinstance(child, DictConfig) else None)
            continue
        if section is not None:
            child = OmegaConf.select(node, field.name, default=None)
            if isinstance(child, DictConfig) or type(None) not in get_args(hints[field.name]):
                values[field.name] = build(section, child if isinstance(child, DictConfig) else None, f"{path}.")
            continue
        value = lookup(node, field.name, path)
        if value is ABSENT:
            continue
        base, rule = _parts(hints[field.name])
        if rule is not None and not rule.accepts(value):
            raise T4BenchError(f"{path}={shown(value)}: must be {rule.allowed()}")
        values[field.name] = _stored(base, value)
    return cls(rest=node, **values)


def keys(cls: type[Section], prefix: str = "") -> list[str]:
    """The dotted keys `cls` types (what a `+key=` may add besides a model's own)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    found: list[str] = []
    for field in dataclasses.fields(cls):
        if field.name == "rest":
            continue
        section = _section_type(hints[field.name])
        found += keys(section, f"{prefix}{field.name}.") if section else [f"{prefix}{field.name}"]
    return found
