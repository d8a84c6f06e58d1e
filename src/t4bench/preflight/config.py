"""Check the composed config before anything starts: types, ranges and what this host can hold.

`validate(cfg)` builds the run spec (t4bench.spec: its typed fields carry the rules of the keys
outside the model section), then walks the `model:` section's bounds, its benchmark's config
dataclass (t4bench.benchmarks.registry), raising one `T4BenchError` line
`<key>=<value>: <what is allowed>` for the first bad value, so `seed=abc`, `hw.count=0` or a
negative LR fail in about a second, before torch, MLflow or any run exists. Keys a config does
not have are skipped.
Only the standard library and OmegaConf load here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from t4bench import hardware, run_env, seeding
from t4bench.benchmarks import registry
from t4bench.benchmarks.model_section import ModelSection
from t4bench.errors import T4BenchError
from t4bench.preflight.hardware import CONF_DIR
from t4bench.spec import RunSpec, build_spec
from t4bench.spec.bounds import (
    POSITIVE,
    Choice,
    Number,
    Rule,
)
from t4bench.spec.bounds import format_number as _fmt
from t4bench.spec.run import known_keys as spec_keys
from t4bench.spec.section import ABSENT, rules
from t4bench.spec.section import shown as _shown

_ABSENT = ABSENT


#: what a framework's loop accepts beyond (or instead of) the PyTorch loop's choices, by model.framework
FRAMEWORK_RULES: dict[str, tuple[tuple[str, Rule], ...]] = {
    "tensorflow": (
        # the TF reference: warm-up, then polynomial decay (t4bench.tf)
        ("model.schedule.kind", Choice(("constant", "step", "inverse_sqrt", "polynomial"))),
        ("model.schedule.power", POSITIVE),
        ("model.schedule.end_factor", Number(low=0, high=1)),
    ),
}

#: host memory one CPU rank needs (interpreter, torch, MLflow, its data, model, activations), by
#: scale: peak RSS of one-process mini runs measured 1.04 GB (NCF) and 1.16 GB (SSD), one epoch;
#: hw.rank_memory_gb overrides it
RANK_MEMORY_GB = {"mini": 1.25}
DEFAULT_RANK_MEMORY_GB = 4.0


def _lookup(cfg: RunSpec, key: str) -> Any:
    """The resolved value at `key` of the composed config, `_ABSENT` when it has no such key."""
    return cfg.lookup(key)


def model_rules(model: Any) -> list[tuple[str, Rule]]:
    """The `model.*` rules of the benchmark folder named `model` (its config dataclass's bounded
    fields); a model no folder describes gets the common section's."""
    about = registry.find(str(model))
    return list(rules(about.config if about is not None else ModelSection))


def known_keys() -> set[str]:
    """Every key some rule checks: options any model or framework may be given with `+`."""
    configs = {about.config for about in registry.every()} | {ModelSection}
    model_keys = {key for config in configs for key, _ in rules(config)}
    return set(spec_keys()) | {k for own in FRAMEWORK_RULES.values() for k, _ in own} | model_keys


def rules_for(cfg: RunSpec) -> list[tuple[str, Rule]]:
    """The model's rules, with the run's framework's rules in place of the PyTorch loop's."""
    framework = _lookup(cfg, "model.framework")
    own = dict(FRAMEWORK_RULES.get(str(framework), ()))
    every = model_rules(_lookup(cfg, "model.name"))
    return [(key, own.pop(key, rule)) for key, rule in every] + list(own.items())


def check_rules(cfg: RunSpec, given: Sequence[tuple[str, Rule]] | None = None) -> None:
    for key, rule in rules_for(cfg) if given is None else given:
        value = _lookup(cfg, key)
        if value is not _ABSENT and not rule.accepts(value):
            raise T4BenchError(f"{key}={_shown(value)}: must be {rule.allowed()}")


def check_targets(cfg: RunSpec) -> None:
    """model.target: at least one metric, each a number within the metric's scale."""
    target = _lookup(cfg, "model.target")
    if target is _ABSENT:
        return
    if not isinstance(target, Mapping) or not target:
        raise T4BenchError(f"model.target={_shown(target)}: must map at least one metric name to its target value")
    about = registry.find(str(_lookup(cfg, "model.name")))
    for name, value in target.items():
        metric = about.metric(str(name)) if about is not None else None
        high = metric.high if metric is not None else None  # a metric of the user's own model
        rule = Number(low=0, low_open=True, high=high)
        if not rule.accepts(value):
            raise T4BenchError(f"model.target.{name}={_shown(value)}: must be {rule.allowed()}")


def _available_memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def rank_memory_gb(cfg: RunSpec) -> float:
    given = cfg.hw.get("rank_memory_gb")
    if given is not None:
        return float(given)
    return RANK_MEMORY_GB.get(str(cfg.scale.name), DEFAULT_RANK_MEMORY_GB)


