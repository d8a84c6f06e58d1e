"""The training step under the `perf` options: eager (autocast, GradScaler, optimizer step: the
loop's step as it always was) or the whole step captured once in a CUDA graph and replayed; and a
prefetcher that copies the next batch to the GPU on a side stream while the current step runs.

Why a whole-step graph: a small model's step (NCF at batch 256: ~60 kernels of a few microseconds)
is bound by kernel launches from Python, not by the GPU; one graph replay launches them all at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from t4bench.pytorch.context import RunContext
from t4bench.pytorch.perf import PerfOptions

LossFn = Callable[[torch.nn.Module, Any], tuple[torch.Tensor, int]]
OptimizerStep = Callable[[torch.amp.GradScaler, torch.optim.Optimizer], None]
Step = Callable[[Any], tuple[torch.Tensor, int]]


def _default_optimizer_step(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> None:
    scaler.step(optimizer)
    scaler.update()


def eager_step(
    loss_fn: LossFn,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    ctx: RunContext,
    optimizer_step: OptimizerStep = _default_optimizer_step,
) -> Step:
    """forward under autocast, zero_grad, (scaled) backward, optimizer step."""

    def step(batch: Any) -> tuple[torch.Tensor, int]:
        with ctx.autocast():
            loss, units = loss_fn(model, batch)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        optimizer_step(scaler, optimizer)
        return loss.detach(), units

    return step


class GraphStep:
    """The first `warmup` calls run eagerly on a side stream (real steps; they let lazy state such
    as optimizer moments and cuBLAS workspaces exist before capture); the next call captures the
    step and replays it, and every later call copies its batch into the captured input tensors and
    replays. A batch of another shape (an epoch's last, short batch), or whose host values differ
    (translation lengths and token counts, which the captured step has baked in), runs eagerly.

    The learning rate becomes a device tensor at capture (a Python float would be frozen into the
    graph); the loop keeps writing floats into `param_groups`, which are copied into it before each
    replay. `units` of a replay is the captured step's: static shapes, static counts.
    """

    def __init__(
        self, loss_fn: LossFn, model: torch.nn.Module, optimizer: torch.optim.Optimizer, ctx: RunContext, warmup: int
    ) -> None:
        self.loss_fn, self.model, self.optimizer, self.ctx = loss_fn, model, optimizer, ctx
        self.warmup = warmup
        self.eager = eager_step(loss_fn, model, optimizer, torch.amp.GradScaler(enabled=False), ctx)
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.captured: CapturedBatch | None = None  # keeps the replay's input tensors alive
        self.static_loss: torch.Tensor | None = None
        self.units = 0
        self.lrs: list[tuple[dict[str, Any], torch.Tensor, float]] = []

    def __call__(self, batch: Any) -> tuple[torch.Tensor, int]:
        self.calls += 1
        if self.graph is None and self.calls <= self.warmup:
            return self._on_side_stream(batch)
        if self.graph is None:
            self._capture(batch)
        else:
            assert self.captured is not None
            inputs = self.captured.inputs_for(batch)
            if inputs is None:
                return self.eager(batch)
            for target, source in inputs:
                target.copy_(source, non_blocking=True)
        self._load_lrs()
        assert self.graph is not None and self.static_loss is not None
        self.graph.replay()
        return self.static_loss.clone(), self.units

    def _on_side_stream(self, batch: Any) -> tuple[torch.Tensor, int]:
        side = torch.cuda.Stream(self.ctx.device)
        side.wait_stream(torch.cuda.current_stream(self.ctx.device))
        with torch.cuda.stream(side):
            loss, units = self.eager(batch)
        torch.cuda.current_stream(self.ctx.device).wait_stream(side)
        return loss, units

    def _capture(self, batch: Any) -> None:
        static_batch = _clone(batch)
        self.captured = CapturedBatch.of(static_batch)
        for group in self.optimizer.param_groups:
            value = float(group["lr"])
            group["lr"] = torch.tensor(value, device=self.ctx.device)
            self.lrs.append((group, group["lr"], value))
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            with self.ctx.autocast():
                loss, self.units = self.loss_fn(self.model, static_batch)
            loss.backward()
            self.optimizer.step()
        self.static_loss = loss.detach()
        self.graph = graph

    def _load_lrs(self) -> None:
        """Copy the float the loop wrote into each group into the captured LR tensor (one small
        kernel, only when it changed), and put the tensor back in the group."""
        for index, (group, tensor, last) in enumerate(self.lrs):
            value = group["lr"]
            if not isinstance(value, torch.Tensor):
                if float(value) != last:
                    tensor.fill_(float(value))
                    self.lrs[index] = (group, tensor, float(value))
                group["lr"] = tensor


def build_step(
    loss_fn: LossFn,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    ctx: RunContext,
    options: PerfOptions,
    optimizer_step: OptimizerStep = _default_optimizer_step,
) -> Step:
    """The step the options ask for. CUDA graphs need a CUDA device, no GradScaler (its inf check
    reads the host) and one rank (gradient all-reduce inside a captured graph is not set up here);
    otherwise the eager step."""
    if options.cuda_graphs and ctx.device.type == "cuda" and not scaler.is_enabled() and ctx.world_size == 1:
        return GraphStep(loss_fn, model, optimizer, ctx, options.graph_warmup_steps)
    return eager_step(loss_fn, model, optimizer, scaler, ctx, optimizer_step)


def prefetched(batches: Iterable[Any], ctx: RunContext) -> Iterator[Any]:
    """`batches` moved to the device one ahead: batch n+1's copy (non-blocking from pinned memory)
    is issued on a side stream before batch n is handed out, so it overlaps batch n's step."""
    if ctx.device.type != "cuda":
        yield from batches
        return
    side = torch.cuda.Stream(ctx.device)
    main = torch.cuda.current_stream(ctx.device)

    def load(batch: Any) -> Any:
        side.wait_stream(main)  # the copy's destination memory may have been freed by main
        with torch.cuda.stream(side):
            return ctx.to_device(batch)

    iterator = iter(batches)
    try:
        ready = load(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        current, ready = ready, None
        main.wait_stream(side)
        _record_on(current, main)
        ready = load(batch)
        yield current
    main.wait_stream(side)
    _record_on(ready, main)
    yield ready


_HOST_NUMBERS = frozenset({int, float, bool})


def _walk(batch: Any) -> Iterator[Any]:
    """Every leaf of a (nested) batch: tensors, and host values such as a translation batch's
    lengths. A plain tuple or list of host numbers (GNMT's 128 source lengths) is one leaf, compared
    whole, not 128 generator steps."""
    if isinstance(batch, Mapping):
        for value in batch.values():
            yield from _walk(value)
    elif isinstance(batch, Sequence) and not isinstance(batch, str):
        if not hasattr(batch, "_fields") and all(type(value) in _HOST_NUMBERS for value in batch):
            yield batch
            return
        for value in batch:
            yield from _walk(value)
    else:
        yield batch


def _leaves(batch: Any) -> list[torch.Tensor]:
    return [leaf for leaf in _walk(batch) if isinstance(leaf, torch.Tensor)]


def _record_on(batch: Any, stream: torch.cuda.Stream) -> None:
    """Tell the allocator these side-stream tensors are used on `stream` (no early reuse)."""
    for tensor in _leaves(batch):
        if tensor.is_cuda:
            tensor.record_stream(stream)


@dataclass(frozen=True)
class _TensorLeaf:
    """A tensor's place in a fit key: its shape and dtype, never its values. Not a tuple: it equals
    only another _TensorLeaf, so a tensor never fits where a host value was."""

    shape: torch.Size
    dtype: torch.dtype


def _fit_key(batch: Any) -> tuple[list[Any], list[torch.Tensor]]:
    """(fit key, tensors) of a batch in one walk. A batch fits the captured step when its key equals
    the captured one: tensors of the same shapes and dtypes, the same host values."""
    key: list[Any] = []
    tensors: list[torch.Tensor] = []
    for leaf in _walk(batch):
        if isinstance(leaf, torch.Tensor):
            key.append(_TensorLeaf(leaf.shape, leaf.dtype))
            tensors.append(leaf)
        else:
            key.append(leaf)
    return key, tensors


@dataclass(frozen=True, eq=False)
class CapturedBatch:
    """The batch a step was captured on, listed once at capture (its fit key and its tensors), so
    that each replay walks only the new batch. GraphStep, its tests and perf/graph_fit_cost.py all
    ask `inputs_for`, so they check with one piece of code."""

    key: list[Any]
    tensors: list[torch.Tensor]

    @classmethod
    def of(cls, batch: Any) -> CapturedBatch:
        key, tensors = _fit_key(batch)
        return cls(key, tensors)

    def inputs_for(self, batch: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """(captured tensor, new tensor) pairs to copy before a replay, or None when the batch does
        not fit: another shape or dtype anywhere, or other host values."""
        key, tensors = _fit_key(batch)
        if key != self.key:
            return None
        return list(zip(self.tensors, tensors, strict=True))


def _clone(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, Mapping):
        return {key: _clone(value) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_clone(value) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_clone(value) for value in batch)
    return batch
