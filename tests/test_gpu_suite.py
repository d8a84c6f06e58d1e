"""perf/gpu_suite.py's bare loop does the work t4bench's `perf=default` step does: for each model,
the same initial weights (so the same parameter count), the same batch shapes and dtypes, the same
autocast and backend switches, the same optimizer (class, flags, hyper-parameters), the same LR per
step, the same losses, and the same aten ops with the same shapes and dtypes in a step. Real models
at mini size on the CPU, a few steps each, in this process; a drift on either side fails here
instead of showing up as a same/bare ratio far from 1 on a GPU."""

from __future__ import annotations

import csv
import importlib
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from t4bench import seeding
from t4bench.benchmark import benchmark_class
from t4bench.pytorch.loop import Trainer
from t4bench.pytorch.perf import PerfOptions

# the perf/ scripts import each other by name, as `python perf/<script>.py` runs them
sys.path.insert(0, str(REPO / "perf"))
harness = importlib.import_module("harness_overhead")
gpu_suite = importlib.import_module("gpu_suite")

#: mini-size models on synthetic batches of two, bf16 autocast (the GPU suite's precision)
TINY = ["scale=mini", "hw=cpu", "hw.precision=bf16", "model.batch_size=2"]
SHAPES = {
    "gnmt": ["model.data.synthetic_src_len=7", "model.data.synthetic_tgt_len=5"],
    "transformer": ["model.data.synthetic_src_len=7", "model.data.synthetic_tgt_len=5"],
    "ssd": [],
    "maskrcnn": [],
    "resnet50": [],
    "ncf": ["+model.data.synthetic_users=50", "+model.data.synthetic_items=40"],
}
STEPS = 3


class OpTrace(TorchDispatchMode):
    """The aten ops a step runs (below autocast and autograd: the kernels it asks for), each with
    its tensors' shapes and dtypes. The loop's own bookkeeping (detach, the float64 loss sum) is
    left out: it is the harness's overhead, which the suite measures, not the model's work."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, tuple[tuple[tuple[int, ...], torch.dtype], ...]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
        bookkeeping = func is torch.ops.aten.detach.default or any(t.dtype == torch.float64 for t in tensors)
        if not bookkeeping:
            self.ops.append((str(func), tuple((tuple(t.shape), t.dtype) for t in tensors)))
        return out


def compose(model: str, out: Path) -> Any:
    return harness.synthetic_config([f"model={model}", *TINY, *SHAPES[model], "perf=default"], out)


def t4bench_same(cfg: Any, out: Path) -> tuple[Trainer, Any]:
    """The `python -m t4bench input=synthetic perf=default` step: seeded as the rank seeds
    (t4bench.rank: seed, then the benchmark and its Trainer), batch as measure_throughput makes it."""
    ctx = harness.run_context(cfg, out)
    seeding.seed_torch(int(cfg.seed))
    bench = benchmark_class(cfg)(cfg, ctx)
    trainer = Trainer(bench, cfg, ctx)
    return trainer, trainer.ctx.to_device(bench.synthetic_batch())


def leaves(batch: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(batch) if isinstance(t, torch.Tensor)]


def memory_formats(model: torch.nn.Module) -> list[bool]:
    return [p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.dim() == 4]


def optimizer_flags(optimizer: torch.optim.Optimizer) -> tuple[type, dict[str, Any], list[dict[str, Any]]]:
    groups = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    return type(optimizer), dict(optimizer.defaults), groups


def traced(step: Any) -> tuple[list[Any], float]:
    with OpTrace() as trace:
        loss = step()
    return trace.ops, float(loss.detach())


@pytest.fixture(params=sorted(SHAPES))
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any, Trainer, Any, Any]]:
    cfg = compose(request.param, tmp_path)
    trainer, batch = t4bench_same(cfg, tmp_path)
    trainer.rng = torch.get_rng_state()  # type: ignore[attr-defined]
    bare = harness.BareLoop(cfg, harness.run_context(cfg, tmp_path))
    bare.rng = torch.get_rng_state()
    yield request.param, cfg, trainer, batch, bare


def on_own_rng(side: Any, step: Any) -> tuple[list[Any], float]:
    """`traced(step)` on `side`'s own global RNG stream (dropout): each column is its own process."""
    torch.set_rng_state(side.rng)
    result = traced(step)
    side.rng = torch.get_rng_state()
    return result


