"""The user's command line against the config it composes.

Hydra's own composition errors (an unknown group option, an unknown key, a value of the wrong
type, a missing or extra `+`, unparsable override text) become one line naming the valid choices
or the closest key. Keys added with `+` that no code reads are refused the same way: what is valid
comes from the composed config itself (a key is there, or it lies under a map the config declares
empty, such as `tracking.tags: {}` and `callbacks: {}`, or it is an argument of a `_target_`
node's class) plus the options `t4bench.preflight.config.known_keys` knows some model may set.

Only Hydra, OmegaConf and the standard library load here.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from t4bench.errors import T4BenchError
from t4bench.preflight.hardware import CONF_DIR

_ABSENT = object()


# --------------------------------------------------------------------------------------------
# keys of a composed config, and the closest one to a misspelled key


def config_keys(cfg: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key of `cfg` (maps and leaves), interpolations left unresolved."""
    if isinstance(cfg, DictConfig):
        items = [(str(k), cfg._get_node(k)) for k in cfg]  # the node: no interpolation resolved
        for key, node in items:
            path = f"{prefix}{key}"
            yield path
            if isinstance(node, DictConfig):
                yield from config_keys(node, f"{path}.")


def closest(key: str, keys: Sequence[str]) -> str | None:
    """The key the user most likely meant: the whole path misspelled (`model.optimzer.lr`), or its
    last part given at the wrong depth (`model.lrr` -> `model.optimizer.lr`)."""
    whole = difflib.get_close_matches(key, keys, n=1, cutoff=0.8)
    if whole:
        return whole[0]
    top, leaf = key.split(".", 1)[0], key.rsplit(".", 1)[-1]
    best, best_ratio = None, 0.6
    for candidate in sorted((k for k in keys if k.split(".", 1)[0] == top), key=len):
        ratio = difflib.SequenceMatcher(None, leaf, candidate.rsplit(".", 1)[-1]).ratio()
        if ratio > best_ratio:
            best, best_ratio = candidate, ratio
    return best


def _suggest(key: str, keys: Sequence[str]) -> str:
    match = closest(key, keys)
    return f"; did you mean {match}?" if match else ""


# --------------------------------------------------------------------------------------------
# `+key=` additions


def _target_accepts(target: Any, name: str) -> bool:
    """Whether the class or function a `_target_` names takes the argument `name` (an import that
    fails is left to Hydra's instantiate, which names it)."""
    from hydra.utils import get_object

    try:
        signature = inspect.signature(get_object(str(target)))
    except Exception:
        return True
    params = signature.parameters.values()
    return name in signature.parameters or any(p.kind is p.VAR_KEYWORD for p in params)


def _at(tree: Mapping[str, Any], key: str) -> Any:
    """The value at the dotted `key` of a plain `tree`, `_ABSENT` when there is none."""
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def is_read(key: str, schema: Mapping[str, Any]) -> bool:
    """Whether t4bench reads `key` when it is added: it is in the schema (as plain maps), lies under
    a map the schema declares empty (free: tracking.tags, callbacks, perf.models), is an argument of
    the `_target_` node it is added to, or is an option the validation table knows."""
    from t4bench.preflight.config import known_keys

    parts = key.split(".")
    for depth in range(1, len(parts) + 1):
        node = _at(schema, ".".join(parts[:depth]))
        if node is _ABSENT:
            break
        if depth == len(parts):
            return True
        if not isinstance(node, Mapping):
            return False
        if len(node) == 0:
            return True
        if "_target_" in node and depth == len(parts) - 1:
            return _target_accepts(node["_target_"], parts[-1])
    return key in known_keys()