def max_cpu_ranks(cfg: RunSpec) -> tuple[int, str]:
    """How many CPU ranks this host can run at once, and why: one core each (more ranks than cores
    only time-slice, which measures the scheduler), and the memory each rank needs."""
    cores = hardware.host_cores()
    memory = _available_memory_gb()
    per_rank = rank_memory_gb(cfg)
    limit, why = cores, f"{cores} cores"
    if memory is not None:
        by_memory = max(int(memory // per_rank), 1)
        why += f", {memory:.1f} GB memory available at ~{_fmt(round(per_rank, 2))} GB per {cfg.scale.name} rank"
        limit = min(limit, by_memory)
    return limit, why


def check_host(cfg: RunSpec) -> None:
    """hw.count against what this host holds. GPU counts are hardware.check's (it knows the
    profile); here: CPU ranks, also a GPU profile falling back to the CPU (hw.strict=false)."""
    count = int(cfg.hw.count)
    if count <= 1 or run_env.read_launcher(os.environ).world_size > 1:  # under a launcher, it placed the ranks
        return
    name = str(cfg.hw.name)
    if name not in ("cpu", "auto") and bool(cfg.hw.get("strict", True)):
        return  # hardware.check says which GPUs are missing; hw.strict=false falls back to the CPU
    if name != "cpu" and hardware.detect().gpus:
        return
    limit, why = max_cpu_ranks(cfg)
    if count > limit:
        raise T4BenchError(f"hw.count={count}: must be 1..{limit} CPU ranks on this host ({why})")


def check_hparams(cfg: RunSpec) -> None:
    """`hparams=tuned` needs a preset for this model and scale: never a silent fall-back to the
    reference settings (the run would be recorded as tuned)."""
    node = cfg.get("hparams")
    if node is None or node.get("name") != "tuned" or node.get("preset"):
        return
    model, scale = cfg.model.name, cfg.scale.name
    presets = sorted(p.stem.removesuffix("_tuned") for p in (CONF_DIR / "model_hparams").glob("*_tuned.yaml"))
    raise T4BenchError(
        f"hparams=tuned: no tuned preset for model={model} scale={scale} "
        f"(conf/model_hparams/{model}_{scale}_tuned.yaml); presets exist for: {', '.join(presets) or 'none'}"
    )


#: options only the PyTorch loop has, with their "off" value: another framework refuses them in one
#: line rather than run without them
PYTORCH_ONLY: tuple[tuple[str, float], ...] = (("ema.half_life_epochs", 0.0),)


def check_framework_options(cfg: RunSpec) -> None:
    framework = _lookup(cfg, "model.framework")
    if framework in (_ABSENT, "pytorch"):
        return
    for key, off in PYTORCH_ONLY:
        value = _lookup(cfg, key)
        if value is not _ABSENT and value is not None and value != off:
            raise T4BenchError(
                f"{key}={_shown(value)}: only framework=pytorch has it; framework={framework} needs {key}={_fmt(off)}"
            )


def check_ema(cfg: RunSpec) -> None:
    """A weight average whose half-life outlasts the run would hardly move from the first weights."""
    half_life, epochs = _lookup(cfg, "ema.half_life_epochs"), _lookup(cfg, "max_epochs")
    if _ABSENT in (half_life, epochs) or not isinstance(half_life, (int, float)) or not isinstance(epochs, int):
        return
    if half_life > epochs:
        raise T4BenchError(
            f"ema.half_life_epochs={_shown(half_life)}: longer than the run (max_epochs={epochs}); "
            "the average would hardly move from the first weights"
        )


def check_eval_every(cfg: RunSpec) -> None:
    """eval_every is 1/k of an epoch for a whole k (the loop evaluates k times an epoch)."""
    value = _lookup(cfg, "eval_every")
    if value is _ABSENT or value is None:
        return
    per_epoch = round(1.0 / float(value))
    if abs(per_epoch * float(value) - 1.0) > 1e-3:
        raise T4BenchError(
            f"eval_every={_shown(value)}: must be 1/k of an epoch for a whole k >= 1 (1, 0.5, 0.25, ...)"
        )


def validate(cfg: DictConfig) -> RunSpec:
    """The run spec of the composed `cfg`, checked (`check`): the command-line preflight's builder."""
    spec = build_spec(cfg)
    check(spec)
    return spec


def check(spec: RunSpec) -> None:
    """One T4BenchError line for the first config value of `spec` that cannot work (its typed
    fields were checked when it was built; here the model's keys and the checks across keys); no
    side effects."""
    check_rules(spec)
    check_eval_every(spec)
    check_framework_options(spec)
    check_ema(spec)
    check_targets(spec)
    check_hparams(spec)
    seeding.check_deterministic(spec)  # deterministic=true with perf.cudnn_benchmark=true
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads is not None and not (threads.isdigit() and int(threads) >= 1):
        raise T4BenchError(f"OMP_NUM_THREADS={threads}: must be a positive integer (or unset)")
    check_host(spec)
