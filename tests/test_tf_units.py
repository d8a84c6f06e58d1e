"""The TensorFlow backend's parts against their PyTorch counterparts: the Keras ResNet's sizes and
v1.5 strides against torchvision's / the PyTorch mini, sharding against torch's DistributedSampler,
the polynomial schedule, the tf.data pipeline on a real ImageFolder tree, and the one-line errors
of framework=tensorflow.

In-process, torch and torchvision load before TensorFlow (the other order segfaults), and
TensorFlow loads only when these tests run, not when pytest collects this file: the suite's other
modules would otherwise import torch after it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

# everything of torch's side (torchvision pulls in torch._dynamo) loads before TensorFlow: the
# other order segfaults
import torch
from omegaconf import OmegaConf
from torch.utils.data import DistributedSampler
from torchvision.models import resnet50

from t4bench import run_env
from t4bench import schedule as torch_schedules
from t4bench.benchmarks.shared_resnet.parts import ResNetClassifier, trunk_from_cfg
from t4bench.errors import DatasetMissingError, RanksFailed, T4BenchError
from t4bench.run_env import RunEnvironment
from t4bench.tf import launch as tf_launch
from t4bench.tf import schedule as tf_schedules
from t4bench.tf.rank import settings_for
from tests import tf_launch_helpers
from tests.conftest import CONF_DIR, REPO, run_cli


@pytest.fixture(scope="module")
def tf():  # type: ignore[no-untyped-def]
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def resnet(tf):  # type: ignore[no-untyped-def]
    from t4bench.tf import resnet

    return resnet


@pytest.fixture(scope="module")
def data(tf):  # type: ignore[no-untyped-def]
    from t4bench.tf import data

    return data


def _trainable(model) -> int:  # type: ignore[no-untyped-def]
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def test_reference_resnet50_has_torchvisions_parameter_count(resnet) -> None:  # type: ignore[no-untyped-def]
    arch = OmegaConf.load(CONF_DIR / "model_scale" / "resnet50_reference.yaml").arch
    keras_model = resnet.build_resnet(
        224, int(arch.num_classes), list(arch.backbone.layers), list(arch.backbone.widths), list(arch.backbone.strides)
    )
    assert _trainable(keras_model) == sum(p.numel() for p in resnet50().parameters())  # 25,557,032


def test_mini_matches_the_pytorch_mini_and_strides_on_the_3x3(resnet) -> None:  # type: ignore[no-untyped-def]
    model_cfg = OmegaConf.load(CONF_DIR / "model" / "resnet50.yaml")
    keras_model = resnet.build_from_config(model_cfg, bn_momentum=0.9)
    torch_model = ResNetClassifier(trunk_from_cfg(model_cfg.arch.backbone), int(model_cfg.arch.num_classes))
    assert _trainable(keras_model) == sum(p.numel() for p in torch_model.parameters())
    # v1.5: a downsampling block strides in its 3x3 convolution, its first 1x1 keeps stride 1
    block = "stage2_block1"
    assert keras_model.get_layer(f"{block}_conv2").strides == (2, 2)
    assert keras_model.get_layer(f"{block}_conv1").strides == (1, 1)
    # the same feature map sizes as torchvision's Bottleneck trunk on a 28x28 input
    torch_out = torch_model.trunk(torch.zeros(1, 3, 28, 28)).shape
    keras_out = keras_model.get_layer("stage3_block1_out").output.shape
    assert (keras_out[1], keras_out[2], keras_out[3]) == (torch_out[2], torch_out[3], torch_out[1])


def test_batch_norm_parameters_are_not_decayed(resnet) -> None:  # type: ignore[no-untyped-def]
    model = resnet.build_resnet(28, 10, [1], [4], [1], stem="small", stem_width=4)
    decayed = [v.path for v, decay in zip(model.trainable_variables, resnet.decay_mask(model), strict=True) if decay]
    assert decayed and all(path.endswith("kernel") for path in decayed)
    assert not any("bn" in path for path in decayed)


@pytest.mark.parametrize(("size", "world"), [(10, 3), (12, 4), (7, 2), (5, 1)])
def test_sharding_is_torchs_distributed_sampler(data, size: int, world: int) -> None:  # type: ignore[no-untyped-def]
    counted = np.zeros(size)
    for rank in range(world):
        indices, weights = data.shard_indices(size, rank, world)
        sampler = DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=False)
        assert indices.tolist() == list(sampler)
        np.add.at(counted, indices, weights)
    assert counted.tolist() == [1.0] * size  # padding repeats carry weight 0: every item counts once


def test_polynomial_schedule_warms_up_then_decays_to_zero() -> None:
    cfg = OmegaConf.create(
        {
            "unit": "samples",
            "kind": "polynomial",
            "warmup_epochs": 1.0,
            "power": 2.0,
            "ref_batch_size": 10,
            "decay_epochs": [],
            "decay_factor": 0.1,
        }
    )
    sched = tf_schedules.from_config(cfg, train_size=100, max_epochs=5)
    assert sched.factor(50, 0) == pytest.approx(0.5)  # half-way through the warm-up
    assert sched.factor(100, 0) == pytest.approx(1.0)
    assert sched.factor(300, 0) == pytest.approx(0.25)  # half-way through the decay: (1 - 1/2)^2
    assert sched.factor(500, 0) == 0.0 and sched.factor(700, 0) == 0.0
    with pytest.raises(ValueError, match="decay_end_epochs"):
        tf_schedules.from_config(OmegaConf.merge(cfg, {"decay_end_epochs": 1.0}), 100, 5)


def test_other_schedule_kinds_are_the_pytorch_paths() -> None:
    cfg = OmegaConf.load(CONF_DIR / "model" / "resnet50.yaml").schedule
    cfg.ref_batch_size = 128
    ours, theirs = tf_schedules.from_config(cfg, 8000, 6), torch_schedules.from_config(cfg, 8000)
    assert [ours.factor(s, 0) for s in range(0, 48000, 1000)] == [theirs.factor(s, 0) for s in range(0, 48000, 1000)]


def _image_folder(tf, root: Path, per_class: int = 3) -> Path:  # type: ignore[no-untyped-def]
    """train/ and val/ with two classes of 8x8 PNGs whose pixels encode (class, index)."""
    for split in ("train", "val"):
        for label, name in enumerate(("b_second", "a_first")):
            folder = root / split / name
            folder.mkdir(parents=True)
            for index in range(per_class):
                pixels = np.full((8, 8, 3), 40 * (1 - label) + 10 * index, np.uint8)
                (folder / f"{index}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    return root


def test_image_folder_pipeline(tf, data, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = data.list_image_folder(_image_folder(tf, tmp_path) / "train")
    assert folder.classes == ["a_first", "b_second"]  # sorted, as torchvision's ImageFolder
    cfg = {"image_size": 8, "augment": "small", "crop_padding": 1, "mean": [0.5] * 3, "std": [0.25] * 3}
    cached, streamed = data.ImagePipeline(folder, cfg, True), data.ImagePipeline(folder, cfg, False)

    def batches(pipeline, epoch: int, rank: int = 0, world: int = 1) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
        return [b[0].numpy() for b in pipeline.train(4, seed=3, epoch=epoch, replicas=[rank], world=world)]

    first = batches(cached, 1)
    assert [b.shape for b in first] == [(4, 8, 8, 3), (2, 8, 8, 3)]
    assert all(np.array_equal(a, b) for a, b in zip(first, batches(cached, 1), strict=True))  # repeatable
    assert all(np.array_equal(a, b) for a, b in zip(first, batches(streamed, 1), strict=True))  # cache = files
    assert not np.array_equal(first[0], batches(cached, 2)[0])  # another epoch, another order / crops
    labels = [int(label) for rank in (0, 1) for b in cached.train(8, 3, 1, [rank], 2) for label in b[1].numpy()]
    assert sorted(labels) == [0, 0, 0, 1, 1, 1]  # two ranks: disjoint halves of the epoch
    val = data.ImagePipeline(data.list_image_folder(tmp_path / "val"), cfg, False)
    weights = [float(w) for rank in (0, 1, 2, 3) for b in val.evaluation(5, [rank], 4) for w in b[2].numpy()]
    assert len(weights) == 8 and sum(weights) == 6.0  # 6 images padded to 8, the padding weighs 0
    # two replicas in one worker (MirroredStrategy): batch k of replica 0, then of replica 1, equal
    # sizes down to the partial last step, each replica's batches those of its own shard
    both = [b[1].numpy().tolist() for b in cached.train(2, 3, 1, [0, 1], 2)]
    alone = [[b[1].numpy().tolist() for b in cached.train(2, 3, 1, [r], 2)] for r in (0, 1)]
    assert both == [alone[0][0], alone[1][0], alone[0][1], alone[1][1]]


def test_a_folder_without_images_is_one_clear_error(data, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "train" / "cls").mkdir(parents=True)
    with pytest.raises(DatasetMissingError, match="ImageFolder layout"):
        data.list_image_folder(tmp_path / "train")


def test_step_samples_cover_the_epoch_once(tf) -> None:  # type: ignore[no-untyped-def]
    from t4bench.tf.context import TFContext

    ctx = TFContext(tf.distribute.OneDeviceStrategy("/cpu:0"), "fp32", 0, 1, 0, Path("."))
    assert ctx.step_samples(300, 128) == [128, 128, 44]
    assert ctx.replicas == [0]


def test_settings_are_picked_per_scale() -> None:
    cfg = OmegaConf.create(
        {
            "scale": {"name": "mini"},
            "tensorflow": {
                "benchmarks": {"resnet50": "x"},
                "xla": True,
                "bn_momentum": {"mini": 0.9, "reference": 0.997},
            },
        }
    )
    assert settings_for(cfg) == {"xla": True, "bn_momentum": 0.9}
    cfg.scale.name = "ding"
    with pytest.raises(T4BenchError, match=r"tensorflow\.bn_momentum has no value for scale=ding"):
        settings_for(cfg)


def _spawned_env(world: int, device_kind: str = "cpu") -> RunEnvironment:
    return RunEnvironment(
        launcher=run_env.ELASTIC_LAUNCH,
        rank=0,
        world_size=world,
        local_rank=0,
        local_world_size=world,
        requested_count=world,
        spawn=True,
        hw=OmegaConf.create({"name": "cpu"}),
        device_kind=device_kind,
        threads=None,
        dist_backend="ddp",
        process_group="gloo",
    )


def test_launch_starts_workers_with_tf_config() -> None:
    result = tf_launch.spawn(OmegaConf.create({}), _spawned_env(2), tf_launch_helpers.report_rank, ())
    assert result["rank"] == "0" and result["world"] == "2" and result["index"] == 0
    assert len(result["workers"]) == 2 and len(set(result["workers"])) == 2  # two localhost ports


def test_launch_names_the_failed_rank_and_stops_the_others() -> None:
    started = time.monotonic()
    with pytest.raises(RanksFailed, match=r"rank 1 \(exit code 2\): t4bench: error: rank one broke"):
        tf_launch.spawn(OmegaConf.create({}), _spawned_env(2), tf_launch_helpers.fail_on_rank_one, ())
    assert time.monotonic() - started < 100  # rank 0 (sleeping 120 s) was stopped, not waited for


def test_gpu_ranks_run_in_this_process() -> None:
    # MirroredStrategy drives every GPU from one process: the rank runs here, as rank 0 of 2
    assert tf_launch.spawn(OmegaConf.create({}), _spawned_env(2, "cuda"), os.environ.get, ("RANK",)) == "0"
    assert "RANK" not in os.environ or os.environ["RANK"] != "0"


def _t4bench(*overrides: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*overrides, store=tmp_path, cwd=REPO, timeout=300)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model=ncf"], "no-keras-benchmark-for-model-ncf"),
        (["model=resnet50", "dist=horovod"], "Horovod's TensorFlow binding"),
    ],
)
def test_what_tensorflow_cannot_run_fails_in_one_line(overrides: list[str], message: str, tmp_path: Path) -> None:
    proc = _t4bench(*overrides, "framework=tensorflow", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("t4bench: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_several_replicas_in_one_process(tmp_path: Path) -> None:
    # the GPU path (MirroredStrategy over a host's devices) on two logical CPUs, in its own
    # process: logical devices must be set before TensorFlow starts
    proc = run_cli(str(tmp_path), module="tests.tf_mirrored_check", cwd=REPO, env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["replicas"] == 2 and facts["global_batch"] == 8
    assert facts["step_samples"] == [8, 8, 4] and facts["samples_seen"] == 20  # 20 images, no empty replica batch
    assert facts["copies_equal"]  # weights and batch-norm statistics identical on both devices
    assert facts["train_loss"] > 0 and 0 <= facts["top1"] <= 1