def test_bare_loop_builds_what_t4bench_builds(pair: tuple[str, Any, Trainer, Any, Any]) -> None:
    model, _, trainer, batch, bare = pair
    assert torch.equal(trainer.rng, bare.rng)  # the same random draws between the seed and the first step
    same_state, bare_state = trainer.model.state_dict(), bare.model.state_dict()
    assert sum(p.numel() for p in trainer.model.parameters()) == sum(p.numel() for p in bare.model.parameters())
    assert same_state.keys() == bare_state.keys()
    # the same seed before the build: the same initial weights
    assert all(torch.equal(same_state[k], bare_state[k]) for k in same_state), model
    assert [(t.shape, t.dtype) for t in leaves(batch)] == [(t.shape, t.dtype) for t in leaves(bare.batch)]
    assert all(torch.equal(a, b) for a, b in zip(leaves(batch), leaves(bare.batch), strict=True))
    assert bare.autocast == {"device_type": "cpu", "dtype": torch.bfloat16, "enabled": True}
    assert trainer.ctx.amp_dtype == torch.bfloat16
    assert memory_formats(trainer.model) == memory_formats(bare.model)
    assert optimizer_flags(trainer.optimizer) == optimizer_flags(bare.opt)
    assert trainer.scaler.is_enabled() == bare.scaler.is_enabled()


def cpu_has_bf16_lstm() -> bool:
    """Whether this CPU's oneDNN runs an LSTM under bf16 autocast: on a CPU without AVX-512 (an
    AVX2-only AMD EPYC) it cannot create the primitive, and GNMT's steps cannot run here at all."""
    lstm = torch.nn.LSTM(4, 4, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 2, 4))
    except RuntimeError as err:
        if "primitive descriptor" in str(err):
            return False
        raise
    return True


def test_bare_steps_are_t4bench_steps(pair: tuple[str, Any, Trainer, Any, Any]) -> None:
    """Step by step: the same LR (the warm-up Mask R-CNN needs), the same loss to the last bit, the
    same kernels on the same shapes and dtypes."""
    model, _, trainer, batch, bare = pair
    if model == "gnmt" and not cpu_has_bf16_lstm():
        pytest.skip("this CPU's oneDNN has no bf16 LSTM (GNMT's bf16 steps run on GPUs and AVX-512 CPUs)")
    for step in range(STEPS):
        same_ops, same_loss = on_own_rng(trainer, lambda: trainer.step(batch)[0])
        bare_ops, bare_loss = on_own_rng(bare, lambda: bare.step()[0])
        assert [g["lr"] for g in trainer.optimizer.param_groups] == [g["lr"] for g in bare.opt.param_groups]
        assert same_loss == bare_loss, f"{model} step {step}"
        assert same_ops == bare_ops, f"{model} step {step}: the steps run different ops"
    assert bare.steps == trainer.steps and bare.samples_seen == trainer.samples_seen


@pytest.fixture
def restored_backends() -> Iterator[None]:
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = saved


def backends() -> tuple[bool, bool, bool, str]:
    return (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
        torch.get_float32_matmul_precision(),
    )


def flip_backends() -> None:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = torch.backends.cudnn.benchmark = True


@pytest.mark.usefixtures("restored_backends")
def test_bare_loop_sets_the_backend_switches_perf_default_sets(tmp_path: Path) -> None:
    """The process-wide TF32/cuDNN switches after each side's setup on a CUDA device (setting them
    needs no GPU), from torch's defaults (cuDNN TF32 on) or anything else a process had."""
    cfg = compose("ssd", tmp_path)
    cuda = torch.device("cuda", 0)
    ctx = harness.run_context(cfg, tmp_path)
    flip_backends()
    PerfOptions.from_config(cfg, cuda).context(type(ctx)(**{**vars(ctx), "device": cuda}))
    t4bench_switches = backends()
    flip_backends()
    harness.plain_backends(cuda)
    assert backends() == t4bench_switches == (False, False, False, "highest")


def test_bare_and_same_columns_get_one_config(tmp_path: Path) -> None:
    """The suite hands bare and same the same overrides: only the entry point differs."""
    args = gpu_suite.parse_args(["--device", "cpu", "--models", "gnmt", "--batch", "4", "scale=mini"])
    overrides = gpu_suite.column_overrides("gnmt", args)
    assert overrides[:2] == ["model=gnmt", "hw=cpu"] and "model.batch_size=4" in overrides and "scale=mini" in overrides
    cfg = harness.synthetic_config([*overrides, "perf=default"], tmp_path)
    assert int(cfg.model.batch_size) == 4 and str(cfg.hw.precision) == "fp32" and bool(cfg.input.synthetic)