def _parse(lines: Sequence[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides([str(line) for line in lines])


def _is_group(key: str) -> bool:
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if hydra.is_initialized():
        return bool(hydra.config_loader().get_group_options(key))
    return (CONF_DIR / key).is_dir()


def schema_for(task_overrides: Sequence[str]) -> DictConfig:
    """The config composed from the task overrides' group choices alone (no values, no added
    keys), i.e. what t4bench declares for this choice of groups. Called inside the Hydra app (or after
    `initialize_config_dir`)."""
    from hydra import compose

    # group choices decide which keys exist; values only change them
    kept = [o.input_line for o in _parse(task_overrides) if _is_group(o.key_or_group) and not o.is_sweep_override()]
    return compose(config_name="config", overrides=kept)


def _foreign_argument(key: str, composed: Mapping[str, Any]) -> str | None:
    """The `_target_` of the node `key` is added to (in the composed config, as plain maps), when
    that class or function does not take it."""
    parent, _, name = key.rpartition(".")
    node = _at(composed, parent) if parent else None
    if not isinstance(node, Mapping) or "_target_" not in node or name == "_target_":
        return None
    target = node["_target_"]
    return None if _target_accepts(target, name) else str(target)


def check_added_keys(
    task_overrides: Sequence[str], schema: DictConfig | None = None, cfg: DictConfig | None = None
) -> None:
    """Refuse `+key=` (or `++key=` of a key the config lacks) that no code reads, in one line with
    the closest key; also a map (e.g. `model.optimizer`) replaced by a plain value. `cfg`: the
    composed config, whose `_target_` nodes say which arguments an added key may be."""
    parsed = [o for o in _parse(task_overrides) if not o.is_delete()]
    interesting = [o for o in parsed if not _is_group(o.key_or_group)]
    if not interesting:
        return
    schema = schema if schema is not None else schema_for(task_overrides)
    # plain maps, interpolations left as typed: what the checks below walk
    schema_layout: Any = OmegaConf.to_container(schema, resolve=False)
    composed: Any = OmegaConf.to_container(cfg, resolve=False) if cfg is not None else {}
    keys: list[str] | None = None
    for override in interesting:
        key = override.key_or_group
        if key.startswith("hydra."):
            continue  # Hydra's own structured schema checks those
        node = OmegaConf.select(schema, key, default=_ABSENT, throw_on_missing=False, throw_on_resolution_failure=False)
        target = _foreign_argument(key, composed) if node is _ABSENT else None
        if target:
            raise T4BenchError(f"{override.input_line}: {target} takes no argument {key.rpartition('.')[2]!r}")
        if (override.is_add() or override.is_force_add()) and node is _ABSENT and not is_read(key, schema_layout):
            keys = keys if keys is not None else list(config_keys(schema))
            raise T4BenchError(
                f"{override.input_line}: no t4bench code reads {key}{_suggest(key, keys)} "
                "(+ adds keys only under tracking.tags, callbacks and other maps the config leaves open)"
            )
        if isinstance(node, DictConfig) and len(node) and not override.is_sweep_override():
            value = override.value()
            if not isinstance(value, dict):
                names = [str(name) for name in node]
                raise T4BenchError(
                    f"{override.input_line}: {key} is a group of settings ({', '.join(names[:5])}, ...), "
                    f"not one value; set one of them, e.g. {key}.{names[0]}=..."
                )


# --------------------------------------------------------------------------------------------
# Hydra's exceptions as one line


def _schema_outside_app(argv: Sequence[str]) -> DictConfig | None:
    """The config composed from the command line's group choices alone (for the closest key after
    Hydra refused the command line); None when even that fails."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    groups = []
    for line in argv:
        if line.startswith("-") or "=" not in line:
            continue
        try:
            (override,) = _parse([line])
        except Exception:
            continue
        key = override.key_or_group
        if (CONF_DIR / key).is_dir() and not override.is_sweep_override():
            groups.append(line)
    GlobalHydra.instance().clear()
    for attempt in (groups, []):
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                return compose(config_name="config", overrides=attempt, return_hydra_config=True)
        except Exception:
            GlobalHydra.instance().clear()
    return None


def _given(argv: Sequence[str], key: str) -> str:
    """The command-line text that set `key` (as typed), else `key`."""
    for line in argv:
        if line.split("=", 1)[0].removeprefix("override ").lstrip("+~") == key:
            return line
    return key


def _first(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def explain(err: BaseException, argv: Sequence[str]) -> str:
    """One line for a Hydra composition / parse / instantiation error raised for `argv`."""
    from hydra.errors import MissingConfigException, OverrideParseException

    text = str(err)
    if isinstance(err, OverrideParseException):
        return (
            f"{err.override}: cannot be parsed ({_first(err.message)}); "
            "quote values with special characters, e.g. key='a,b' (Hydra's override grammar)"
        )
    if isinstance(err, MissingConfigException):
        found = re.search(r"Could not find '([^']+)'", text)
        wanted = found.group(1) if found else str(err.missing_cfg_file)
        group, _, name = wanted.rpartition("/")
        options = sorted(err.options or [])
        if not options:
            return f"{_given(argv, group) if group else wanted}: no config group {group or wanted!r}"
        near = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]}?)" if near else ""
        return f"{group}={name}: no such option{hint}; choose one of {', '.join(options)}"
    found = re.search(r"Could not override '([^']+)'", text)
    if found:
        key = found.group(1)
        schema = _schema_outside_app(argv)
        if schema is not None and is_read(key, OmegaConf.to_container(schema, resolve=False)):  # type: ignore[arg-type]
            line = _given(argv, key)
            return f"{line}: {key} is not in the config; add it with +{line.lstrip('+')}"
        keys = list(config_keys(schema)) if schema is not None else []
        return f"{_given(argv, key)}: no such key{_suggest(key, keys)}"
    found = re.search(r"An item is already at '([^']+)'", text)
    if found:
        key = found.group(1)
        line = _given(argv, key)
        return f"{line}: {key} is in the config already; set it without the +: {line.lstrip('+')}"
    found = re.search(r"Could not delete from config\. (?:The value of )?'?([\w.]+)", text)
    if found:
        return f"{_given(argv, found.group(1))}: {_first(text)}"
    found = re.search(r"Error merging override (\S+)", text)
    if found:
        cause = _first(str(err.__cause__)) if err.__cause__ else _first(text)
        return f"{found.group(1)}: {cause}"
    return _first(text) or type(err).__name__


# --------------------------------------------------------------------------------------------
# sweeps with nothing to run


def check_sweeps_not_empty(lines: Sequence[str]) -> None:
    """Refuse a --multirun whose range or choice sweeps no value (`seed=range(5,1)`): Hydra would
    launch no job and the sweep would leave an empty parent run behind. Called before anything
    exists, with the command line's overrides."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    for override in _parse(lines):
        if not override.is_sweep_override():
            continue
        value = override.value()
        if isinstance(value, (ChoiceSweep, RangeSweep)) and not list(override.sweep_string_iterator()):
            why = ""
            if isinstance(value, RangeSweep):
                step = value.step if value.step is not None else 1
                why = f": the range from {value.start} to {value.stop} by {step} holds no value"
            raise T4BenchError(f"{override.input_line}: sweeps nothing{why}, so no job would run")
