"""NCF mini end to end on the real MovieLens-100k data: the MLflow contract and how runs end."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path
from typing import Any

import conftest
import pytest
from conftest import all_runs, start_cli

from t4bench.tracking import names
from t4bench.tracking.tags import file_tags, run_tags

EXPERIMENT = "t4bench-ncf"
CONTRACT_TAGS = (
    "t4bench.model",
    "t4bench.hw",
    "t4bench.hw_count",
    "t4bench.scale",
    "t4bench.framework",
    "t4bench.outcome",
    "t4bench.throughput_unit",
    "t4bench.version.torch",
    "t4bench.version.mlflow",
)
EPOCH_METRICS = ("eval_quality", "train_loss", "epoch_time_s", "throughput")
SUMMARY_METRICS = ("epochs_to_converge", "time_to_train_s", "run_train_s", "run_wall_s", "converged", "avg_throughput")


def only_run(client):  # type: ignore[no-untyped-def]
    runs = all_runs(client, EXPERIMENT)
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def test_default_run_converges_with_the_full_contract(run_t4bench, mlflow_client, tmp_path: Path) -> None:
    proc = run_t4bench("model=ncf", "hw=cpu", "seed=3")
    assert "converged" in proc.stdout and "time_to_train_s" in proc.stdout
    run = only_run(mlflow_client)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "ncf-mini-cpux1-s3"
    tags = run_tags(mlflow_client, run)
    for tag in CONTRACT_TAGS:
        assert tag in tags, tag
    # at most 20 tags on the run (the ones a person compares); every other t4bench tag is in
    # the one run_tags.json, none in both; the heartbeat's liveness tags were moved there at the end
    on_run, in_file = run.data.tags, file_tags(mlflow_client, run.info.run_id)
    assert len(on_run) <= 20, sorted(on_run)
    assert {k for k in on_run if k.startswith("t4bench.")} <= names.RUN_TAGS
    assert not set(in_file) & set(on_run) and all(k.startswith("t4bench.") for k in in_file)
    assert {"t4bench.version.torch", "t4bench.perf.precision", "t4bench.world_size", "t4bench.heartbeat"} <= set(
        in_file
    )
    assert sum(a.path == names.RUN_TAGS_FILE for a in mlflow_client.list_artifacts(run.info.run_id)) == 1
    assert tags["t4bench.outcome"] == "converged"
    assert tags["t4bench.throughput_unit"] == "samples/s"
    params = run.data.params
    assert params["seed"] == "3" and params["hw.name"] == "cpu"
    assert params["model.optimizer.lr"] == "0.001"
    assert params["model.target.hr_at_10"] == "0.66"
    for metric in SUMMARY_METRICS:
        assert metric in run.data.metrics, metric
    epochs = int(run.data.metrics["epochs_to_converge"])
    assert run.data.metrics["converged"] == 1.0
    for metric in EPOCH_METRICS:
        history = mlflow_client.get_metric_history(run.info.run_id, metric)
        assert [point.step for point in history] == list(range(1, epochs + 1)), metric
    # default cadence: one evaluation per epoch, at its end
    epoch_values = [p.value for p in mlflow_client.get_metric_history(run.info.run_id, "epoch")]
    assert epoch_values == [float(e) for e in range(1, epochs + 1)]
    assert run.data.metrics["epochs_to_converge"] == float(epochs)
    quality = [p.value for p in mlflow_client.get_metric_history(run.info.run_id, "eval_quality")]
    # stopped at the first epoch that reached the target, not later
    assert quality[-1] >= 0.66 and all(q < 0.66 for q in quality[:-1])
    artifacts = {a.path for a in mlflow_client.list_artifacts(run.info.run_id)}
    assert {"resolved_config.yaml", "mlperf.log"} <= artifacts
    mllog = Path(mlflow_client.download_artifacts(run.info.run_id, "mlperf.log", str(tmp_path))).read_text()
    keys = [line.split('"key": "')[1].split('"')[0] for line in mllog.splitlines() if ":::MLLOG" in line]
    for key in (
        "init_start",
        "init_stop",
        "run_start",
        "epoch_start",
        "eval_accuracy",
        "run_stop",
        "seed",
        "global_batch_size",
        "train_samples",
        "submission_benchmark",
    ):
        assert key in keys, key
    assert '"status": "success"' in mllog.splitlines()[-1]


@pytest.fixture(scope="module")
def seed11_twice(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One store with two identical runs: seed 11, two epochs, a target the mini never reaches."""
    from mlflow.tracking import MlflowClient

    store = tmp_path_factory.mktemp("seed11")
    for _ in range(2):
        proc = conftest.run_cli("seed=11", "max_epochs=2", "model.target.hr_at_10=0.99", store=store)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return MlflowClient(f"sqlite:///{store / 'mlflow.db'}")


