"""The contract between the one training loop (`t4bench.loop`) and each benchmark.

A benchmark supplies a model, its data, a loss and a quality metric; the loop owns timing,
optimisation, precision, distribution, logging and the stop rule. Nothing in the loop knows which
model it is training.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from t4bench.errors import T4BenchError

if TYPE_CHECKING:
    import torch
    from omegaconf import DictConfig

    from t4bench.context import RunContext


class Benchmark(abc.ABC):
    """One benchmark at one scale. Instances are built in the MLPerf init phase (untimed).

    Subclasses set `name` and `throughput_unit` and implement the abstract methods. Data loading
    in `__init__` is part of init; everything the loop calls afterwards is timed.
    """

    name: ClassVar[str]
    #: what `units` in `loss()` counts: "samples/s" or "tokens/s" (target tokens for translation)
    throughput_unit: ClassVar[str] = "samples/s"

    def __init__(self, cfg: DictConfig, ctx: RunContext) -> None:
        self.cfg = cfg
        self.ctx = ctx

    @classmethod
    def check_inputs(cls, cfg: DictConfig) -> None:
        """Fail fast (before any MLflow run exists) when the configured data is missing.

        Raise `t4bench.errors.DatasetMissingError` naming the expected files. Default: no check.
        """
        return None

    @property
    @abc.abstractmethod
    def train_size(self) -> int:
        """Number of training samples in one (global) epoch; drives `schedule.unit=samples`."""

    @abc.abstractmethod
    def build_model(self) -> torch.nn.Module:
        """The model on CPU; the loop moves it to the device and wraps it for data parallelism."""

    @abc.abstractmethod
    def train_batches(self, epoch: int) -> Iterable[Any]:
        """This rank's shard of the epoch's batches (use `ctx.make_loader` for sharding)."""

    @abc.abstractmethod
    def loss(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, int]:
        """Forward one batch already on the device; return (scalar loss, units in this batch)."""

    @abc.abstractmethod
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Quality metrics on the held-out set (called on rank 0 with the unwrapped model).

        Keys must include every key of `cfg.model.target`; the first target key is `eval_quality`.
        """

    def synthetic_batch(self) -> Any:
        """One batch of generated tensors with the real shapes, for `data=synthetic` throughput."""
        raise NotImplementedError(f"{self.name} has no synthetic mode")

    def param_groups(self, model: torch.nn.Module) -> Iterable[Any]:
        """Parameters handed to the optimizer; override to exclude e.g. norms from weight decay."""
        return model.parameters()


def benchmark_class(cfg: DictConfig) -> type[Benchmark]:
    """The class named by `cfg.model.benchmark` ("package.module.Class"), imported now.

    Importing it loads torch and the model's libraries, so callers do this after the light checks.
    """
    spec = str(cfg.model.benchmark)
    module_name, _, class_name = spec.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as err:
        raise T4BenchError(f"model.benchmark={spec!r} cannot be loaded: {err}") from err
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise T4BenchError(f"model.benchmark={spec!r} is not a t4bench.benchmark.Benchmark subclass")
    return cls
