"""Vision benchmarks end to end through `python -m t4bench`: each mini run converges on the CPU and
leaves the full MLflow contract; reference scale refuses to start without its dataset; synthetic
mode trains the reference-size model on generated tensors and logs throughput only."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import DATA_ROOT, all_runs, only_run

from t4bench.tracking.tags import run_tags

VISION = ("resnet50", "ssd", "maskrcnn")
#: the README's MLflow contract
CONTRACT_TAGS = (
    "t4bench.model",
    "t4bench.hw",
    "t4bench.hw_count",
    "t4bench.scale",
    "t4bench.data",
    "t4bench.framework",
    "t4bench.seed",
    "t4bench.throughput_unit",
    "t4bench.outcome",
    "t4bench.world_size",
    "t4bench.global_batch_size",
    "t4bench.version.torch",
    "t4bench.version.torchvision",
    "mlflow.source.git.commit",
)
EPOCH_METRICS = ("eval_quality", "train_loss", "epoch_time_s", "train_time_s", "throughput", "lr")
SUMMARY_METRICS = (
    "epochs_to_converge",
    "epochs_run",
    "time_to_train_s",
    "converged",
    "avg_throughput",
    "global_batch_size",
)
#: the first key of each mini target (eval_quality) and every metric the run must log
MINI_METRICS = {"resnet50": ("top1",), "ssd": ("box_map",), "maskrcnn": ("box_map", "mask_map")}
#: where each reference config looks for its dataset, and a word its error must name
REFERENCE_DATA = {
    "resnet50": ("T4BENCH_IMAGENET_DIR", "train/<class>"),
    "ssd": ("T4BENCH_COCO_DIR", "instances_train2017.json"),
    "maskrcnn": ("T4BENCH_COCO_DIR", "instances_train2017.json"),
}
#: reference architecture facts the synthetic run must have used (logged params)
REFERENCE_PARAMS = {
    "resnet50": {"model.arch.backbone.layers": "[3, 4, 6, 3]", "model.data.image_size": "224"},
    "ssd": {"model.arch.backbone.layers": "[3, 4, 6]", "model.arch.image_size": "300"},
    "maskrcnn": {"model.arch.backbone.layers": "[3, 4, 6, 3]", "model.data.synthetic_image_size": "[800, 1333]"},
}

#: the smallest batch each reference model trains on (SSD's 1x1 extra map needs 2 for batch norm);
#: Mask R-CNN at 800x1333 is by far the slowest CPU step, so it gets one image
SYNTHETIC_BATCH = {"resnet50": 2, "ssd": 2, "maskrcnn": 1}

needs_mini_data = pytest.mark.skipif(
    not (DATA_ROOT / "fashion-coco" / ".complete.json").is_file()
    or not (DATA_ROOT / "fashion-mnist-folder" / ".complete.json").is_file(),
    reason="vision mini data missing: run `python -m t4bench.data.prepare`",
)


@pytest.mark.slow
@needs_mini_data
@pytest.mark.parametrize("model", VISION)
def test_mini_converges_with_the_full_contract(model, vision_minis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # conftest's run, shared with the MLPerf compliance test
    shared = vision_minis(model)
    proc, mlflow_client = shared.proc, shared.client()
    run = only_run(mlflow_client, f"t4bench-{model}")
    assert run.info.status == "FINISHED"
    # the model is left out of a name too long for the Run Name column (the experiment names it)
    assert run.info.run_name == {"ssd": "ssd-mini-cpux1-s1"}.get(model, "mini-cpux1-s1")
    tags = run_tags(mlflow_client, run)
    for tag in CONTRACT_TAGS:
        assert tag in tags, tag
    assert tags["t4bench.outcome"] == "converged", proc.stdout[-2000:]
    assert tags["t4bench.data"] == "real" and tags["t4bench.scale"] == "mini"
    metrics = run.data.metrics
    for metric in SUMMARY_METRICS:
        assert metric in metrics, metric
    epochs = int(metrics["epochs_to_converge"])
    assert metrics["converged"] == 1.0 and metrics["epochs_run"] == epochs
    names = [f"eval_{name}" for name in MINI_METRICS[model]]
    for metric in (*EPOCH_METRICS, *names):
        history = mlflow_client.get_metric_history(run.info.run_id, metric)
        assert [point.step for point in history] == list(range(1, epochs + 1)), metric
    target = {name: float(run.data.params[f"model.target.{name}"]) for name in MINI_METRICS[model]}
    final = {name: metrics[f"eval_{name}"] for name in target}
    assert all(final[name] >= target[name] for name in target), (final, target)
    assert metrics["eval_quality"] == final[MINI_METRICS[model][0]]
    # stopped at the first epoch where every target metric was met
    histories = {
        name: [p.value for p in mlflow_client.get_metric_history(run.info.run_id, f"eval_{name}")] for name in target
    }
    for epoch in range(epochs - 1):
        assert not all(histories[name][epoch] >= target[name] for name in target)
    artifacts = {a.path for a in mlflow_client.list_artifacts(run.info.run_id)}
    assert {"resolved_config.yaml", "mlperf.log"} <= artifacts
    mllog = Path(mlflow_client.download_artifacts(run.info.run_id, "mlperf.log", str(tmp_path))).read_text()
    assert '"key": "eval_accuracy"' in mllog and '"status": "success"' in mllog.splitlines()[-1]


@pytest.mark.parametrize("model", VISION)
def test_reference_without_dataset_fails_fast_with_one_line(model, run_t4bench, mlflow_client, tmp_path: Path) -> None:
    variable, expected = REFERENCE_DATA[model]
    proc = run_t4bench(f"model={model}", "scale=reference", check=False, env={variable: str(tmp_path / "nowhere")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("t4bench: error:") and expected in lines[0], lines[0]
    assert str(tmp_path / "nowhere") in lines[0]
    assert all_runs(mlflow_client, f"t4bench-{model}") == []


@pytest.mark.parametrize("model", VISION)
def test_synthetic_mode_trains_the_reference_model(model, run_t4bench, mlflow_client, tmp_path: Path) -> None:
    # no dataset anywhere: synthetic mode must not look for one
    nowhere = str(tmp_path / "nowhere")
    run_t4bench(
        f"model={model}",
        "input=synthetic",
        "hw=cpu",
        "input.steps=1",
        "input.warmup_steps=0",
        f"model.batch_size={SYNTHETIC_BATCH[model]}",
        env={"T4BENCH_DATA_DIR": nowhere, "T4BENCH_IMAGENET_DIR": nowhere, "T4BENCH_COCO_DIR": nowhere},
    )
    run = only_run(mlflow_client, f"t4bench-{model}")
    assert run.info.status == "FINISHED"
    tags, metrics, params = run.data.tags, run.data.metrics, run.data.params
    assert tags["t4bench.outcome"] == "throughput_only"
    assert tags["t4bench.data"] == "synthetic" and tags["t4bench.scale"] == "reference"
    assert tags["t4bench.throughput_unit"] == "samples/s"
    for key, value in REFERENCE_PARAMS[model].items():
        assert params[key] == value, key
    assert metrics["throughput"] > 0 and metrics["avg_throughput"] == metrics["throughput"]
    assert math.isfinite(metrics["train_loss"])
    assert "eval_quality" not in metrics
