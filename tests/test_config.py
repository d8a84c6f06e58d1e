"""The Hydra app's surface: composition, --help, --cfg job without heavy imports, Hydra's errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CONF_DIR, REPO, compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from t4bench.preflight import hardware as preflight

MODELS = sorted(path.stem for path in (CONF_DIR / "model").glob("*.yaml"))
HW_PROFILES = sorted(path.stem for path in (CONF_DIR / "hw").glob("*.yaml"))
MODEL_SCALES = [(model, scale) for model in MODELS for scale in preflight.available_scales(model)]


def t4bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_defaults_are_mini_ncf_on_cpu() -> None:
    cfg = compose()
    assert cfg.model.name == "ncf"
    assert cfg.hw.name == "cpu" and cfg.hw.count == 1
    assert cfg.scale.name == "mini" and cfg.input.synthetic is False
    assert cfg.tracking.experiment == "t4bench-ncf"


def test_reference_scale_swaps_in_mlperf_sizes() -> None:
    cfg = compose(["scale=reference"])
    assert list(cfg.model.arch.mlp_layers) == [256, 256, 128, 64]
    assert cfg.model.data.eval_negatives == 999
    assert cfg.model.target.hr_at_10 == 0.635


def test_synthetic_input_implies_reference_scale() -> None:
    cfg = compose(["input=synthetic", "input.steps=3"])
    assert cfg.scale.name == "reference" and cfg.input.synthetic is True and cfg.input.steps == 3
    assert cfg.model.arch.gmf_factors == 64


def test_cfg_job_does_not_import_torch() -> None:
    proc = t4bench("-X", "importtime", "-m", "t4bench", "--cfg", "job", "seed=7")
    assert proc.returncode == 0, proc.stderr
    assert "seed: 7" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "mlflow" not in imported and "tensorflow" not in imported


def test_help_lists_config_groups() -> None:
    """`python -m t4bench --help` is t4bench's page: every group's choices, read from conf/ (Hydra's
    own page is `--hydra-help`)."""
    proc = t4bench("-m", "t4bench", "--help")
    assert proc.returncode == 0
    for group in ("model=", "hw=", "scale=", "input=", "framework="):
        assert group in proc.stdout
    models = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))
    assert ", ".join(models) in proc.stdout


def test_unknown_model_lists_the_choices() -> None:
    proc = t4bench("-m", "t4bench", "model=nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "t4bench: error: model=nope: no such option; choose one of gnmt, maskrcnn, ncf, resnet50, ssd, transformer"
    )


def test_scales_a_model_defines() -> None:
    from t4bench.preflight import hardware as preflight

    assert preflight.available_scales("ncf") == ["mini", "reference"]
    assert preflight.available_scales("gnmt") == ["mini", "ding", "reference"]
    preflight.check_scale(compose(["model=transformer", "scale=ding"]))
    preflight.check_scale(compose(["input=synthetic"]))  # synthetic implies reference


def test_a_scale_the_model_lacks_fails_before_anything_starts(tmp_path: Path) -> None:
    # Hydra drops the missing optional conf/model_scale/ncf_ding.yaml silently: it would run mini
    db = tmp_path / "mlflow.db"
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "t4bench",
            "model=ncf",
            "scale=ding",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{db}"},
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("import time:")]
    assert lines == [
        "t4bench: error: scale=ding is not defined for model=ncf (no conf/model_scale/ncf_ding.yaml); "
        "scales for ncf: mini, reference"
    ]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "mlflow" not in imported
    assert not db.exists()  # no MLflow store, let alone a run


def resolved(overrides: list[str]) -> dict[str, Any]:
    """The composed config for `overrides` with every interpolation resolved (the `hydra` node
    left out: its sweep keys only resolve inside a multirun)."""
    cfg = compose(overrides)
    HydraConfig.instance().set_config(cfg)  # ${hydra:runtime.cwd} in paths and tracking
    with open_dict(cfg):
        del cfg["hydra"]
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert isinstance(container, dict)
    return {str(key): value for key, value in container.items()}


@pytest.mark.parametrize(("model", "scale"), MODEL_SCALES)
def test_every_model_scale_and_hw_profile_composes(model: str, scale: str) -> None:
    for hw in HW_PROFILES:
        cfg = resolved([f"model={model}", f"scale={scale}", f"hw={hw}"])
        assert cfg["input"] == {"synthetic": False}
        assert cfg["model"]["name"] == model and cfg["scale"]["name"] == scale and cfg["hw"]["name"] == hw
        assert cfg["model"]["target"], "a run needs a quality target"
        assert all(isinstance(value, float) for value in cfg["model"]["target"].values()), cfg["model"]["target"]
        assert cfg["max_epochs"] == cfg["model"]["max_epochs"] > 0


@pytest.mark.parametrize("model", MODELS)
def test_every_model_composes_for_synthetic_input(model: str) -> None:
    cfg = resolved([f"model={model}", "input=synthetic"])
    assert cfg["scale"]["name"] == "reference" and cfg["input"]["synthetic"] is True
    assert cfg["input"]["steps"] >= 1 and cfg["input"]["warmup_steps"] >= 0


def test_every_hw_profile_gets_the_shared_run_settings() -> None:
    shared = OmegaConf.load(CONF_DIR / "hw" / "run" / "default.yaml")
    assert isinstance(shared, DictConfig)
    for hw in HW_PROFILES:
        cfg = compose([f"hw={hw}"])
        for key in map(str, shared.keys()):
            assert cfg.hw[key] == shared[key], f"hw={hw}: {key}"
    # a profile's own keys win over the shared ones, and the command line over both
    assert compose(["hw=cpu"]).hw.loader_workers == 0 and compose(["hw=h200"]).hw.loader_workers == 8
    assert compose(["hw=h200", "hw.count=4", "hw.telemetry.interval_s=5"]).hw.telemetry.interval_s == 5
    assert compose(["hw=h200", "hw.count=4"]).hw.count == 4


def test_scales_say_where_their_datasets_come_from() -> None:
    for path in (CONF_DIR / "scale").glob("*.yaml"):
        scale = OmegaConf.load(path)
        assert scale.name == path.stem
        assert scale.datasets in ("prepare", "external"), path


@pytest.mark.parametrize(
    ("model", "v0_5", "v0_6"),
    [
        ("resnet50", {"top1": 0.749}, {"top1": 0.759}),
        ("ssd", {"box_map": 0.212}, {"box_map": 0.23}),
        ("maskrcnn", {"box_map": 0.377, "mask_map": 0.339}, {"box_map": 0.377, "mask_map": 0.339}),
        ("gnmt", {"bleu": 21.8}, {"bleu": 24.0}),
        ("ncf", {"hr_at_10": 0.635}, {"hr_at_10": 0.635}),
        ("transformer", {"bleu": 25.0}, {"bleu": 25.0}),
    ],
)
def test_one_knob_picks_the_mlperf_round_of_every_reference_target(
    model: str, v0_5: dict[str, float], v0_6: dict[str, float]
) -> None:
    assert resolved([f"model={model}", "scale=reference"])["model"]["target"] == v0_5
    assert resolved([f"model={model}", "scale=reference", "scale.target_version=v0_6"])["model"]["target"] == v0_6
    # one metric can still be set by hand
    metric = next(iter(v0_5))
    assert (
        resolved([f"model={model}", "scale=reference", f"model.target.{metric}=0.5"])["model"]["target"][metric] == 0.5
    )


def test_max_epochs_defaults_to_the_models_and_overrides_it() -> None:
    assert compose(["model=gnmt"]).max_epochs == compose(["model=gnmt"]).model.max_epochs == 40
    assert compose(["model=gnmt", "scale=reference"]).max_epochs == 8
    assert compose(["model=gnmt", "max_epochs=3"]).max_epochs == 3
