"""The run spec: the composed Hydra config read once, at the edge, into frozen typed sections.

`build_spec(cfg)` checks every value it types (seed, data_seed, deterministic, max_epochs,
eval_every, ema, progress, scale, input, hw, dist, checkpoint, the Optuna sweeper, resume_finished
and the model's common base) while building; the first bad one is one error line. Keys no section
types yet are read through each section's `rest`. The runner adds what it derives
(`t4bench.spec.derived.RunDerived`) as a new spec; nothing writes into the composed config.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from omegaconf import DictConfig, OmegaConf

from t4bench.errors import T4BenchError
from t4bench.spec.bounds import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, Choice, Flag, Number
from t4bench.spec.derived import RunDerived
from t4bench.spec.model import ModelSpec
from t4bench.spec.section import NOT_READ, Section, build, keys

#: numpy's and torch's seeds must fit in 32 bits unsigned (numpy rejects negatives)
SEED = Number(integer=True, low=0, high=2**32 - 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmaSpec(Section):
    # evaluation reads an EMA of the weights with this half-life (t4bench.pytorch.averaging); 0: off
    half_life_epochs: Annotated[float, NON_NEGATIVE] = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScaleSpec(Section):
    name: str = ""
    # the MLPerf round whose reference targets apply (before model.target, which reads it)
    target_version: Annotated[str, Choice(("v0_5", "v0_6"))] = "v0_5"


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputSpec(Section):
    synthetic: Annotated[bool, Flag()] = False
    steps: Annotated[int, POSITIVE_INT] = 1
    warmup_steps: Annotated[int, NON_NEGATIVE_INT] = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class TelemetrySpec(Section):
    enabled: Annotated[bool, Flag()] = True
    interval_s: Annotated[float, POSITIVE] = 1.0
    log_interval_s: Annotated[float, POSITIVE] = 10.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class HwSpec(Section):
    name: str = "cpu"
    count: Annotated[int, POSITIVE_INT] = 1
    # host memory one CPU rank needs (preflight.config.check_host); null: measured per scale
    rank_memory_gb: Annotated[float | None, Number(low=0, low_open=True, nullable=True)] = None
    strict: Annotated[bool, Flag()] = True
    threads: Annotated[int | None, Number(integer=True, low=1, nullable=True)] = None
    loader_workers: Annotated[int | None, Number(integer=True, low=0, nullable=True)] = None
    # hw=auto leaves precision null (the detected profile's)
    precision: Annotated[str | None, Choice(("fp32", "fp16", "bf16"), nullable=True)] = None
    telemetry: TelemetrySpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistSpec(Section):
    backend: Annotated[str, Choice(("ddp", "horovod"))] = "ddp"
    process_group: Annotated[str, Choice(("auto", "nccl", "gloo"))] = "auto"
    compression: Annotated[str, Choice(("none", "fp16"))] = "none"
    timeout_s: Annotated[float, POSITIVE] = 1800.0
    max_restarts: Annotated[int, NON_NEGATIVE_INT] = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckpointSpec(Section):
    # t4bench.pytorch.checkpoint / resume: every N epochs (0: off), the newest `keep` kept
    every: Annotated[int, NON_NEGATIVE_INT] = 0
    keep: Annotated[int, POSITIVE_INT] = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweeperSpec(Section):
    # n_trials=0 on an existing study reports it and runs nothing
    n_trials: Annotated[int, NON_NEGATIVE_INT] = 0
    # null: hw.runs_per_gpu x GPUs (t4bench.packing)
    n_jobs: Annotated[int | None, Number(integer=True, low=1, nullable=True)] = None
    # null: no limit (t4bench.sweep.study)
    timeout: Annotated[float | None, Number(low=0, nullable=True)] = None
    seeds_per_trial: Annotated[int, POSITIVE_INT] = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class HydraSpec(Section):
    """Hydra's own node: in the command-line preflight's composition and in the config a sweep's
    callbacks and sweeper are given (Hydra's job has none)."""

    sweeper: SweeperSpec

    def target(self, node: str) -> str:
        """`hydra.<node>._target_`: the class of the sweep's `launcher` or `sweeper` ("" when none)."""
        return str(OmegaConf.select(self.rest, f"{node}._target_", default="") or "")

    def overrides(self, kind: str) -> list[str]:
        """The command line's `task` or `hydra` overrides as given (`${...}` left as typed)."""
        given = OmegaConf.select(self.rest, f"overrides.{kind}", default=None)
        return [str(line) for line in OmegaConf.to_container(given, resolve=False) or []] if given else []


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSpec(Section):
    seed: Annotated[int, SEED] = 0
    data_seed: Annotated[int | None, Number(integer=True, low=0, high=2**32 - 1, nullable=True)] = None
    deterministic: Annotated[bool, Flag()] = False
    max_epochs: Annotated[int, POSITIVE_INT] = 1
    # a fraction 1/k of an epoch (preflight.config.check_eval_every checks k whole)
    eval_every: Annotated[float, Number(low=0, high=1, low_open=True)] = 1.0
    ema: EmaSpec
    progress: Annotated[str, Choice(("auto", "bar", "plain", "off"))] = "auto"
    scale: ScaleSpec
    input: InputSpec
    hw: HwSpec
    dist: DistSpec
    checkpoint: CheckpointSpec
    hydra: HydraSpec | None = None
    resume_finished: Annotated[bool, Flag()] = False
    model: ModelSpec
    derived: RunDerived = dataclasses.field(default_factory=RunDerived, compare=False, metadata=NOT_READ)

    @property
    def config(self) -> DictConfig:
        """The composed config, read-only (what the run logs as its parameters)."""
        return self.rest

    @property
    def sweep(self) -> HydraSpec:
        """Hydra's node of a sweep's config (its callbacks' and sweeper's; a job's has none)."""
        if self.hydra is None:
            raise T4BenchError("this config has no hydra node: only a sweep's callbacks and sweeper read it")
        return self.hydra

    @property
    def tags(self) -> dict[str, str]:
        """The user's `tracking.tags`, then what the runner derived."""
        given = OmegaConf.select(self.rest, "tracking.tags", default=None) or {}
        return {**{str(k): str(v) for k, v in given.items()}, **self.derived.tags}

    def logged_config(self) -> dict[str, Any]:
        """The config as this run trains with it: the composed one resolved, with the derived batch,
        threads and tags in place (the run's params and resolved-config artifact)."""
        plain: dict[str, Any] = OmegaConf.to_container(self.rest, resolve=True)  # type: ignore[assignment]
        plain["model"]["batch_size"] = self.model.batch_size
        if "hw" in plain:
            plain["hw"]["threads"] = self.hw.threads
        if isinstance(plain.get("tracking"), dict):
            plain["tracking"]["tags"] = self.tags
        return plain

    def with_derived(self, derived: RunDerived) -> RunSpec:
        """This spec as the run trains with it: the emulated batch, a packed run's threads, and the
        derived tags (`tags`)."""
        batch, threads = derived.batch_size, derived.threads
        model = self.model if batch is None else dataclasses.replace(self.model, batch_size=batch)
        hw = self.hw if threads is None else dataclasses.replace(self.hw, threads=threads)
        return dataclasses.replace(self, model=model, hw=hw, derived=derived)

    def resolved(self) -> RunSpec:
        """This spec over a plain copy of the config with every `${...}` resolved: what a rank
        started as a fresh interpreter (no Hydra there) receives, pickled."""
        plain = OmegaConf.create(OmegaConf.to_container(self.rest, resolve=True))
        assert isinstance(plain, DictConfig)
        return build_spec(plain).with_derived(self.derived)


def build_spec(cfg: DictConfig) -> RunSpec:
    """The run spec of the composed `cfg`; one `T4BenchError` line for the first value that cannot be."""
    return build(RunSpec, cfg)


def known_keys() -> list[str]:
    """The dotted keys the spec types (a `+key=` on one of them is read by t4bench)."""
    return [key for key in keys(RunSpec) if not key.startswith("model.")]
