"""`perf.warmup_shapes` (t4bench.pytorch.shape_warmup) on the CPU: the init-phase warm-up runs one
generated batch per epoch-1 batch shape through forward and backward and leaves the run exactly as
it would have been without it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from conftest import DATA_ROOT, compose_spec, run_cli, run_context

from t4bench.benchmark import benchmark_class
from t4bench.benchmarks.shared_seq2seq.parts import PAD
from t4bench.progress import ProgressReporter
from t4bench.pytorch import shape_warmup
from t4bench.pytorch.perf import PerfConfigError, PerfOptions
from t4bench.pytorch.trainer import Trainer
from t4bench.tracking.tags import run_tags

pytestmark = pytest.mark.skipif(
    not (DATA_ROOT / "translation" / "mini" / "spm.model").is_file(), reason="translation mini not prepared"
)


def _trainer(model: str, warmup_shapes: int) -> Trainer:
    overrides = [f"model={model}", "perf=default", f"perf.warmup_shapes={warmup_shapes}", "model.batch_size=16"]
    cfg = compose_spec([*overrides, f"paths.data_root={DATA_ROOT}"])
    torch.manual_seed(0)
    bench = benchmark_class(cfg)(cfg, run_context(data_root=DATA_ROOT))
    return Trainer(bench, cfg, bench.ctx)


@pytest.mark.parametrize("model", ["transformer", "gnmt"])
def test_warm_up_leaves_weights_rng_and_the_next_steps_unchanged(model: str) -> None:
    """Two trainers from the same seed, one warmed up: after the warm-up the weights, gradients,
    optimizer state and torch's RNG are as before, and three real steps (with dropout) give the
    same losses and weights on both."""
    warmed, plain = _trainer(model, 4), _trainer(model, 0)
    before = copy.deepcopy(warmed.model.state_dict())
    rng = torch.get_rng_state()
    assert shape_warmup.warm_up(warmed, warmed.bench, ProgressReporter("off")) == 4
    assert shape_warmup.warm_up(plain, plain.bench, ProgressReporter("off")) == 0
    assert torch.equal(torch.get_rng_state(), rng)
    for name, value in warmed.model.state_dict().items():
        assert torch.equal(value, before[name]), name
    assert all(p.grad is None for p in warmed.model.parameters())
    assert not warmed.optimizer.state
    batches = list(iter(warmed.bench.train_batches(1)))[:3]
    for batch in batches:
        torch.manual_seed(7)
        loss_warmed, _ = warmed.step(batch)
        torch.manual_seed(7)
        loss_plain, _ = plain.step(batch)
        assert torch.equal(loss_warmed, loss_plain)
    for a, b in zip(warmed.model.parameters(), plain.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_warmup_batches_have_epoch_ones_shapes_and_no_training_tokens() -> None:
    """One generated batch per distinct (sentences, source, target) shape of epoch 1's real batches,
    the most frequent first, with no PAD and full source lengths; `limit` cuts the list."""
    bench = _trainer("transformer", 0).bench
    real = [(b.src.shape, b.tgt_in.shape) for b in bench.train_batches(1)]
    shapes = {(s[0], s[1], t[1]) for s, t in real}
    generated = bench.warmup_batches(1000)
    assert {(b.src.shape[0], b.src.shape[1], b.tgt_in.shape[1]) for b in generated} == shapes
    assert len(generated) == len(shapes)
    keys = [(s[0], s[1], t[1]) for s, t in real]
    counts = [keys.count((b.src.shape[0], b.src.shape[1], b.tgt_in.shape[1])) for b in generated]
    assert counts == sorted(counts, reverse=True)
    for batch in generated:
        assert not (batch.src == PAD).any() and not (batch.tgt_out == PAD).any()
        assert batch.src_len == (batch.src.shape[1],) * batch.src.shape[0]
        assert batch.tokens == batch.tgt_out.numel()
        assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert len(bench.warmup_batches(2)) == 2


@pytest.mark.parametrize("value", ["-1", "true", "2.5"])
def test_bad_warmup_shapes_is_named(value: str) -> None:
    with pytest.raises(PerfConfigError, match=r"perf\.warmup_shapes must be a whole number >= 0"):
        PerfOptions.from_config(compose_spec(["model=transformer", "perf=default", f"perf.warmup_shapes={value}"]))


@pytest.mark.parametrize("hw", ["h200", "h100"])
def test_gpu_profiles_warm_the_transformer_only(hw: str) -> None:
    """The profiles where it was measured: the Transformer's real-data options, nothing for GNMT."""
    transformer = PerfOptions.from_config(compose_spec(["model=transformer", f"hw={hw}"]))
    assert (transformer.warmup_shapes, transformer.cudnn_sdp, transformer.compile) == (64, False, False)
    assert PerfOptions.from_config(compose_spec(["model=gnmt", f"hw={hw}"])).warmup_shapes == 0


def test_cli_run_warms_up_in_init_and_records_the_option(tmp_path: Path) -> None:
    """A real run: the warm-up line comes before run_start's "init took" line, and the MLflow tag
    says how many shapes were asked for."""
    proc = run_cli(
        "model=transformer", "max_epochs=1", "perf.warmup_shapes=3", "progress=plain", store=tmp_path, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    warm = next(i for i, line in enumerate(lines) if line.startswith("warm-up: 3 batch shapes"))
    assert warm < next(i for i, line in enumerate(lines) if line.startswith("init took"))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run_tags(client, run)["t4bench.perf.warmup_shapes"] == "3"


def test_a_model_without_varying_shapes_says_so(capfd: pytest.CaptureFixture[str]) -> None:
    """NCF has one batch shape: the option does nothing there, and the console says so."""
    cfg = compose_spec(["model=ncf", "perf=default", "perf.warmup_shapes=4", f"paths.data_root={DATA_ROOT}"])
    bench = benchmark_class(cfg)(cfg, run_context(data_root=DATA_ROOT))
    trainer = Trainer(bench, cfg, bench.ctx)
    assert shape_warmup.warm_up(trainer, bench, ProgressReporter("plain")) == 0
    assert "perf.warmup_shapes: ncf has no varying batch shapes to warm up" in capfd.readouterr().out