def test_same_seed_same_metrics(seed11_twice) -> None:  # type: ignore[no-untyped-def]
    mlflow_client = seed11_twice
    runs = all_runs(mlflow_client, EXPERIMENT)
    histories = [[p.value for p in mlflow_client.get_metric_history(r.info.run_id, "eval_quality")] for r in runs]
    assert len(histories) == 2 and len(histories[0]) == 2
    assert histories[0] == histories[1]
    losses = [r.data.metrics["train_loss"] for r in runs]
    assert losses[0] == losses[1]


def test_target_not_reached_is_not_converged(seed11_twice) -> None:  # type: ignore[no-untyped-def]
    # the runs above: max_epochs ran out before the target
    runs = all_runs(seed11_twice, EXPERIMENT)
    assert len(runs) == 2
    for run in runs:
        assert run.info.status == "FINISHED"
        assert run.data.tags["t4bench.outcome"] == "not_converged"
        assert run.data.metrics["converged"] == 0.0
        assert "epochs_to_converge" not in run.data.metrics and "time_to_train_s" not in run.data.metrics


def test_exception_ends_the_run_failed(run_t4bench, mlflow_client) -> None:
    proc = run_t4bench(
        "+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch",
        "+callbacks.fail.epoch=1",
        "model.target.hr_at_10=0.99",
        check=False,
    )
    assert proc.returncode != 0
    assert "InjectedFault" in proc.stderr
    run = only_run(mlflow_client)
    assert run.info.status == "FAILED"
    assert run.data.tags["t4bench.outcome"] == "failed"


def test_sigterm_ends_the_run_killed(tmp_path: Path, mlflow_client) -> None:
    # returned once training is under way
    proc = start_cli("model.target.hr_at_10=0.99", "max_epochs=50", store=tmp_path, until="epoch")
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, output
    run = only_run(mlflow_client)
    assert run.info.status == "KILLED"
    assert run.data.tags["t4bench.outcome"] == "killed"


def test_reference_without_dataset_fails_fast_with_one_line(run_t4bench, mlflow_client, tmp_path: Path) -> None:
    proc = run_t4bench("scale=reference", check=False, env={"T4BENCH_ML20M_DIR": str(tmp_path / "nowhere")})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("t4bench: error:") and "ratings.csv" in lines[0]
    assert all_runs(mlflow_client, EXPERIMENT) == []


def test_synthetic_mode_logs_throughput_only(run_t4bench, mlflow_client) -> None:
    run_t4bench("input=synthetic", "input.steps=3", "input.warmup_steps=1", "model.batch_size=8192")
    run = only_run(mlflow_client)
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.outcome"] == "throughput_only"
    assert run.data.tags["t4bench.data"] == "synthetic"
    assert run.data.params["model.arch.gmf_factors"] == "64"
    assert run.data.metrics["throughput"] > 0
    assert "eval_quality" not in run.data.metrics


def metric_values(client: Any, run_id: str, key: str) -> list[float]:
    """A metric's history in step order."""
    return [p.value for p in sorted(client.get_metric_history(run_id, key), key=lambda p: p.step)]


def quarter_epoch_run(shared_runs: conftest.SharedRuns, seed: int) -> conftest.SharedRun:
    """The mini to target with a quarter-epoch cadence (seed 3 is read by both tests below)."""
    return shared_runs.get("model=ncf", "hw=cpu", f"seed={seed}", "eval_every=0.25")


def test_eval_every_quarter_evaluates_four_times_an_epoch(shared_runs: conftest.SharedRuns, tmp_path: Path) -> None:
    mlflow_client = quarter_epoch_run(shared_runs, 3).client()
    run = only_run(mlflow_client)
    assert run.data.tags["t4bench.outcome"] == "converged"
    history = mlflow_client.get_metric_history(run.info.run_id, "epoch")
    evaluations = len(history)
    assert [p.step for p in history] == list(range(1, evaluations + 1))
    # the fraction of the epoch's batches done: a quarter up to rounding to whole batches
    assert [p.value for p in history] == pytest.approx([0.25 * i for i in range(1, evaluations + 1)], abs=1e-3)
    assert evaluations >= 4 and history[3].value == 1.0  # the fourth is at the epoch's end
    converged_at = run.data.metrics["epochs_to_converge"]
    assert converged_at == history[-1].value
    quality = [p.value for p in mlflow_client.get_metric_history(run.info.run_id, "eval_quality")]
    assert len(quality) == evaluations and quality[-1] >= 0.66 and all(q < 0.66 for q in quality[:-1])
    # MLPerf log: one eval_accuracy per evaluation, epoch_num fractional within an epoch
    mllog = Path(mlflow_client.download_artifacts(run.info.run_id, "mlperf.log", str(tmp_path))).read_text()
    accuracy = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in mllog.splitlines() if '"eval_accuracy"' in line]
    assert [a["metadata"]["epoch_num"] for a in accuracy][:4] == pytest.approx([0.25, 0.5, 0.75, 1], abs=1e-3)
    assert len(accuracy) == evaluations
    assert run.data.metrics["epochs_run"] == converged_at


