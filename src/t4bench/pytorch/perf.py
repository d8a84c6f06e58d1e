"""GPU performance options (the `perf` config group): what they are, how they are recorded, and how
they prepare the model and optimizer of one run.

    perf = PerfOptions.from_config(cfg)              # cfg.perf (+ cfg.perf.models.<model>) or all off
    ctx = perf.context(ctx)                          # precision / channels_last overrides
    model = perf.prepare_model(model)                # torch.compile (whole model or named submodules)
    optimizer = perf.prepare_optimizer(optimizer)    # fused / foreach (capturable under CUDA graphs)
    step = t4bench.pytorch.perf_step.build_step(...)         # eager, or one CUDA graph for the whole step

Every option defaults to what the loop did before it existed, so a config without `perf` trains
exactly as before. Options that cannot apply on the run's device (CUDA graphs or TF32 on a CPU)
are switched off, not failed: `tags()` records what was used, not what was asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from t4bench.pytorch import perf_profiles
from t4bench.pytorch.context import RunContext
from t4bench.spec import RunSpec
from t4bench.tracking import names

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
OPTIMIZER_IMPLS = ("default", "foreach", "fused")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: fields that record where the options came from or what could not apply; not options
_RECORDS = ("dropped", "profile", "profile_note")


class PerfConfigError(ValueError):
    """A `perf.*` value outside its allowed set (bad input: exit 2)."""


@dataclass(frozen=True)
class PerfOptions:
    #: None: the hw profile's precision; tf32 = fp32 weights and activations, TF32 matmul/conv
    precision: str | None = None
    #: None: the model config's `channels_last`
    channels_last: bool | None = None
    compile: bool = False
    compile_mode: str = "default"
    #: submodules to compile in place (e.g. [backbone] for torchvision detectors, whose losses
    #: break graphs); empty: the whole model
    compile_modules: tuple[str, ...] = ()
    #: capture the whole training step (forward, backward, optimizer) in one CUDA graph; needs
    #: static shapes and no host sync inside the step, so only some models can take it
    cuda_graphs: bool = False
    #: untimed eager steps on a side stream before the capture (real steps: they train)
    graph_warmup_steps: int = 3
    optimizer_impl: str = "default"
    #: copy the next batch to the GPU on a side stream while the current step runs
    prefetch: bool = False
    #: keep small datasets in the device's memory and build batches there (benchmarks that support
    #: it). Kept on a CPU too, where it is the same code on host tensors: CI runs the path that way
    gpu_data: bool = False
    cudnn_benchmark: bool = False
    #: the training loss of the whole batch in one set of kernels, without host syncs per image
    #: (benchmarks that have one: SSD, t4bench.benchmarks.ssd.loss); the same loss to rounding
    batched_loss: bool = False
    #: cuDNN as a scaled_dot_product_attention backend; None: torch's choice. torch 2.11 sends
    #: masked attention to cuDNN first on Hopper/Blackwell, which builds a plan per new shape
    #: (~0.4 s forward + ~0.5 s backward each): with varying sentence lengths that is the first epoch
    cudnn_sdp: bool | None = None
    #: in init (before run_start), one forward + backward without an optimizer step per training
    #: batch shape, at most this many (0: off): kernel choice, cuBLAS/attention plans and allocator
    #: growth for each new shape then cost init time, not epoch 1's. Benchmarks with varying batch
    #: shapes only (Benchmark.warmup_batches); the weights, RNG streams and buffers stay as they were
    warmup_shapes: int = 0
    #: steps between host reads of the loss (each read waits for the GPU)
    loss_read_interval: int = 20
    #: the options that were asked for but cannot apply here, with why
    dropped: tuple[str, ...] = field(default=(), compare=False)
    #: the conf/perf profile the options came from (hw=auto: the picked hardware's) and, when it
    #: sets nothing for the model, a line saying so; records, not options (not compared)
    profile: str = field(default="", compare=False)
    profile_note: str = field(default="", compare=False)

    @classmethod
    def from_config(cls, cfg: RunSpec, device: torch.device | None = None, hw_name: str | None = None) -> PerfOptions:
        """`cfg.perf`: its non-null options, else `cfg.perf.models[<model name>]`'s, else the
        defaults (so `perf.cuda_graphs=false` on the command line beats a profile's model entry).
        Under `hw=auto` the profile of the hardware found here (`hw_name`: as if it were that one);
        t4bench.pytorch.perf_profiles says which profile that is."""
        chosen = perf_profiles.chosen(cfg, hw_name)
        options = cls._validated(chosen.options)
        options = dataclasses.replace(options, profile=chosen.profile, profile_note=chosen.note)
        return options.for_device(device) if device is not None else options

    @classmethod
    def _validated(cls, values: Mapping[str, Any]) -> PerfOptions:
        known = {f.name for f in dataclasses.fields(cls)} - set(_RECORDS)
        unknown = sorted(set(values) - known)
        if unknown:
            raise PerfConfigError(f"unknown perf option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        prepared: dict[str, Any] = {k: tuple(v) if k == "compile_modules" else v for k, v in values.items()}
        options = cls(**prepared)
        _check_choice("perf.precision", options.precision, (None, *PRECISIONS))
        _check_choice("perf.optimizer_impl", options.optimizer_impl, OPTIMIZER_IMPLS)
        _check_choice("perf.compile_mode", options.compile_mode, COMPILE_MODES)
        if options.loss_read_interval < 1 or options.graph_warmup_steps < 1:
            raise PerfConfigError("perf.loss_read_interval and perf.graph_warmup_steps must be >= 1")
        shapes = options.warmup_shapes
        if isinstance(shapes, bool) or not isinstance(shapes, int) or shapes < 0:
            raise PerfConfigError(f"perf.warmup_shapes must be a whole number >= 0, got {shapes!r}")
        return options

    def for_device(self, device: torch.device) -> PerfOptions:
        """These options with the GPU-only ones switched off on a CPU (recorded in `dropped`)."""
        if device.type == "cuda":
            return self
        gpu_only = {"cuda_graphs": False, "prefetch": False, "cudnn_benchmark": False}
        asked = [name for name, off in gpu_only.items() if getattr(self, name) != off]
        if self.precision == "tf32":
            asked.append("precision=tf32")
        if self.optimizer_impl == "fused":
            asked.append("optimizer_impl=fused")  # fused SGD/Adam kernels are CUDA (and MPS) only
        if not asked:
            return self
        changes: dict[str, Any] = dict(gpu_only)
        if self.precision == "tf32":
            changes["precision"] = "fp32"
        if self.optimizer_impl == "fused":
            changes["optimizer_impl"] = "default"
        return dataclasses.replace(self, **changes, dropped=tuple(f"{a} (no CUDA device)" for a in asked))

    # -- what the run records ------------------------------------------------------------------
    def tags(self, ctx: RunContext | None = None) -> dict[str, str]:
        """MLflow tags `t4bench.perf.<option>` of the options in effect (after `context()`)."""
        values = dataclasses.asdict(self)
        for record in _RECORDS:
            values.pop(record)
        if ctx is not None:
            values["precision"] = self.precision or ctx.precision
            values["channels_last"] = ctx.channels_last if self.channels_last is None else self.channels_last
        # what is compiled: nothing without compile, even where a profile names modules for the
        # synthetic case only (perf/h200.yaml's Mask R-CNN: compile: ${input.synthetic})
        values["compile_modules"] = (",".join(self.compile_modules) or "<model>") if self.compile else ""
        tags = {
            f"{names.PERF_PREFIX}{key}": str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in values.items()
        }
        if self.dropped:
            tags[names.PERF_DROPPED] = "; ".join(self.dropped)
        # which profile, and whether it set anything for this model: a run of the plain loop on a
        # GPU says so instead of passing for the profile's best
        if self.profile:
            tags[f"{names.PERF_PREFIX}profile"] = self.profile
        if self.profile_note:
            tags[f"{names.PERF_PREFIX}profile_note"] = self.profile_note
        return tags

    # -- preparing the run ---------------------------------------------------------------------
    def context(self, ctx: RunContext) -> RunContext:
        """The run context with this precision and memory format; sets the process-wide TF32 and
        cuDNN switches (they are global in PyTorch, so they are set for every run, on or off)."""
        tf32 = self.precision == "tf32"
        if ctx.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cudnn.benchmark = self.cudnn_benchmark
            if self.cudnn_sdp is not None:
                torch.backends.cuda.enable_cudnn_sdp(self.cudnn_sdp)
        changes: dict[str, Any] = {}
        if self.precision is not None:
            changes["precision"] = "fp32" if tf32 else self.precision
        if self.channels_last is not None:
            changes["channels_last"] = self.channels_last and ctx.device.type == "cuda"
        return dataclasses.replace(ctx, **changes) if changes else ctx

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """`torch.compile` the model (returned wrapper) or the named submodules (compiled in place,
        so the model object, its state_dict keys and its evaluation path stay the same)."""
        if not self.compile:
            return model
        mode = None if self.compile_mode == "default" else self.compile_mode
        if not self.compile_modules:
            return torch.compile(model, mode=mode)  # type: ignore[return-value]
        for name in self.compile_modules:
            model.get_submodule(name).compile(mode=mode)
        return model

    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """The same optimizer class, groups and hyper-parameters with the chosen implementation;
        under CUDA graphs `capturable=True` (step counts on the device, as capture requires)."""
        if self.optimizer_impl == "default" and not self.cuda_graphs:
            return optimizer
        impl: dict[str, Any] = {}
        if self.optimizer_impl != "default":
            impl[self.optimizer_impl] = True
        if self.cuda_graphs and isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
            impl["capturable"] = True
        elif self.cuda_graphs and isinstance(optimizer, torch.optim.SGD):
            # only fused SGD takes a device-tensor LR without reading it on the host
            impl = {"fused": True}
        # the groups carry their own foreach/fused/capturable keys, which would override ours
        groups = [
            {k: v for k, v in group.items() if k not in ("foreach", "fused", "capturable")}
            for group in optimizer.param_groups
        ]
        return type(optimizer)(groups, **impl)


def _check_choice(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        shown = ", ".join("null" if a is None else str(a) for a in allowed)
        raise PerfConfigError(f"{name} must be one of {shown}, got {value!r}")
