"""The Hydra app's surface: composition, --help, --cfg job without heavy imports, Hydra's errors."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, compose


def t4bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_defaults_are_mini_ncf_on_cpu() -> None:
    cfg = compose()
    assert cfg.model.name == "ncf"
    assert cfg.hw.name == "cpu" and cfg.hw.count == 1
    assert cfg.scale.name == "mini" and cfg.data.synthetic is False
    assert cfg.tracking.experiment == "t4bench-ncf"


def test_reference_scale_swaps_in_mlperf_sizes() -> None:
    cfg = compose(["scale=reference"])
    assert list(cfg.model.arch.mlp_layers) == [256, 256, 128, 64]
    assert cfg.model.data.eval_negatives == 999
    assert cfg.model.target.hr_at_10 == 0.635


def test_synthetic_data_implies_reference_scale() -> None:
    cfg = compose(["data=synthetic"])
    assert cfg.scale.name == "reference" and cfg.data.synthetic is True
    assert cfg.model.arch.gmf_factors == 64


def test_cfg_job_does_not_import_torch() -> None:
    proc = t4bench("-X", "importtime", "-m", "t4bench", "--cfg", "job", "seed=7")
    assert proc.returncode == 0, proc.stderr
    assert "seed: 7" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "mlflow" not in imported and "tensorflow" not in imported


def test_help_lists_config_groups() -> None:
    proc = t4bench("-m", "t4bench", "--help")
    assert proc.returncode == 0
    for group in ("model:", "hw:", "scale:", "data:"):
        assert group in proc.stdout


def test_unknown_model_lists_the_choices() -> None:
    proc = t4bench("-m", "t4bench", "model=nope")
    assert proc.returncode != 0
    assert "Could not find 'model/nope'" in proc.stderr
    assert "\tncf" in proc.stderr


def test_scales_a_model_defines() -> None:
    from t4bench import preflight

    assert preflight.available_scales("ncf") == ["mini", "reference"]
    assert preflight.available_scales("gnmt") == ["mini", "ding", "reference"]
    preflight.check_scale(compose(["model=transformer", "scale=ding"]))
    preflight.check_scale(compose(["data=synthetic"]))  # synthetic implies reference


def test_a_scale_the_model_lacks_fails_before_anything_starts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Hydra drops the missing optional conf/model_scale/ncf_ding.yaml silently: it would run mini
    db = tmp_path / "mlflow.db"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "t4bench", "model=ncf", "scale=ding", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{db}"},
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
