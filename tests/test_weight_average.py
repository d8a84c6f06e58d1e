"""`ema.half_life_epochs`: evaluation reads an exponential moving average of the weights
(t4bench.pytorch.averaging); training itself is untouched."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import all_runs
from hydra import compose, initialize_config_dir

from t4bench.errors import T4BenchError
from t4bench.preflight import config as preflight
from t4bench.pytorch.averaging import WeightAverage, decay_per_step
from t4bench.spec import build_spec

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_decay_halves_the_old_weights_in_one_half_life() -> None:
    # 2 epochs of 1000 samples at batch 100 = 20 steps
    decay = decay_per_step(2.0, 1000, 100)
    assert decay**20 == pytest.approx(0.5)
    with pytest.raises(T4BenchError, match=r"ema.half_life_epochs=0: must be > 0"):
        decay_per_step(0.0, 1000, 100)
    with pytest.raises(T4BenchError, match=r"ema.half_life_epochs=1e\+20: too long to average anything"):
        decay_per_step(1e20, 1000, 100)


def test_average_follows_the_weights_with_that_decay() -> None:
    model = torch.nn.Linear(3, 1)
    torch.nn.init.constant_(model.weight, 4.0)
    average = WeightAverage(model, decay=0.9)
    average.update(model)  # the first update copies the weights
    assert torch.equal(average.module.weight, model.weight)
    with torch.no_grad():
        model.weight.fill_(0.0)
    for _ in range(5):
        average.update(model)
    # 4 -> 4 * 0.9**5: an EMA toward 0, the model's own weights left alone
    assert torch.allclose(average.module.weight, torch.full_like(model.weight, 4.0 * 0.9**5))
    assert torch.count_nonzero(model.weight) == 0
    restored = WeightAverage(torch.nn.Linear(3, 1), decay=0.9)
    restored.load_state_dict(average.state_dict())
    assert torch.equal(restored.module.weight, average.module.weight) and restored.updates == 6
    with pytest.raises(T4BenchError, match=r"decays by 0.90000000 a step, this run's by 0.80000000"):
        WeightAverage(torch.nn.Linear(3, 1), decay=0.8).load_state_dict(average.state_dict())


def test_batchnorm_statistics_are_averaged_and_its_counter_copied() -> None:
    model = torch.nn.BatchNorm1d(2)
    average = WeightAverage(model, decay=0.5)
    average.update(model)
    model.train()
    model(torch.tensor([[10.0, 0.0], [30.0, 0.0]]))  # running_mean 0 -> 0.1 * 20 = 2
    average.update(model)
    assert average.module.running_mean.tolist() == pytest.approx([1.0, 0.0])  # halfway to 2
    assert int(average.module.num_batches_tracked) == int(model.num_batches_tracked) == 1


def _compose(*overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["ema.half_life_epochs=-1"], "ema.half_life_epochs=-1: must be a finite number >= 0"),
        (
            ["max_epochs=3", "ema.half_life_epochs=4"],
            "ema.half_life_epochs=4: longer than the run (max_epochs=3); "
            "the average would hardly move from the first weights",
        ),
        (
            ["model=resnet50", "framework=tensorflow", "ema.half_life_epochs=0.25"],
            "ema.half_life_epochs=0.25: only framework=pytorch has it; "
            "framework=tensorflow needs ema.half_life_epochs=0",
        ),
    ],
)
def test_preflight_refuses_in_one_line(overrides: list[str], message: str) -> None:
    cfg = _compose(*overrides)
    with pytest.raises(T4BenchError) as caught:
        preflight.validate(cfg)
    assert str(caught.value) == message


def test_off_by_default_and_tensorflow_accepts_off() -> None:
    assert _compose().ema.half_life_epochs == 0
    preflight.check_framework_options(build_spec(_compose("model=resnet50", "framework=tensorflow")))


def test_throughput_runs_build_no_average() -> None:
    model = torch.nn.Linear(3, 1)
    assert WeightAverage.from_config(_compose("ema.half_life_epochs=0.5"), model, 1000, 100) is not None
    assert WeightAverage.from_config(_compose("ema.half_life_epochs=0.5", "input=synthetic"), model, 1000, 100) is None


def _history(client, run, key: str) -> list[float]:  # type: ignore[no-untyped-def]
    return [m.value for m in sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)]


def test_cli_run_evaluates_the_average_and_trains_the_same(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    """Same seed, EMA off vs on: the same training losses (training is untouched), other
    evaluations (the averaged weights are evaluated), and the setting in the run's params."""
    common = ("model=ncf", "hw=cpu", "seed=5", "max_epochs=1", "eval_every=0.5", "model.target.hr_at_10=0.99")
    run_t4bench(*common, "tracking.run_name=plain")
    run_t4bench(*common, "ema.half_life_epochs=0.25", "tracking.run_name=averaged")
    runs = {r.info.run_name: r for r in all_runs(mlflow_client, "t4bench-ncf")}
    plain, averaged = runs["plain"], runs["averaged"]
    assert averaged.data.params["ema.half_life_epochs"] == "0.25"
    assert plain.data.params["ema.half_life_epochs"] == "0.0"
    assert _history(mlflow_client, plain, "train_loss") == _history(mlflow_client, averaged, "train_loss")
    plain_hr = _history(mlflow_client, plain, "eval_hr_at_10")
    averaged_hr = _history(mlflow_client, averaged, "eval_hr_at_10")
    assert len(plain_hr) == len(averaged_hr) == 2
    assert all(math.isfinite(v) and 0 < v < 1 for v in plain_hr + averaged_hr)
    assert plain_hr != averaged_hr
