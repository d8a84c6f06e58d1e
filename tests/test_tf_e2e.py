"""`framework=tensorflow` through the real `python -m t4bench`: the Keras ResNet mini reaches its
target with the PyTorch run's MLflow contract and an MLPerf log, never importing torch; two CPU
ranks (MultiWorkerMirroredStrategy) end with one MLflow run and identical weights; a seed multirun
and an Optuna sweep run unchanged. Each test trains in subprocesses (slow)."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from t4bench.tracking.tags import run_tags
from tests.conftest import all_runs, only_run

pytest.importorskip("tensorflow")  # the extra: pip install .[tensorflow]

pytestmark = pytest.mark.slow

TF = ("model=resnet50", "framework=tensorflow", "progress=plain")
EXPERIMENT = "t4bench-resnet50"
#: tags whose values (not names) differ between any two runs, and the per-framework version tags
# versions differ by framework; t4bench.perf.* are the PyTorch loop's speed options (torch.compile,
# CUDA graphs, ...), which the Keras loop does not have
_RUN_SPECIFIC = ("t4bench.version.", "t4bench.perf.")


def _torch_blocker(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A `torch` package first on PYTHONPATH that records being imported, then fails the import."""
    marker = tmp_path / "torch-was-imported"
    package = tmp_path / "blocker" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import pathlib, traceback\n"
        f"pathlib.Path({str(marker)!r}).write_text(''.join(traceback.format_stack()))\n"
        "raise ImportError('torch imported on the TensorFlow path')\n"
    )
    return {"PYTHONPATH": str(package.parent)}, marker


