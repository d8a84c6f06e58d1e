"""Checkpoints (t4bench.pytorch.checkpoint) with real tensors and files: a resumed training continues
bit-for-bit, RNGs included; files are replaced atomically; damaged files are one clear error."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from t4bench.pytorch import checkpoint
from t4bench.pytorch.checkpoint import CheckpointError
from t4bench.tracking.client import mlflow_client


def _setup(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    return model, optimizer, scheduler


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: object, steps: int) -> list[float]:
    """Steps whose data and dropout come from every RNG a benchmark may use."""
    losses = []
    for _ in range(steps):
        noise = random.random() + float(np.random.rand())
        x = torch.randn(32, 8) + noise
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()  # type: ignore[attr-defined]
        losses.append(float(loss.detach()))
    return losses


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def test_resume_continues_exactly(tmp_path: Path) -> None:
    _seed_all(1)
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 5)
    path = checkpoint.save(
        checkpoint.path_for(tmp_path, 1),
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        loop={"epoch": 1, "steps": 5, "train_time_s": 1.5},
        meta={"run_id": "abc", "seed": 1},
    )
    expected = _train(model, optimizer, scheduler, 7)
    expected_weights = [p.detach().clone() for p in model.parameters()]

    _seed_all(99)  # a fresh process would start from other RNG states
    model2, optimizer2, scheduler2 = _setup(seed=5)
    payload = checkpoint.read(path)
    loop = checkpoint.restore(payload, model=model2, optimizer=optimizer2, scheduler=scheduler2)
    assert loop == {"epoch": 1, "steps": 5, "train_time_s": 1.5}
    assert payload["meta"] == {"run_id": "abc", "seed": 1}
    assert _train(model2, optimizer2, scheduler2, 7) == expected
    for got, want in zip(model2.parameters(), expected_weights, strict=True):
        assert torch.equal(got, want)


def test_checkpoint_is_weights_only_loadable(tmp_path: Path) -> None:
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 2)
    path = checkpoint.save(tmp_path / "c.pt", model=model, optimizer=optimizer, loop={"epoch": 1})
    payload = torch.load(path, weights_only=True)  # nothing needs unpickling beyond plain data
    assert payload["format"] == checkpoint.FORMAT
    assert set(payload["rng"]) >= {"python", "numpy", "torch"}


def test_truncated_file_is_one_line(tmp_path: Path) -> None:
    model, optimizer, _ = _setup()
    path = checkpoint.save(tmp_path / "c.pt", model=model, optimizer=optimizer, loop={"epoch": 1})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as caught:
        checkpoint.read(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "truncated" in message


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", b"PK\x03\x04garbage"])
def test_foreign_files_are_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=r"c\.pt: unreadable checkpoint") as caught:
        checkpoint.read(path)
    assert "\n" not in str(caught.value)


def test_other_torch_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="not a t4bench checkpoint"):
        checkpoint.read(path)


def test_pickled_code_is_refused(tmp_path: Path) -> None:
    """weights_only: a checkpoint carrying an arbitrary object is not executed."""
    path = tmp_path / "evil.pt"
    torch.save({"format": checkpoint.FORMAT, "payload": Path("/")}, path)
    with pytest.raises(CheckpointError, match="unreadable checkpoint"):
        checkpoint.read(path)


class _Unpicklable:
    def __reduce__(self) -> tuple:
        raise RuntimeError("cannot be saved")


def test_failed_write_keeps_previous(tmp_path: Path) -> None:
    model, _, _ = _setup()
    path = checkpoint.save(tmp_path / "c.pt", model=model, loop={"epoch": 1})
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="cannot be saved"):
        checkpoint.save(path, model=model, loop={"epoch": 2, "bad": _Unpicklable()})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.pt"]  # no temporary file left behind
    assert checkpoint.read(path)["loop"] == {"epoch": 1}


def test_folder_latest_prune_and_resolve(tmp_path: Path) -> None:
    model, _, _ = _setup()
    for epoch in (1, 2, 3):
        checkpoint.save(checkpoint.path_for(tmp_path, epoch), model=model, loop={"epoch": epoch})
    assert checkpoint.latest(tmp_path) == tmp_path / "epoch-0003.pt"
    checkpoint.prune(tmp_path, keep=2)
    assert checkpoint.saved_epochs(tmp_path) == [2, 3]
    assert checkpoint.resolve(str(tmp_path)) == tmp_path / "epoch-0003.pt"
    assert checkpoint.resolve(str(tmp_path / "epoch-0002.pt")) == tmp_path / "epoch-0002.pt"
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        checkpoint.resolve(str(tmp_path / "nope.pt"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match=r"no epoch-NNNN\.pt"):
        checkpoint.resolve(str(empty))


def test_resolve_by_run_id(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    experiment = client.create_experiment("ckpt", artifact_location=(tmp_path / "art").as_uri())
    with_ckpt = client.create_run(experiment).info.run_id
    without = client.create_run(experiment).info.run_id
    folder = tmp_path / "ckpts"
    model, _, _ = _setup()
    checkpoint.save(checkpoint.path_for(folder, 4), model=model, loop={"epoch": 4})
    client.set_tag(with_ckpt, checkpoint.FOLDER_TAG, str(folder))
    assert checkpoint.resolve(with_ckpt, uri) == folder / "epoch-0004.pt"
    with pytest.raises(CheckpointError, match="wrote no checkpoints"):
        checkpoint.resolve(without, uri)
    with pytest.raises(CheckpointError, match="no such run"):
        checkpoint.resolve("0" * 32, uri)


@pytest.mark.parametrize("half_life", [0.0, 0.5])
def test_trainer_resume_matches_uninterrupted(tmp_path: Path, half_life: float) -> None:
    """The real loop Trainer on real MovieLens: epoch 2 after a restore equals epoch 2 straight on,
    the weight average (ema.half_life_epochs) and what evaluation reads of it included."""
    from hydra import compose, initialize_config_dir

    from t4bench.benchmarks.ncf.model import NCFBenchmark
    from t4bench.progress import ProgressReporter
    from t4bench.pytorch.context import RunContext
    from t4bench.pytorch.trainer import Trainer
    from t4bench.spec import RunSpec, build_spec

    repo = Path(__file__).resolve().parents[1]
    data_root = Path(os.environ.get("T4BENCH_DATA_DIR", repo / "data")).resolve()
    if not (data_root / "movielens-100k" / "ml-100k.inter").is_file():
        pytest.skip("movielens-100k not prepared")

    def composed(half: float) -> RunSpec:
        """The run spec, as the runner hands it to the benchmark and its Trainer."""
        overrides = [f"paths.data_root={data_root}", "model.batch_size=8192", f"ema.half_life_epochs={half}"]
        with initialize_config_dir(config_dir=str(repo / "conf"), version_base="1.3"):
            return build_spec(compose("config", overrides=overrides))

    cfg = composed(half_life)
    ctx = RunContext(
        device=torch.device("cpu"), precision="fp32", rank=0, world_size=1, local_rank=0, seed=3, data_root=data_root
    )

    def fresh() -> Trainer:
        _seed_all(3)
        return Trainer(NCFBenchmark(cfg, ctx), cfg, ctx)

    def epoch(trainer: Trainer, number: int) -> dict[str, float]:
        return trainer.train_steps(
            iter(trainer.bench.train_batches(number)), 10**9, ProgressReporter("off"), "samples/s"
        )

    straight = fresh()
    epoch(straight, 1)
    path = checkpoint.save_trainer(tmp_path / "epoch-0001.pt", straight, epoch=1, loop={"train_time_s": 2.0})
    expected = epoch(straight, 2)["train_loss"]

    resumed = fresh()
    loop = checkpoint.restore_trainer(checkpoint.read(path), resumed)
    assert loop["epoch"] == 1 and loop["train_time_s"] == 2.0
    assert (resumed.steps, resumed.samples_seen) == (
        straight.steps - len(straight.bench.train_batches(2)),
        loop["samples_seen"],
    )
    assert epoch(resumed, 2)["train_loss"] == expected
    for got, want in zip(resumed.model.state_dict().values(), straight.model.state_dict().values(), strict=True):
        assert torch.equal(got, want)
    assert (resumed.average is None) == (straight.average is None) == (half_life == 0)
    if straight.average is not None and resumed.average is not None:
        assert resumed.average.updates == straight.average.updates
        for got, want in zip(
            resumed.average.module.state_dict().values(), straight.average.module.state_dict().values(), strict=True
        ):
            assert torch.equal(got, want)
        assert resumed.evaluate() == straight.evaluate()
    # a checkpoint resumed into a run that averages differently: refused in one line
    cfg = composed(0.5 if half_life == 0 else 0.0)
    other = fresh()
    with pytest.raises(checkpoint.CheckpointError, match=r"weight average .* \(ema.half_life_epochs\)"):
        checkpoint.restore_trainer(checkpoint.read(path), other)


def _run_cfg(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {
            "model": {"name": "ncf", "batch_size": 256},
            "scale": {"name": "mini"},
            "seed": 3,
            "hw": {"count": 1},
            "resume": None,
            "tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
        }
    )
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value)
    return cfg


def test_resume_refuses_another_setup_and_reopens_the_run(tmp_path: Path) -> None:
    from t4bench.pytorch import resume

    cfg = _run_cfg(tmp_path)
    assert resume.find(cfg) is None
    client = mlflow_client(str(cfg.tracking.uri), new_store=True)
    experiment = client.create_experiment("resume", artifact_location=(tmp_path / "art").as_uri())
    run_id = client.create_run(experiment).info.run_id
    model, _, _ = _setup()
    folder = tmp_path / "ckpt"
    checkpoint.save(checkpoint.path_for(folder, 2), model=model, loop={"epoch": 2}, meta=resume.meta_for(cfg, run_id))
    client.set_tag(run_id, checkpoint.FOLDER_TAG, str(folder))
    client.set_terminated(run_id, status="KILLED")

    point = resume.find(_run_cfg(tmp_path, resume=run_id))
    assert point is not None and point.run_id == run_id and point.epoch == 2
    with pytest.raises(CheckpointError) as caught:
        resume.find(_run_cfg(tmp_path, resume=str(folder), seed=4))
    assert str(caught.value) == (
        f"resume={folder}: {folder / 'epoch-0002.pt'} was written by a run with seed=3; this one has seed=4"
    )
    resume.reopen(client, run_id, point.epoch)
    run = client.get_run(run_id)
    assert run.info.status == "RUNNING" and run.data.tags[resume.RESUMED_TAG] == "2"
    client.set_terminated(run_id)