def test_eval_every_stops_at_the_first_evaluation_that_meets_the_target(shared_runs: conftest.SharedRuns) -> None:
    """With a quarter-epoch cadence epochs_to_converge is the first evaluation that meets the
    target, on the quarter-epoch grid, and the run stops there. Whether that falls inside an epoch
    depends on the seed's data order (seeds 3 and 4 both met it at 4.0 on 2026-12-05's CI machine),
    so the test follows the evaluations instead of expecting a fraction."""
    for seed in (3, 4):
        client = quarter_epoch_run(shared_runs, seed).client()
        run = only_run(client)
        epochs = metric_values(client, run.info.run_id, "epoch")
        quality = metric_values(client, run.info.run_id, "eval_quality")
        first = next(i for i, q in enumerate(quality) if q >= 0.66)
        converged_at = run.data.metrics["epochs_to_converge"]
        assert converged_at == pytest.approx(epochs[first], abs=1e-6), (seed, epochs, quality)
        assert abs(converged_at * 4 - round(converged_at * 4)) < 4e-3, converged_at
        assert len(quality) == first + 1, (seed, quality)  # no evaluation after the target was met


def test_eval_every_converges_inside_an_epoch_at_a_target_met_there(shared_runs: conftest.SharedRuns) -> None:
    """A target first met inside an epoch gives a fractional epochs_to_converge, and the run stops
    there. The target is taken from seed 3's own quarter-epoch run (the last quality record it set
    inside an epoch), so the test does not hang on which seed happens to converge mid-epoch on the
    machine at hand; the rerun with the same seed repeats the same evaluations up to that point."""
    client = quarter_epoch_run(shared_runs, 3).client()
    run = only_run(client)
    epochs = metric_values(client, run.info.run_id, "epoch")
    quality = metric_values(client, run.info.run_id, "eval_quality")
    inside = [
        i
        for i in range(len(quality))
        if abs(epochs[i] - round(epochs[i])) > 0.1 and all(q < quality[i] for q in quality[:i])
    ]
    assert inside, (epochs, quality)  # at least the first evaluation, at a quarter epoch, is a record
    at = inside[-1]
    target = f"model.target.hr_at_10={quality[at]!r}"
    client = shared_runs.get("model=ncf", "hw=cpu", "seed=3", "eval_every=0.25", target).client()
    run = only_run(client)
    again = metric_values(client, run.info.run_id, "eval_quality")
    assert again == quality[: at + 1], "the same seed evaluated differently: the rerun is not comparable"
    assert run.data.tags["t4bench.outcome"] == "converged"
    assert run.data.metrics["epochs_to_converge"] == pytest.approx(epochs[at], abs=1e-6)
    assert run.data.metrics["epochs_to_converge"] % 1 > 0.1  # inside an epoch
    assert run.data.metrics["epochs_run"] == pytest.approx(epochs[at], abs=1e-6)


def test_absurd_lr_ends_diverged_in_training(run_t4bench, mlflow_client) -> None:
    proc = run_t4bench("model.optimizer.lr=1e6", "max_epochs=2")
    run = only_run(mlflow_client)
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.outcome"] == "diverged"
    assert "diverged" in proc.stdout
    assert "epochs_to_converge" not in run.data.metrics and "time_to_train_s" not in run.data.metrics
    assert run.data.metrics["epochs_run"] < 1  # stopped within the first epoch, not at max_epochs


def test_absurd_lr_ends_diverged_in_throughput_mode(run_t4bench, mlflow_client) -> None:
    run_t4bench(
        "input=synthetic", "input.steps=3", "input.warmup_steps=1", "model.batch_size=8192", "model.optimizer.lr=1e6"
    )
    run = only_run(mlflow_client)
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.outcome"] == "diverged"
    # no throughput from a diverged run
    assert math.isnan(run.data.metrics["avg_throughput"])
    assert "throughput" not in run.data.metrics