def _mllog(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG" in line]


def _contract(client, run) -> tuple[set[str], set[str]]:  # type: ignore[no-untyped-def]
    tags = {k for k in run_tags(client, run) if k.startswith("t4bench.") and not k.startswith(_RUN_SPECIFIC)}
    # time_to_train_s and epochs_to_converge exist on converged runs only (the one-epoch PyTorch
    # run below does not converge): the contract is every run's names
    return tags, set(run.data.metrics) - {"time_to_train_s", "epochs_to_converge"}


def test_keras_resnet_mini_reaches_the_target_without_torch(  # type: ignore[no-untyped-def]
    run_t4bench, mlflow_client, resnet50_one_epoch, tmp_path: Path
) -> None:
    blocker_env, marker = _torch_blocker(tmp_path)
    proc = run_t4bench(*TF, "seed=0", env={"OMP_NUM_THREADS": "1", **blocker_env})
    assert not marker.exists(), marker.read_text()
    run = only_run(mlflow_client, EXPERIMENT)
    assert run.info.status == "FINISHED", proc.stdout[-3000:]
    tags, metrics = run_tags(mlflow_client, run), run.data.metrics
    assert tags["t4bench.framework"] == "tensorflow" and tags["t4bench.outcome"] == "converged"
    assert tags["t4bench.version.tensorflow"] == version("tensorflow-cpu") and tags["t4bench.version.keras"]
    assert metrics["converged"] == 1.0 and metrics["eval_quality"] >= 0.80
    epochs = metrics["epochs_to_converge"]
    history = mlflow_client.get_metric_history(run.info.run_id, "eval_top1")
    assert len(history) == epochs and history[-1].value >= 0.80
    assert all(h.value < 0.80 for h in history[:-1])  # stopped at the first evaluation on target
    assert {a.path for a in mlflow_client.list_artifacts(run.info.run_id)} >= {"mlperf.log", "resolved_config.yaml"}
    log = _mllog(tmp_path / "run" / "mlperf.log")
    keys = [entry["key"] for entry in log]
    assert keys.index("init_stop") < keys.index("run_start") < keys.index("run_stop")
    assert [e["metadata"]["status"] for e in log if e["key"] == "run_stop"] == ["success"]
    assert [e["value"] for e in log if e["key"] == "eval_accuracy"][-1] == pytest.approx(metrics["eval_top1"])

    # the PyTorch ResNet's run (one epoch, one thread: conftest's, shared with the MLPerf compliance
    # test) carries the same tag and metric names
    torch_client = resnet50_one_epoch.client()
    torch_run = only_run(torch_client, EXPERIMENT)
    assert torch_run.data.tags["t4bench.framework"] == "pytorch"
    assert {"time_to_train_s", "epochs_to_converge"} <= set(run.data.metrics)  # the Keras run converged
    assert _contract(torch_client, torch_run) == _contract(mlflow_client, run)
    # params: the same config, plus the TensorFlow settings and the polynomial schedule's keys
    extra = set(run.data.params) - set(torch_run.data.params)
    assert set(torch_run.data.params) <= set(run.data.params)
    assert all(p.startswith(("tensorflow.", "model.schedule.")) for p in extra), extra


def test_synthetic_reference_size_with_xla_and_bf16(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # ResNet-50 at 224x224 on a batch of 2 (30 s of CPU): the throughput path, XLA and mixed bf16
    run_t4bench(
        *TF,
        "input=synthetic",
        "model.batch_size=2",
        "input.steps=2",
        "input.warmup_steps=1",
        "tensorflow.xla=true",
        "hw.precision=bf16",
        env={"OMP_NUM_THREADS": "1"},
    )
    run = only_run(mlflow_client, EXPERIMENT)
    assert run.data.tags["t4bench.outcome"] == "throughput_only" and run.data.tags["t4bench.scale"] == "reference"
    assert run_tags(mlflow_client, run)["t4bench.precision"] == "bf16" and run.data.params["tensorflow.xla"] == "True"
    assert run.data.metrics["avg_throughput"] > 0 and run.data.metrics["train_loss"] > 0
    log = _mllog(tmp_path / "run" / "mlperf.log")
    assert [e["metadata"]["status"] for e in log if e["key"] == "run_stop"] == ["aborted"]


def test_two_cpu_ranks_one_run_identical_weights(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker_env, marker = _torch_blocker(tmp_path)
    run_t4bench(*TF, "hw.count=2", "max_epochs=1", env={"OMP_NUM_THREADS": "1", **blocker_env})
    assert not marker.exists(), marker.read_text()
    run = only_run(mlflow_client, EXPERIMENT)
    assert run.info.status == "FINISHED"
    tags = run_tags(mlflow_client, run)
    assert tags["t4bench.world_size"] == "2" and tags["t4bench.global_batch_size"] == "256"
    assert "MultiWorkerMirroredStrategy" in tags["t4bench.dist_backend"]
    assert run.data.metrics["epochs_run"] == 1.0
    digests = [e["value"] for e in _mllog(tmp_path / "run" / "mlperf.log") if e["key"].endswith("sha256_per_worker")]
    assert len(digests) == 1 and len(digests[0]) == 2 and digests[0][0] == digests[0][1]


def test_seed_multirun_and_optuna_sweep_run_unchanged(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker_env, marker = _torch_blocker(tmp_path)
    env = {"OMP_NUM_THREADS": "1", **blocker_env}
    run_t4bench("--multirun", *TF, "max_epochs=1", "seed=0,1", env=env)
    runs = all_runs(mlflow_client, EXPERIMENT)
    parent = only_run_with(runs, "t4bench.sweep_role", "parent")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["t4bench.seed"] for r in children) == ["0", "1"]
    assert {r.data.tags["t4bench.framework"] for r in children} == {"tensorflow"}
    assert parent.info.status == "FINISHED" and parent.data.metrics["epochs_run_mean"] == 1.0

    sweep_dir = tmp_path / "optuna"
    run_t4bench(
        "--multirun",
        *TF,
        "max_epochs=1",
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.seeds_per_trial=1",
        "model.optimizer.lr=tag(log,interval(0.02,0.2))",
        f"hydra.sweep.dir={sweep_dir}",
        env=env,
    )
    # the sweeper's pruning callback loads in every trial: it must not pull torch in either
    assert not marker.exists(), marker.read_text()
    runs = all_runs(mlflow_client, EXPERIMENT)
    trials = {r.info.run_id for r in runs if r.data.tags.get("t4bench.sweep_role") == "trial"}
    training = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in trials]
    assert len(trials) == 2 and len(training) == 2
    assert {r.data.tags["t4bench.framework"] for r in training} == {"tensorflow"}
    assert len({r.data.params["model.optimizer.lr"] for r in training}) == 2
    assert all(r.info.status == "FINISHED" for r in runs)


def only_run_with(runs, tag: str, value: str):  # type: ignore[no-untyped-def]
    found = [r for r in runs if r.data.tags.get(tag) == value]
    assert len(found) == 1, [r.info.run_name for r in found]
    return found[0]
