"""The hparams group: `hparams=reference` (default) is the benchmark's own settings, `hparams=tuned`
a sweep's preset (conf/model_hparams/<model>_<scale>_tuned.yaml) whose recorded reference values
must stay true, and a model/scale without a preset is refused rather than silently run as tuned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import CONF_DIR, all_runs, compose
from omegaconf import OmegaConf

from t4bench.errors import T4BenchError
from t4bench.preflight import config as validation

PRESETS = sorted((CONF_DIR / "model_hparams").glob("*_tuned.yaml"))


def _model_and_scale(preset: Path) -> tuple[str, str]:
    model, scale, _ = preset.stem.rsplit("_", 2)
    return model, scale


def test_presets_exist() -> None:
    assert [p.stem for p in PRESETS], "no tuned preset under conf/model_hparams"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_preset_records_true_reference_values_and_changes_them(preset: Path) -> None:
    model, scale = _model_and_scale(preset)
    reference = compose([f"model={model}", f"scale={scale}"])
    tuned = compose([f"model={model}", f"scale={scale}", "hparams=tuned"])
    assert reference.hparams.name == "reference" and reference.hparams.preset is None
    assert tuned.hparams.name == "tuned" and tuned.hparams.preset == preset.stem
    assert tuned.hparams.sweep and tuned.hparams.heldout  # where it came from and how it did
    recorded: dict[str, Any] = OmegaConf.to_container(tuned.hparams.reference_values)  # type: ignore[assignment]
    assert recorded
    changed = []
    for key, value in recorded.items():
        actual = OmegaConf.to_container(OmegaConf.create({"v": OmegaConf.select(reference, key)}))["v"]
        assert actual == value, f"{preset.name}: reference_values {key}={value}, but the reference config has {actual}"
        if OmegaConf.select(tuned, key) != OmegaConf.select(reference, key):
            changed.append(key)
    assert changed, f"{preset.name} changes none of the keys it records"
    validation.validate(tuned)


def test_tuned_without_a_preset_is_refused() -> None:
    cfg = compose(["model=gnmt", "hparams=tuned"])
    with pytest.raises(T4BenchError, match=r"^hparams=tuned: no tuned preset for model=gnmt scale=mini .*ncf_mini"):
        validation.validate(cfg)


def test_tuned_ncf_runs_and_is_recorded(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    run_t4bench("model=ncf", "hparams=tuned", "max_epochs=1", "progress=off")
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    params = run.data.params
    assert params["hparams.name"] == "tuned" and params["hparams.preset"] == "ncf_mini_tuned"
    assert params["model.batch_size"] == "512" and float(params["model.optimizer.lr"]) == pytest.approx(
        0.0086033, rel=1e-4
    )
    assert run.info.status == "FINISHED"
