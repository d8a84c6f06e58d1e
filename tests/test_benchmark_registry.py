"""The benchmark folders (issue 51 item 2): every conf/model/<name>.yaml has its folder, each folder
says its MLPerf names, metrics and typed `model:` section, and the class conf names lives there."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from t4bench.benchmarks import registry
from t4bench.mlperf import accuracy_value, mlperf_name, ruleset
from t4bench.preflight.config import known_keys
from t4bench.spec import section

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"


def test_every_model_config_has_its_folder() -> None:
    assert registry.names() == tuple(sorted(path.stem for path in CONF.glob("*.yaml")))
    assert registry.find("shared_seq2seq") is None and registry.find("nope") is None


@pytest.mark.parametrize("name", registry.names())
def test_the_folder_holds_the_benchmark_conf_names(name: str) -> None:
    about = registry.find(name)
    assert about is not None and about.name == name
    benchmark = yaml.safe_load((CONF / f"{name}.yaml").read_text())["benchmark"]
    assert benchmark.startswith(f"t4bench.benchmarks.{name}."), benchmark
    target = yaml.safe_load((CONF / f"{name}.yaml").read_text())["target"]
    assert all(about.metric(metric) is not None for metric in target), (name, target)
    keys = {key for key, _ in section.rules(about.config)}
    assert {"model.batch_size", "model.optimizer.lr", "model.schedule.kind"} <= keys <= known_keys()


def test_mlperf_names_rulesets_and_accuracy_come_from_the_folders() -> None:
    names = {name: mlperf_name(name) for name in registry.names()}
    assert names["resnet50"] == "resnet" and names["ncf"] == "ncf" and mlperf_name("mine") == "mine"
    assert [ruleset(names[n]) for n in ("resnet50", "ssd", "maskrcnn", "gnmt", "transformer", "ncf")] == [
        "4.0.0",
        "4.1.0",
        "3.1.0",
        "0.7.0",
        "0.7.0",
        None,
    ]
    assert accuracy_value("gnmt", {"bleu": 25.0}) == 0.25
    assert accuracy_value("maskrcnn", {"box_map": 0.3, "mask_map": 0.2}) == {"BBOX": 0.3, "SEGM": 0.2}
    assert accuracy_value("ssd", {"box_map": 0.3}) == 0.3


def test_build_reads_the_declared_keys_into_a_frozen_section() -> None:
    about = registry.find("ncf")
    assert about is not None
    node = yaml.safe_load((CONF / "ncf.yaml").read_text())
    node["schedule"]["ref_batch_size"] = 256  # an interpolation in the YAML
    node["data"]["path"] = "/data/movielens-100k"
    spec = section.build(about.config, node)
    assert spec.data.train_negatives == 4 and spec.optimizer.name == "adam" and spec.arch.init_std == 0.01
    with pytest.raises(AttributeError):
        spec.batch_size = 1  # type: ignore[misc]
