"""The `perf` options (t4bench.pytorch.perf, perf_step) and the GPU-resident NCF sampler, on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from t4bench import hardware
from t4bench.benchmarks.ncf.gpu_data import GpuNegativeSampler
from t4bench.benchmarks.ncf.movielens import LeaveOneOut
from t4bench.benchmarks.shared_seq2seq.parts import collate
from t4bench.errors import T4BenchError
from t4bench.pytorch import perf_profiles
from t4bench.pytorch.context import RunContext
from t4bench.pytorch.perf import PerfConfigError, PerfOptions
from t4bench.pytorch.perf_step import CapturedBatch, _walk, build_step, prefetched
from t4bench.spec import RunSpec, build_spec

CONF = Path(__file__).resolve().parents[1] / "conf"
CPU = torch.device("cpu")


def compose_cfg(*overrides: str) -> RunSpec:
    """The run spec of the composed config, as the rank reads its perf options from."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return build_spec(compose(config_name="config", overrides=list(overrides)))


def ctx(rank: int = 0, world: int = 1, seed: int = 0) -> RunContext:
    return RunContext(
        device=CPU, precision="fp32", rank=rank, world_size=world, local_rank=rank, seed=seed, data_root=Path(".")
    )


def test_absent_group_is_the_old_loop() -> None:
    options = PerfOptions.from_config(compose_cfg("model=ncf"))
    assert options == PerfOptions()
    assert not options.compile and not options.cuda_graphs and options.optimizer_impl == "default"


def test_per_model_options_lie_over_the_group() -> None:
    cfg = compose_cfg("model=ncf", "perf=h200")
    options = PerfOptions.from_config(cfg)
    assert options.cuda_graphs and options.gpu_data and options.optimizer_impl == "fused"
    resnet = PerfOptions.from_config(compose_cfg("model=resnet50", "perf=h200", "input=synthetic"))
    assert resnet.compile and not resnet.cuda_graphs


def test_command_line_option_beats_the_profiles_model_entry() -> None:
    options = PerfOptions.from_config(compose_cfg("model=ncf", "perf=h200", "perf.cuda_graphs=false"))
    assert not options.cuda_graphs and options.gpu_data


