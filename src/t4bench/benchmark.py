"""The contract between a framework's training loop (`t4bench.pytorch.loop`, `t4bench.tf.loop`) and
each benchmark: read this file to add one (its folder: t4bench.benchmarks.registry).

A benchmark supplies a model, its data, a loss and a quality metric; the loop owns timing,
optimisation, precision, distribution, evaluation cadence, logging and the stop rules. Nothing in
the loop knows which model it trains.

What a subclass provides:

| member                     | required? | default                                            |
|----------------------------|-----------|----------------------------------------------------|
| `name`                     | yes       | -                                                  |
| `framework`                | no        | "pytorch" (the loop that runs it)                  |
| `throughput_unit`          | no        | "samples/s"                                        |
| `reference_train_samples`  | no        | None: synthetic epochs are one global batch        |
| `__init__(cfg, ctx)`       | no        | stores cfg, ctx (its loop's context), `synthetic`  |
| `dataset_train_size()`     | yes       | - (only called with real data)                     |
| `build_model()`            | yes       | -                                                  |
| `train_batches(epoch)`     | yes       | - (must be sized: the loop splits epochs by it)    |
| `loss(model, batch)`       | yes       | -                                                  |
| `evaluate(model)`          | yes       | - (only called with real data)                     |
| `check_inputs(cfg)`        | no        | no check (only called with real data)              |
| `synthetic_batch()`        | no        | raises: no `input=synthetic` mode                  |
| `warmup_batches(limit)`    | no        | none: no `perf.warmup_shapes` warm-up              |
| `param_groups(model)`      | no        | all parameters, one group                          |
| `samples_in(batch)`        | no        | leading dimension of the batch's first tensor      |

`synthetic` (set by `Benchmark.__init__` from `cfg.input.synthetic`) is the one way a benchmark asks
whether it runs on generated tensors; in that mode it must not read its dataset, and `train_size`
is the MLPerf reference training set's size (`reference_train_samples`), so that the LR schedule,
whose warm-up and decay points are written in reference epochs, runs the reference's first steps.

This module imports no framework at load time: the runner resolves the benchmark class before
torch loads, so that bad input fails in about a second.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec

if TYPE_CHECKING:
    import torch


class Batches(Protocol):
    """An epoch's batches for this rank: iterable, and sized (equal on every rank) because the loop
    places evaluations at fractions of an epoch by batch count (`eval_every`)."""

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class RunInfo(Protocol):
    """What the contract itself reads of the run a benchmark is part of. Each framework's loop hands
    its own context, which has these and more (t4bench.pytorch.context.RunContext: device, loaders;
    t4bench.tf.context.TFContext: the distribution strategy); a benchmark names its loop's context
    as the type argument, `Benchmark[RunContext]`."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def data_root(self) -> Path: ...

    @property
    def is_main(self) -> bool: ...


#: the framework's run context a benchmark is written for
ContextT = TypeVar("ContextT", bound=RunInfo)


def is_synthetic(cfg: RunSpec) -> bool:
    """`input=synthetic`: reference-size model on generated tensors, throughput only."""
    return bool(cfg.input.synthetic)


