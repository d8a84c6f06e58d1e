"""GNMT and Transformer through `python -m t4bench`: mini runs to the BLEU target with the MLflow
contract, the reference scale's missing-data error, synthetic reference-size throughput."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA_ROOT, all_runs, compose, only_run

from t4bench.tracking.tags import run_tags

MINI_TARGET = {"gnmt": 60.0, "transformer": 45.0}
CONTRACT_TAGS = (
    "t4bench.model",
    "t4bench.hw",
    "t4bench.scale",
    "t4bench.outcome",
    "t4bench.seed",
    "t4bench.throughput_unit",
    "t4bench.global_batch_size",
    "t4bench.version.torch",
)
EPOCH_METRICS = ("eval_quality", "eval_bleu", "train_loss", "throughput", "train_time_s", "epoch_time_s", "lr")
# one thread per run (the synthetic case; the mini runs are conftest's, with one thread each)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def target_tokens_per_epoch(model: str) -> int:
    """Target tokens (with EOS) in one mini epoch: what the throughput unit counts."""
    from t4bench.benchmarks.shared_seq2seq.parts import Tokenizer

    cfg = compose([f"model={model}", f"paths.data_root={DATA_ROOT}"])
    directory, max_len = Path(cfg.model.data.path), int(cfg.model.data.max_len)
    tokenizer = Tokenizer(directory / "spm.model")
    sources = tokenizer.encode((directory / "train.src").read_text(encoding="utf-8").splitlines())
    targets = tokenizer.encode((directory / "train.tgt").read_text(encoding="utf-8").splitlines())
    return sum(len(t) + 1 for s, t in zip(sources, targets, strict=True) if 0 < len(s) <= max_len and len(t) <= max_len)


@pytest.mark.slow
def test_mini_gnmt_and_transformer_reach_their_bleu_targets(translation_minis) -> None:  # type: ignore[no-untyped-def]
    """Both mini models with their shipped configs, side by side (one core each), to the target
    (conftest's runs, shared with the MLPerf compliance test)."""
    from mlflow.tracking import MlflowClient

    uris = {model: translation_minis[model].uri for model in MINI_TARGET}
    procs = {model: translation_minis[model].proc for model in MINI_TARGET}

    for model, target in MINI_TARGET.items():
        assert "converged" in procs[model].stdout, procs[model].stdout[-2000:]
        client = MlflowClient(uris[model])
        run = only_run(client, f"t4bench-{model}")
        assert run.info.status == "FINISHED" and run.info.run_name == "mini-cpux1-s0"
        tags, metrics, params = run_tags(client, run), run.data.metrics, run.data.params
        for tag in CONTRACT_TAGS:
            assert tag in tags, (model, tag)
        assert tags["t4bench.outcome"] == "converged" and tags["t4bench.throughput_unit"] == "tokens/s"
        assert params["model.target.bleu"] == str(target)
        assert params["model.data.dataset"] == "translation-mini"
        epochs = int(metrics["epochs_to_converge"])
        assert metrics["converged"] == 1.0 and metrics["epochs_run"] == epochs
        assert metrics["time_to_train_s"] > 0 and metrics["avg_throughput"] > 0
        history = {name: client.get_metric_history(run.info.run_id, name) for name in EPOCH_METRICS}
        for name, points in history.items():
            assert [p.step for p in points] == list(range(1, epochs + 1)), (model, name)
        bleu = [p.value for p in history["eval_bleu"]]
        assert [p.value for p in history["eval_quality"]] == bleu
        # stopped at the first epoch at the target, which is far above copying the source (~0.6)
        assert bleu[-1] >= target and all(b < target for b in bleu[:-1]), (model, bleu)
        # throughput counts the target tokens (with EOS) of the epoch
        first = {name: points[0].value for name, points in history.items()}
        assert first["throughput"] * first["train_time_s"] == pytest.approx(target_tokens_per_epoch(model), rel=1e-6)
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"resolved_config.yaml", "mlperf.log"} <= artifacts


@pytest.mark.parametrize(("model", "variable"), [("gnmt", "T4BENCH_WMT16_DIR"), ("transformer", "T4BENCH_WMT17_DIR")])
def test_reference_scale_without_wmt_fails_before_any_run(
    run_t4bench, mlflow_client, tmp_path: Path, model: str, variable: str
) -> None:
    nowhere = tmp_path / "nowhere"
    proc = run_t4bench(f"model={model}", "scale=reference", check=False, env={variable: str(nowhere)})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"t4bench: error: {model} reference needs wmt")
    for name in ("train.src", "train.tgt", "test.src", "test.tgt", "spm.model"):
        assert str(nowhere / name) in lines[0]
    assert variable in lines[0]
    assert all_runs(mlflow_client, f"t4bench-{model}") == []


@pytest.mark.parametrize(
    ("model", "width_param", "tokens"),
    [("gnmt", "model.arch.hidden", 2 * 50), ("transformer", "model.arch.d_model", 2 * 32)],
)
def test_synthetic_mode_runs_the_reference_size_model(
    run_t4bench, mlflow_client, model: str, width_param: str, tokens: int
) -> None:
    run_t4bench(
        f"model={model}",
        "input=synthetic",
        "input.steps=1",
        "input.warmup_steps=0",
        "model.batch_size=2",
        env=ONE_THREAD,
    )
    run = all_runs(mlflow_client, f"t4bench-{model}")[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.outcome"] == "throughput_only"
    assert run.data.tags["t4bench.scale"] == "reference"
    assert run.data.params[width_param] == "1024"
    metrics = run.data.metrics
    # one step of 2 sentences: the synthetic target length in tokens per sentence
    assert metrics["throughput"] * metrics["train_time_s"] == pytest.approx(tokens, rel=1e-6)
    assert "eval_quality" not in metrics


def test_scales_compose_their_data_and_targets() -> None:
    def config(*overrides: str):  # type: ignore[no-untyped-def]
        return compose([*overrides, "paths.data_root=/data"])

    ding = config("model=gnmt", "scale=ding")
    assert ding.model.data.path == "/data/translation/ding" and ding.model.target.bleu == 2.5
    assert config("model=transformer", "scale=ding").model.target.bleu == 4.5
    reference = config("model=gnmt", "scale=reference")
    assert reference.model.target.bleu == 21.8 and reference.model.schedule.unit == "steps"
    assert config("model=gnmt", "scale=reference", "scale.target_version=v0_6").model.target.bleu == 24.0
    assert config("model=transformer", "scale=reference").model.target.bleu == 25.0
    mini = config("model=gnmt")
    assert mini.model.target.bleu == MINI_TARGET["gnmt"] and mini.model.data.path == "/data/translation/mini"
