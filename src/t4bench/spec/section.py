"""A section of the run spec: typed fields, each checked by the rule its annotation carries, and the
section's remaining keys (`rest`, read-only) for what no field types yet.

`build(cls, node, prefix)` reads a composed config node into `cls`: every field's value is looked up
(interpolations resolved), checked against its `Annotated[..., rule]` and stored; a field whose type
is another section is built from the child node. The same builder reads a benchmark's own model
section (plain frozen dataclasses whose fields carry their rule as `bounded(rule)`,
t4bench.benchmarks.model_section) from the run spec's resolved `model:` values. The first bad
value is one `T4BenchError` line `<key>=<value>: must be <allowed>`, so building a spec is
validating it. An absent key keeps the field's default (a config written for another model lacks
some sections).

Attributes a section does not type are read from `rest` (`spec.hw.runs_per_gpu`, `spec.perf`), so code
below the runner reads one object; a room that types its keys moves them into fields.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from t4bench.errors import T4BenchError
from t4bench.spec.bounds import Choice, Flag, Number, Numbers, Rule

ABSENT: Any = object()
#: the metadata of a field that is not a config key (a section's `rest`, the spec's derived values)
NOT_READ = {"read": False}


def empty_node() -> DictConfig:
    return OmegaConf.create({})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Section:
    """Typed fields (in subclasses) over the section's composed node, `rest`."""

    rest: DictConfig = dataclasses.field(default_factory=empty_node, repr=False, compare=False, metadata=NOT_READ)

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not fields; dunders (pickle's probes) and `rest` itself
        # (absent while unpickling) are not config keys
        if name.startswith("__") or name == "rest":
            raise AttributeError(name)
        return getattr(self.rest, name)

    def __contains__(self, key: str) -> bool:
        return key in self._typed() or key in self.rest

    def _typed(self) -> set[str]:
        return {f.name for f in read_fields(type(self))}

    def get(self, key: str, default: Any = None) -> Any:
        """A key's value: a typed field's when it is one, else the composed node's."""
        if key in self._typed():
            return getattr(self, key)
        return self.rest.get(key, default)

    def lookup(self, key: str, path: str | None = None) -> Any:
        """The resolved value at the dotted `key` of the composed node (containers as plain values),
        `ABSENT` when it has no such key; `path`: the full key for the error line."""
        try:
            value = OmegaConf.select(self.rest, key, default=ABSENT, throw_on_missing=True)
        except OmegaConfBaseException as err:
            detail = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise T4BenchError(f"{path or key}: cannot be resolved ({detail})") from None
        if isinstance(value, (ListConfig, DictConfig)):
            return OmegaConf.to_container(value, resolve=True)
        return value


T = TypeVar("T")


def shown(value: Any) -> str:
    if isinstance(value, (ListConfig, DictConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def bounded(rule: Rule, default: Any = dataclasses.MISSING) -> Any:
    """A field of a plain dataclass (a benchmark's model section) whose value must satisfy `rule`;
    immutable defaults only (tuples for lists). A Section's field says it with `Annotated[...]`."""
    return dataclasses.field(default=default, metadata={"rule": rule})


def read_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of the dataclass `cls` that are config keys (not `rest`, not derived values)."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("read", True)]


def _parts(field: dataclasses.Field[Any], hint: Any) -> tuple[Any, Rule | None]:
    """(the field's type without Annotated, the rule it carries: `Annotated[..., rule]` or `bounded`)."""
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        rules = [extra for extra in extras if isinstance(extra, (Number, Choice, Flag, Numbers))]
        return base, rules[0] if rules else None
    return hint, field.metadata.get("rule")


def _nested(hint: Any) -> type | None:
    """The dataclass (a Section or a plain one) of a field typed `X` or `X | None`."""
    candidates = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    for candidate in candidates:
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
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


def build(cls: type[T], node: DictConfig | Mapping[str, Any] | None, prefix: str = "") -> T:
    """`cls` (a Section, or a benchmark's plain model-section dataclass) read from `node` (the
    composed config's node, or a resolved plain mapping; None: the section is absent), each value
    checked by its field's rule, in field order; a nested dataclass is built from its child map. An
    absent key keeps the field's default. A Section keeps the node as its `rest`."""
    node = empty_node() if node is None else node
    raw = Section(rest=node) if isinstance(node, DictConfig) else None
    hints = typing.get_type_hints(cls, include_extras=True)
    values: dict[str, Any] = {}
    for field in read_fields(cls):
        path, hint = f"{prefix}{field.name}", hints[field.name]
        nested = _nested(hint)
        if nested is not None:
            child = OmegaConf.select(raw.rest, field.name, default=None) if raw is not None else node.get(field.name)
            child = child if isinstance(child, (DictConfig, Mapping)) else None  # absent, or not a map
            if child is not None or type(None) not in get_args(hint):
                values[field.name] = build(nested, child, f"{path}.")
            continue
        value = raw.lookup(field.name, path) if raw is not None else node.get(field.name, ABSENT)
        if value is ABSENT:
            continue
        base, rule = _parts(field, hint)
        if rule is not None and not rule.accepts(value):
            raise T4BenchError(f"{path}={shown(value)}: must be {rule.allowed()}")
        values[field.name] = _stored(base, value)
    if issubclass(cls, Section):
        values["rest"] = node if isinstance(node, DictConfig) else OmegaConf.create(dict(node))
    return cls(**values)


def keys(cls: type, prefix: str = "") -> list[str]:
    """The dotted keys `cls` types (what a `+key=` may add besides a model's own)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    found: list[str] = []
    for field in read_fields(cls):
        nested = _nested(hints[field.name])
        found += keys(nested, f"{prefix}{field.name}.") if nested else [f"{prefix}{field.name}"]
    return found


def rules(cls: type, prefix: str = "model") -> Iterator[tuple[str, Rule]]:
    """(dotted key, rule) of every field of `cls` that carries one, and of its nested sections'."""
    hints = typing.get_type_hints(cls, include_extras=True)
    for field in read_fields(cls):
        key, hint = f"{prefix}.{field.name}", hints[field.name]
        _, rule = _parts(field, hint)
        if rule is not None:
            yield key, rule
        nested = _nested(hint)
        if nested is not None:
            yield from rules(nested, key)