class Benchmark(abc.ABC, Generic[ContextT]):
    """One benchmark at one scale, for the loop whose run context is `ContextT`. Instances are
    built in the MLPerf init phase (untimed): data loading in `__init__` is part of init;
    everything the loop calls afterwards is timed."""

    name: ClassVar[str]
    #: the framework whose training loop runs this benchmark (recorded as a tag)
    framework: ClassVar[str] = "pytorch"
    #: what `units` in `loss()` counts: "samples/s" or "tokens/s" (target tokens for translation)
    throughput_unit: ClassVar[str] = "samples/s"
    #: samples in one epoch of the MLPerf reference training set: the epoch `input=synthetic` runs
    #: its LR schedule on. Without it a synthetic epoch is one global batch, and a warm-up of a
    #: fraction of an epoch ends after the first step (Mask R-CNN then trained from scratch at
    #: full LR at once, and its loss went NaN)
    reference_train_samples: ClassVar[int | None] = None

    def __init__(self, cfg: RunSpec, ctx: ContextT) -> None:
        self.cfg = cfg
        self.ctx: ContextT = ctx
        self.synthetic = is_synthetic(cfg)

    # -- required -----------------------------------------------------------------------------

    @abc.abstractmethod
    def dataset_train_size(self) -> int:
        """Training samples in one global epoch of the real dataset (after any filtering)."""

    def dataset_eval_size(self) -> int | None:
        """Samples in one evaluation of the real dataset (MLPerf `eval_samples`, which the
        compliance checker requires). None: not known, and the log goes without it."""
        return None

    @abc.abstractmethod
    def build_model(self) -> torch.nn.Module:
        """The model on CPU; the loop moves it to the device and wraps it for data parallelism."""

    @abc.abstractmethod
    def train_batches(self, epoch: int) -> Batches:
        """This rank's shard of the epoch's batches (`ctx.make_loader` / `ctx.tensor_batches`
        shard them); the same count on every rank."""

    @abc.abstractmethod
    def loss(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, int]:
        """Forward one batch already on the device; return (scalar loss, units in this batch)."""

    @abc.abstractmethod
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Quality metrics on the held-out set (rank 0, unwrapped model, already in eval mode under
        no_grad and autocast). Keys must include every key of `cfg.model.target`; the first target
        key is `eval_quality`."""

    # -- optional, with defaults ----------------------------------------------------------------

    @classmethod
    def check_inputs(cls, cfg: RunSpec) -> None:
        """Fail fast (before any MLflow run exists) when the configured data is missing: raise
        `t4bench.errors.DatasetMissingError` naming the expected files. Only called with real
        data. Default: no check."""
        return None

    def synthetic_batch(self) -> Any:
        """One batch of generated tensors with the real shapes for `input=synthetic` throughput,
        ideally already on the device. Default: this benchmark has no synthetic mode."""
        raise T4BenchError(f"model {self.name} has no input=synthetic mode")

    def param_groups(self, model: torch.nn.Module) -> Iterable[Any]:
        """Parameters handed to the optimizer; override to exclude e.g. norms from weight decay."""
        return model.parameters()

    #: what `trivial_quality` predicts, for the warning line
    trivial_baseline: ClassVar[str] = "trivial baseline"

    def trivial_quality(self) -> Mapping[str, float]:
        """Quality of a predictor that learns nothing from the inputs (t4bench.baselines), logged as
        `trivial_quality` and compared with the target; called once in init, on rank 0. Default:
        none."""
        return {}

    def data_notes(self) -> Mapping[str, tuple[int, str]]:
        """What the loader left out of training, name -> (count, one line saying it), logged as
        metrics `data_<name>` and said once on the console (t4bench.baselines.announce); called
        once in init, on rank 0. Default: nothing."""
        return {}

    def warmup_batches(self, limit: int) -> list[Any]:
        """Up to `limit` generated (host-side) batches, one per training batch shape, for the
        init-phase warm-up of `perf.warmup_shapes` (t4bench.pytorch.shape_warmup); only for
        benchmarks whose batch shapes vary. Generated, not read from the training set. Default:
        none."""
        return []

    def samples_in(self, batch: Any) -> int:
        """Samples in one (host-side) batch, for the sample-based schedule and `train_size`
        accounting. Default: the leading dimension of its first tensor."""
        return leading_dim(batch)

    # -- derived (not overridden) ---------------------------------------------------------------

    @property
    def train_size(self) -> int:
        """Samples in one global epoch; drives the LR schedule and the fractional epoch. Synthetic
        mode has no dataset: the reference's epoch stands for it, else one global batch."""
        if not self.synthetic:
            return self.dataset_train_size()
        return self.reference_train_samples or int(self.cfg.model.batch_size) * self.ctx.world_size


def leading_dim(batch: Any) -> int:
    """Leading dimension of the first tensor in a (nested) batch; a list of non-tensors counts its
    items."""
    import torch

    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, Mapping):
        return leading_dim(next(iter(batch.values())))
    if isinstance(batch, (list, tuple)) and batch:
        first = batch[0]
        return leading_dim(first) if isinstance(first, (torch.Tensor, Mapping, tuple)) else len(batch)
    raise TypeError(f"cannot count samples in a {type(batch).__name__}; override Benchmark.samples_in")


def benchmark_class(cfg: RunSpec) -> type[Benchmark]:
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