def test_best_column_runs_only_where_the_profile_sets_options(tmp_path: Path) -> None:
    """conf/perf/cpu.yaml sets no options for ResNet-50 (the Hopper profile sets some): its "best" at
    perf=cpu would rerun perf=default (on 2026-12-06 such a rerun read 1.07x for Mask R-CNN: the
    spread, not a speed-up), so the suite marks it unset instead of running it. A command-line perf
    option is in every column's overrides, so it makes no difference between them."""
    args = gpu_suite.parse_args(["--device", "cpu", "--models", "resnet50", "ncf"])
    for model, extra, profile, expected in (
        ("resnet50", [], "cpu", False),
        ("ncf", [], "h100", True),
        ("resnet50", [], "h100", True),
        ("resnet50", ["perf.cudnn_benchmark=true"], "cpu", False),
    ):
        overrides = [*gpu_suite.column_overrides(model, args), *extra]
        cfg = harness.synthetic_config(overrides, tmp_path)
        plain, chosen = ([*overrides, gpu_suite.perf_override(cfg, perf)] for perf in ("default", profile))
        assert gpu_suite.perf_differs(plain, chosen, tmp_path) is expected


def test_bare_worker_process_matches_the_t4bench_run(tmp_path: Path) -> None:
    """End to end, as the suite runs them: `python -m t4bench` and the bare worker, each in its own
    process, train Mask R-CNN (whose loss went NaN in the bare loop without the warm-up) to the same
    mean loss, to the bit."""
    tiny = ["--device", "cpu", "--models", "maskrcnn", "--batch", "2", "--steps", "2", "--warmup", "1"]
    args = gpu_suite.parse_args([*tiny, "--best", "none", "scale=mini"])
    row = gpu_suite.measure("maskrcnn", args, tmp_path, peak=1.0, gpu="cpu")
    assert row.notes == "" and row.bare_eager > 0 and row.t4bench_same > 0
    assert math.isfinite(row.bare_loss) and row.bare_loss == row.same_loss
    assert row.units_per_step == 2 and row.gflop_per_step > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bare_worker_sets_cuda_up_in_its_fresh_process() -> None:
    """On a GPU the bare worker's process starts with CUDA untouched: its first call, the peak-memory
    reset, must set CUDA up itself (every bare loop of the 2026-12-05 H100 suite failed there with
    'Invalid device argument'). On the CPU the same worker runs in the test above."""
    tiny = ["--device", "cuda", "--models", "ncf", "--batch", "64", "--steps", "2", "--warmup", "1"]
    args = gpu_suite.parse_args(tiny)
    notes: list[str] = []
    result = gpu_suite.bare_run("ncf", [*gpu_suite.column_overrides("ncf", args), "perf=default"], notes)
    assert notes == [] and result["throughput"] > 0 and result["peak_gib"] > 0


def test_sigterm_keeps_the_pairs_a_model_finished(tmp_path: Path) -> None:
    """A device call's time limit (`timeout`, SIGTERM) used to cost the model under way its whole
    row (2026-12-06: Mask R-CNN after one complete pair). Now the suite writes the pairs that model
    finished, says it was cut short, measures no further model and exits non-zero."""
    csv_path = tmp_path / "suite.csv"
    command = [sys.executable, str(REPO / "perf" / "gpu_suite.py"), "--device", "cpu", "--models", "ncf", "resnet50"]
    command += ["--batch", "64", "--steps", "2", "--warmup", "1", "--repeats", "3", "--csv", str(csv_path)]
    env = {**os.environ, "SUITE_WORK": str(tmp_path / "work"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:  # the first pair (one t4bench run, one bare worker) counted
        if line.strip() == "ncf: pair 1 of 3 done":
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, rest
    assert "cut short by SIGTERM: 1 of 2 models written" in rest
    with csv_path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["model"] for row in rows] == ["ncf"]
    assert rows[0]["repeats"] == "1" and "cut short by SIGTERM after 1 of 3 pairs" in rows[0]["notes"]
    assert float(rows[0]["bare_eager"]) > 0 and float(rows[0]["t4bench_same"]) > 0
