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
    # every value the preset sets is the one the run gets (a key that config.yaml's own keys, which
    # compose last, would set again is not)
    own = OmegaConf.load(preset)
    own.pop("hparams")
    for key, value in _leaves(OmegaConf.to_container(own)).items():
        assert _plain(OmegaConf.select(tuned, key)) == value, f"{preset.name}: {key}={value} does not reach the config"
    validation.validate(tuned)


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"a.b": leaf} of a nested dict (an empty dict is a leaf)."""
    if not (isinstance(tree, dict) and tree):
        return {prefix: tree}
    found: dict[str, Any] = {}
    for name, sub in tree.items():
        found.update(_leaves(sub, f"{prefix}.{name}" if prefix else str(name)))
    return found


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


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
        0.0081637, rel=1e-4
    )
    assert params["ema.half_life_epochs"] == "0.25"
    assert run.info.status == "FINISHED"