def test_gpu_only_options_are_dropped_on_a_cpu_and_recorded() -> None:
    options = PerfOptions.from_config(compose_cfg("model=ncf", "perf=h200", "perf.precision=tf32"), CPU)
    assert not options.cuda_graphs and options.optimizer_impl == "default"
    # device-resident data is the same code on host tensors: kept, so CI runs that path
    assert options.gpu_data
    assert options.precision == "fp32"
    tags = options.tags(ctx())
    assert tags["t4bench.perf.cuda_graphs"] == "false"
    assert "cuda_graphs (no CUDA device)" in tags["t4bench.perf.dropped"]
    assert "precision=tf32" in tags["t4bench.perf.dropped"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("perf.precision=fp8", "perf.precision must be one of"),
        ("perf.optimizer_impl=apex", "perf.optimizer_impl must be one of"),
        ("+perf.compile_everything=true", "unknown perf option(s) compile_everything"),
        ("perf.loss_read_interval=0", "must be >= 1"),
    ],
)
def test_bad_values_are_named(override: str, message: str) -> None:
    with pytest.raises(PerfConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PerfOptions.from_config(compose_cfg("model=ncf", "perf=default", override))


def test_cudnn_attention_switch_is_a_recorded_option() -> None:
    options = PerfOptions.from_config(compose_cfg("model=transformer", "perf=default", "perf.cudnn_sdp=false"))
    assert options.cudnn_sdp is False
    assert options.tags()["t4bench.perf.cudnn_sdp"] == "false"
    assert PerfOptions().tags()["t4bench.perf.cudnn_sdp"] == "None"


def test_context_overrides_precision_and_memory_format() -> None:
    base = ctx()
    assert PerfOptions(precision="bf16").context(base).amp_dtype == torch.bfloat16
    assert PerfOptions(precision="tf32").context(base).precision == "fp32"
    assert PerfOptions().context(base) is base
    # channels_last is a GPU layout: asked for on a CPU it stays off
    assert not PerfOptions(channels_last=True).context(base).channels_last


def test_optimizer_rebuilt_with_the_same_groups_and_hyperparameters() -> None:
    model = torch.nn.Linear(4, 2)
    groups = [{"params": [model.weight]}, {"params": [model.bias], "weight_decay": 0.0}]
    sgd = torch.optim.SGD(groups, lr=0.1, momentum=0.9, weight_decay=1e-4)
    rebuilt = PerfOptions(optimizer_impl="foreach").prepare_optimizer(sgd)
    assert type(rebuilt) is torch.optim.SGD and rebuilt is not sgd
    assert [g["weight_decay"] for g in rebuilt.param_groups] == [1e-4, 0.0]
    assert all(g["foreach"] and g["momentum"] == 0.9 and g["lr"] == 0.1 for g in rebuilt.param_groups)
    assert PerfOptions().prepare_optimizer(sgd) is sgd


def test_eager_step_is_the_loops_step() -> None:
    """Same parameters after three steps as zero_grad / forward / backward / step written out."""
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model.load_state_dict(reference.state_dict())
    opt_ref = torch.optim.Adam(reference.parameters(), lr=1e-2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(3)]

    def loss_fn(m, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(m(x), y), len(x)

    step = build_step(
        loss_fn,
        model,
        opt,
        torch.amp.GradScaler("cpu", enabled=False),
        ctx(),
        PerfOptions(cuda_graphs=True).for_device(CPU),
    )
    for batch in batches:
        opt_ref.zero_grad()
        loss_fn(reference, batch)[0].backward()
        opt_ref.step()
        loss, units = step(batch)
        assert units == 16 and loss.requires_grad is False
    for a, b in zip(reference.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_prefetch_on_a_cpu_yields_the_batches_unchanged() -> None:
    batches = [(torch.full((2,), float(i)),) for i in range(4)]
    assert [b[0][0].item() for b in prefetched(batches, ctx())] == [0.0, 1.0, 2.0, 3.0]
    assert list(prefetched([], ctx())) == []


def small_data() -> LeaveOneOut:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(20), 6)
    items = np.concatenate([rng.choice(15, 6, replace=False) for _ in range(20)])
    keys = np.unique(users * 15 + items)
    return LeaveOneOut(
        num_users=20,
        num_items=15,
        train_users=users,
        train_items=items,
        test_items=np.zeros(20, dtype=np.int64),
        positive_keys=keys,
    )


def _replayable(static: Any, batch: Any) -> bool:
    """GraphStep's own check: a batch replays the captured step when it has inputs to copy."""
    return CapturedBatch.of(static).inputs_for(batch) is not None


def test_a_captured_step_replays_only_batches_with_its_shapes_and_host_values() -> None:
    # translation batches carry lengths and token counts as host ints, which a captured step has
    # baked in: same tensor shapes with other lengths must run eagerly, not replay
    static = collate([([5, 6, 7], [8, 9]), ([5, 6, 7], [8, 9])])
    assert _replayable(static, collate([([9, 9, 9], [4, 4]), ([6, 6, 6], [5, 5])]))
    padded = collate([([5, 6, 7], [8, 9]), ([5, 6], [8, 9])])  # same shapes, a padded source
    assert padded.src.shape == static.src.shape and not _replayable(static, padded)
    assert not _replayable(static, collate([([5, 6, 7], [8, 9, 4]), ([5, 6, 7], [8])]))  # tokens equal, shape not
    assert _replayable((torch.zeros(2, 3), torch.ones(2)), (torch.ones(2, 3), torch.zeros(2)))
    assert not _replayable((torch.zeros(2, 3), torch.ones(2)), (torch.zeros(3, 3), torch.ones(2)))
    assert not _replayable((torch.zeros(2),), (torch.zeros(2, dtype=torch.float16),))
    # a host value never fits where a tensor was, not even one that reads as its shape and dtype
    assert not _replayable((torch.zeros(2),), ((torch.Size([2]), torch.float32),))
    captured = CapturedBatch.of(static)
    new = collate([([9, 9, 9], [4, 4]), ([6, 6, 6], [5, 5])])
    inputs = captured.inputs_for(new)
    assert inputs is not None  # the captured tensors are the targets, the new batch's the sources
    assert [(t.data_ptr(), s.data_ptr()) for t, s in inputs] == [
        (static.src.data_ptr(), new.src.data_ptr()),
        (static.tgt_in.data_ptr(), new.tgt_in.data_ptr()),
        (static.tgt_out.data_ptr(), new.tgt_out.data_ptr()),
    ]
    assert (3, 3) in captured.key  # the lengths are one leaf, compared whole


def test_walk_keeps_host_number_sequences_whole_and_descends_into_the_rest() -> None:
    a, b = torch.zeros(1), torch.ones(1)
    assert list(_walk({"x": (1, 2.0, True), "y": [a, (b, 3)]})) == [(1, 2.0, True), a, b, 3]
    assert list(_walk(((),))) == [()]


def test_gpu_sampler_negatives_are_unseen_and_shards_disjoint() -> None:
    data = small_data()
    sampler = GpuNegativeSampler(data, negatives=4, ctx=ctx(seed=3))
    users, items, labels = sampler.epoch_samples(epoch=1)
    assert len(users) == len(data.train_users) * 5 and int(labels.sum()) == len(data.train_users)
    negative = labels == 0
    assert not data.is_positive(users[negative].numpy(), items[negative].numpy()).any()
    again = GpuNegativeSampler(data, negatives=4, ctx=ctx(seed=3)).epoch_samples(epoch=1)
    assert torch.equal(items, again[1])  # the same on every rank: seeded by (seed, epoch)
    assert not torch.equal(items, sampler.epoch_samples(epoch=2)[1])
    shards = [GpuNegativeSampler(data, 4, ctx(rank=r, world=2, seed=3)).shard(len(users), 1) for r in range(2)]
    assert sorted(torch.cat(shards).tolist()) == list(range(len(users)))
    batches = sampler.batches(epoch=1, batch_size=32)
    assert sum(len(b[0]) for b in batches) == len(users) and all(len(b) == 3 for b in batches)


def test_compiled_modules_are_recorded_only_where_compile_is_on() -> None:
    """perf/h200.yaml names Mask R-CNN's backbone for the synthetic case only: a real-data run
    compiles nothing and its tag must not say otherwise."""
    key = "t4bench.perf.compile_modules"
    assert PerfOptions(compile_modules=("backbone",)).tags()[key] == ""
    assert PerfOptions(compile=True, compile_modules=("backbone",)).tags()[key] == "backbone"
    assert PerfOptions(compile=True).tags()[key] == "<model>"
    real = PerfOptions.from_config(compose_cfg("model=maskrcnn", "perf=h200"))
    synthetic = PerfOptions.from_config(compose_cfg("model=maskrcnn", "perf=h200", "input=synthetic"))
    assert (real.compile, synthetic.compile) == (False, True)
    assert synthetic.compile_modules == ("backbone",) and synthetic.optimizer_impl == "fused"


@pytest.mark.parametrize("profile", ["h200", "h100"])
def test_gpu_profiles_set_ssds_batched_loss_and_ncfs_compile_at_synthetic_shapes_only(profile: str) -> None:
    """Measured on an H100 (docs/perf.md): SSD's whole-batch loss for real and synthetic data; NCF's
    compile only at fixed synthetic shapes (a mini run would spend longer compiling than training)."""
    for data in ([], ["input=synthetic"]):
        ssd = PerfOptions.from_config(compose_cfg("model=ssd", f"perf={profile}", *data))
        assert ssd.batched_loss and ssd.optimizer_impl == "fused" and not ssd.compile
    real = PerfOptions.from_config(compose_cfg("model=ncf", f"perf={profile}"))
    synthetic = PerfOptions.from_config(compose_cfg("model=ncf", f"perf={profile}", "input=synthetic"))
    assert (real.compile, synthetic.compile) == (False, True)
    assert synthetic.optimizer_impl == "fused" and synthetic.compile_modules == ()


MODELS = ("ncf", "resnet50", "ssd", "maskrcnn", "gnmt", "transformer")
DATA = ((), ("input=synthetic",))


@pytest.mark.parametrize("model", MODELS)
def test_h100_and_h200_run_the_same_hopper_options(model: str) -> None:
    """What was measured on one Hopper card holds for both (perf/hopper.yaml): `hw=h100` composes
    the options `hw=h200` does, for real and synthetic data, and they are not the plain loop."""
    for data in DATA:
        h100, h200 = (
            PerfOptions.from_config(compose_cfg(f"model={model}", f"hw={hw}", *data)) for hw in ("h100", "h200")
        )
        assert h100 == h200 and h100 != PerfOptions(), (model, data)
        assert (h100.profile, h200.profile, h100.profile_note) == ("h100", "h200", "")


def test_hopper_ncf_and_resnet50_options() -> None:
    """NCF: GPU-resident data and the whole-step graph everywhere, compile at synthetic shapes;
    ResNet-50: compile at synthetic shapes only (on real mini data compiling took 32.6 s of a 1.6 s
    epoch on an H100, perf/hopper.yaml)."""
    for hw in ("h100", "h200"):
        ncf = PerfOptions.from_config(compose_cfg("model=ncf", f"hw={hw}"))
        assert ncf.gpu_data and ncf.cuda_graphs and ncf.optimizer_impl == "fused" and not ncf.compile
        assert PerfOptions.from_config(compose_cfg("model=ncf", f"hw={hw}", "input=synthetic")).compile
        real, synthetic = (PerfOptions.from_config(compose_cfg("model=resnet50", f"hw={hw}", *data)) for data in DATA)
        assert (real.compile, synthetic.compile) == (False, True) and real.optimizer_impl == "fused"


@pytest.mark.parametrize("hw", sorted(p.stem for p in (CONF / "hw").glob("*.yaml")))
def test_every_hw_profile_composes_with_every_model(hw: str) -> None:
    """Each hw profile brings its perf profile (`perf: ${hw}`), and every option in it is valid."""
    for model in MODELS:
        options = PerfOptions.from_config(compose_cfg(f"model={model}", f"hw={hw}", "input=synthetic"), CPU)
        assert options.profile == (hardware.profile_for(hardware.detect()) if hw == "auto" else hw)


@pytest.mark.parametrize("model", ["ncf", "gnmt"])
def test_auto_runs_the_profile_of_the_hardware_it_picks(model: str) -> None:
    """perf/auto.yaml lists every hw profile under by_hw, and hw=auto on that hardware runs the
    options naming the hardware would (synthetic: where the profiles' interpolations differ)."""
    auto_cfg = compose_cfg(f"model={model}", "hw=auto", "input=synthetic")
    for picked in hardware.profile_names():
        auto = PerfOptions.from_config(auto_cfg, hw_name=picked)
        named = PerfOptions.from_config(compose_cfg(f"model={model}", f"hw={picked}", "input=synthetic"))
        assert auto == named and auto.profile == named.profile == picked


def test_options_given_with_hw_auto_lie_over_the_picked_profile() -> None:
    cfg = compose_cfg("model=resnet50", "hw=auto", "input=synthetic", "perf.compile=false")
    options = PerfOptions.from_config(cfg, hw_name="h100")
    assert not options.compile and options.optimizer_impl == "fused" and options.profile == "h100"
    with pytest.raises(T4BenchError, match=r"perf/auto\.yaml has no profile for hw=h900"):
        perf_profiles.chosen(cfg, "h900")


def test_fp16_profiles_set_no_whole_step_graph() -> None:
    """T4 and V100 train fp16 with a GradScaler, under which the loop runs the eager step: a
    cuda_graphs option there would be tagged true and never run."""
    for hw in ("t4", "v100-pcie", "v100-sxm2"):
        entries = compose_cfg(f"hw={hw}", "input=synthetic").perf.models
        assert set(entries) == set(MODELS) and not any(entry.get("cuda_graphs") for entry in entries.values())


def test_every_model_entry_says_measured_or_untested() -> None:
    """Each model's options in a GPU profile open with `# measured: <figure, date, GPU>` or
    `# untested on <GPU>: <why believed safe>`."""
    for path in sorted((CONF / "perf").glob("*.yaml")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.startswith("  ") and not line.startswith("   ") and line.rstrip().endswith(":"):
                first = lines[number + 1].strip()
                assert first.startswith(("# measured: ", "# untested on ")), f"{path.name}:{number + 1}: {line.strip()}"


def test_a_profile_that_sets_nothing_for_the_model_says_so() -> None:
    plain = PerfOptions.from_config(compose_cfg("model=ncf", "hw=cpu"))
    tags = plain.tags()
    assert tags["t4bench.perf.profile"] == "cpu"
    assert tags["t4bench.perf.profile_note"] == "perf profile cpu sets nothing for ncf: the plain eager loop"
    given = PerfOptions.from_config(compose_cfg("model=ncf", "hw=cpu", "perf.loss_read_interval=5")).tags()
    assert (
        given["t4bench.perf.profile_note"]
        == "perf profile cpu sets nothing for ncf; in effect only loss_read_interval=5"
    )
    assert "t4bench.perf.profile_note" not in PerfOptions.from_config(compose_cfg("model=ncf", "hw=h100")).tags()
    # the records are not options: a profile's plain loop compares equal to perf=default's
    assert plain == PerfOptions.from_config(compose_cfg("model=ncf", "hw=cpu", "perf=default"))
