"""Horovod backend (issue 5): a 2-rank gloo run under `horovodrun` leaves one MLflow run, and the
loop's fp16 step reduces gradients before the GradScaler unscales them.
CI builds Horovod with scripts/build_horovod.sh (setup.sh --all); without it the run tests skip.

Run as a script (`horovodrun -np 2 --gloo python tests/test_horovod.py fp16-step OUT`), this file
is the per-rank side of `test_fp16_step_averages_unscaled_gradients`.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, all_runs, run_context

from t4bench.tracking.tags import run_tags

FAST = ("max_epochs=1", "model.batch_size=4096", "progress=plain")
#: the fp16 step check: learning rate, loss scale, per-rank batch
LR, LOSS_SCALE, BATCH = 0.1, 256.0, 8


def _horovod_importable() -> bool:
    try:
        import horovod.torch  # noqa: F401
    except ImportError:
        return False
    return True


def _horovodrun() -> str:
    if not _horovod_importable() or shutil.which("horovodrun") is None:
        pytest.skip("horovod.torch not importable: build it with scripts/build_horovod.sh")
    return str(shutil.which("horovodrun"))


def test_selecting_horovod_without_it_says_how_to_install(run_t4bench) -> None:  # type: ignore[no-untyped-def]
    if importlib.util.find_spec("horovod") is not None and _horovod_importable():
        pytest.skip("horovod is installed here; the missing-horovod message cannot show")
    proc = run_t4bench("dist=horovod", *FAST, check=False)
    assert proc.returncode == 2
    assert "scripts/build_horovod.sh" in proc.stderr.splitlines()[-1]


@pytest.mark.slow
def test_horovodrun_two_gloo_ranks_give_one_run(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    # `python <horovodrun script> -np 2 --gloo python -m t4bench <overrides>`
    run_t4bench(
        "dist=horovod",
        "hw=cpu",
        *FAST,
        module=(_horovodrun(), "-np", "2", "--gloo", sys.executable, "-m", "t4bench"),
    )
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    assert run.info.status == "FINISHED"
    tags = run_tags(mlflow_client, run)
    assert tags["t4bench.dist_backend"] == "horovod/horovod"
    assert tags["t4bench.launcher"] == "horovodrun"
    assert tags["t4bench.world_size"] == "2"
    assert run.data.metrics["global_batch_size"] == 8192


# --------------------------------------------------------------------------------------------
# fp16 + GradScaler through hvd.DistributedOptimizer: the real loop.Trainer.step on 2 ranks


def _rank_batch(rank: int) -> tuple[Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(100 + rank)
    x = torch.rand(BATCH, 4, generator=generator) - 0.5
    return x, torch.zeros(BATCH, 1)


class _Regression:
    """A 4 -> 1 linear regression with a squared loss: its exact gradient is known."""

    name = "regression"
    throughput_unit = "samples/s"
    train_size = BATCH * 2

    def build_model(self) -> Any:
        import torch

        model = torch.nn.Linear(4, 1, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.tensor([[0.5, -0.25, 1.0, 0.75]]))
        return model

    def param_groups(self, model: Any) -> Any:
        return model.parameters()

    def loss(self, model: Any, batch: Any) -> tuple[Any, int]:
        x, y = batch
        return ((model(x).float() - y) ** 2).mean(), len(x)

    def samples_in(self, batch: Any) -> int:
        return len(batch[0])


def _fp16_step_rank(out_dir: Path) -> None:
    """On each rank: one Trainer.step in fp16 with SGD; write the weights before and after, and
    the weights plain SGD on the ranks' averaged fp32 gradient would give."""
    import torch
    from omegaconf import OmegaConf

    from t4bench import run_env
    from t4bench.pytorch import distributed, launch
    from t4bench.pytorch.trainer import Trainer
    from t4bench.spec import build_spec

    cfg = OmegaConf.create(
        {
            # fp16 compression: Horovod writes the reduced gradient back at synchronize(), so a scaler
            # that unscales before it would step on the still-scaled average (deterministically)
            "dist": {"backend": "horovod", "compression": "fp16"},
            "hw": {"name": "cpu", "count": 1},
            "model": {
                "batch_size": BATCH,
                "optimizer": {"name": "sgd", "lr": LR, "lr_scaling": "none"},
                "schedule": {
                    "unit": "samples",
                    "kind": "constant",
                    "warmup_epochs": 0,
                    "decay_epochs": [],
                    "decay_factor": 1.0,
                    "ref_batch_size": BATCH,
                },
            },
        }
    )
    launch.init_process_group(cfg, run_env.resolve(build_spec(cfg)))
    rank, world = distributed.rank(), distributed.world_size()
    ctx = run_context(precision="fp16", rank=rank, world_size=world)
    bench = _Regression()
    trainer = Trainer(bench, cfg, ctx)  # type: ignore[arg-type]
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=LOSS_SCALE)
    before = trainer.model.weight.detach().clone()
    trainer.step(_rank_batch(rank))
    grads = []
    for other in range(world):
        reference = bench.build_model()
        bench.loss(reference, _rank_batch(other))[0].backward()
        grads.append(reference.weight.grad)
    expected = before - LR * torch.stack(grads).mean(0)
    (out_dir / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "before": before.tolist(),
                "after": trainer.model.weight.detach().tolist(),
                "expected": expected.tolist(),
                "horovod_optimizer": hasattr(trainer.optimizer, "synchronize"),
            }
        )
    )
    distributed.shutdown()


@pytest.mark.slow
def test_fp16_step_averages_unscaled_gradients(tmp_path: Path) -> None:
    import subprocess

    import torch

    cmd = [_horovodrun(), "-np", "2", "--gloo", sys.executable, str(Path(__file__)), "fp16-step", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(r["horovod_optimizer"] for r in ranks)  # hvd.DistributedOptimizer, not the bare SGD
    after = [torch.tensor(r["after"]) for r in ranks]
    assert torch.equal(after[0], after[1]), "replicas diverged after one step"
    before, expected = torch.tensor(ranks[0]["before"]), torch.tensor(ranks[0]["expected"])
    assert not torch.equal(after[0], before), "the step was skipped (inf/nan gradients?)"
    # fp16 forward: ~1e-3 relative; reducing scaled gradients after unscaling would be 256x off
    torch.testing.assert_close(after[0], expected, rtol=0, atol=2e-3)


if __name__ == "__main__" and sys.argv[1:2] == ["fp16-step"]:
    _fp16_step_rank(Path(sys.argv[2]))
