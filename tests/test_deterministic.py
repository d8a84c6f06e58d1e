"""`deterministic=true` (t4bench.seeding, t4bench.pytorch.determinism): the switch reaches the
rank (its tag is read back from torch there), two runs of one seed repeat each other bit for bit,
perf.cudnn_benchmark=true is refused in one line, and an op without a deterministic kernel ends
the run with one line naming it. CPU only: GPU runs are where the switch matters, and its cost
there is measured by scripts/gpu/same_seed.sh."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import DATA_ROOT, compose, run_cli

from t4bench import seeding
from t4bench.errors import T4BenchError
from t4bench.pytorch import determinism as torch_determinism
from t4bench.spec import build_spec
from t4bench.tracking import names

#: a GNMT mini small enough for two runs in ~10 s on one CPU thread (short sentences, 16 units)
TINY_GNMT = (
    "model=gnmt",
    "max_epochs=1",
    "progress=plain",
    "model.data.max_len=10",
    "model.arch.hidden=16",
    "model.data.eval_max_sentences=16",
    "model.batch_size=64",
)


@pytest.fixture
def switches_restored():  # type: ignore[no-untyped-def]
    """torch's switches are process-wide: put back as they were after the test."""
    before = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.backends.cudnn.deterministic = before[1]


def test_two_runs_of_one_seed_repeat_each_other_and_are_tagged(tmp_path: Path) -> None:
    # the sanctioned way to repeat one seed in a --multirun: a user tag that changes no training
    proc = run_cli(
        "--multirun", *TINY_GNMT, "deterministic=true", "seed=3", "+tracking.tags.repeat=0,1", store=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    from t4bench.tracking.tags import run_tags

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("t4bench-gnmt")
    runs = [r for r in client.search_runs([experiment.experiment_id]) if names.SWEEP_ROLE not in r.data.tags]
    assert sorted(r.data.tags.get("repeat") for r in runs) == ["0", "1"]
    # written by the rank from torch.are_deterministic_algorithms_enabled() and cuDNN's switch
    assert [run_tags(client, r)[names.DETERMINISTIC] for r in runs] == ["true", "true"]
    assert {r.data.params["deterministic"] for r in runs} == {"True"}
    final = [(r.data.metrics[names.TRAIN_LOSS], r.data.metrics["eval_bleu"]) for r in runs]
    assert final[0] == final[1] and final[0][0] > 0, final  # bit for bit: ==, not approx


def test_cudnn_autotuning_with_deterministic_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_cli("model=ncf", "deterministic=true", "perf.cudnn_benchmark=true", store=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "deterministic=true and perf.cudnn_benchmark=true" in lines[0], lines
    assert not (tmp_path / "mlflow.db").exists()  # refused before any store or run exists
    # a perf profile's per-model entry counts too; deterministic=false leaves it alone
    profile = ["deterministic=true", "+perf.models.ncf.cudnn_benchmark=true"]
    with pytest.raises(T4BenchError, match=r"perf\.cudnn_benchmark=true"):
        seeding.check_deterministic(build_spec(compose(profile)))
    seeding.check_deterministic(build_spec(compose(["+perf.models.ncf.cudnn_benchmark=true"])))


@pytest.mark.usefixtures("switches_restored")
def test_the_tag_is_false_by_default_whatever_ran_before_in_the_process() -> None:
    from t4bench.preflight import hardware
    from t4bench.pytorch.rank import TorchRank

    cfg = compose(["model=gnmt", f"paths.data_root={DATA_ROOT}"])  # no Hydra job to resolve its default
    assert cfg.deterministic is False
    torch_determinism.apply(True)  # a deterministic job ran earlier in this process (basic multirun)
    spec = build_spec(cfg)
    tags = TorchRank(spec, hardware.check(spec)).tags()
    assert tags[names.DETERMINISTIC] == "false" and not torch.are_deterministic_algorithms_enabled()


@pytest.mark.usefixtures("switches_restored")
def test_an_op_without_a_deterministic_kernel_ends_the_run_in_one_line() -> None:
    torch_determinism.apply(True)
    assert torch_determinism.active() and not torch.backends.cudnn.benchmark
    # put_ without accumulate has no deterministic implementation, on the CPU too: torch's real error
    with pytest.raises(T4BenchError) as err, torch_determinism.explained():
        torch.zeros(3).put_(torch.tensor([0]), torch.tensor([1.0]))
    line = str(err.value)
    assert line.startswith("deterministic=true: put_ has no deterministic CUDA implementation") and "\n" not in line
    with pytest.raises(RuntimeError, match="other"), torch_determinism.explained():
        raise RuntimeError("other")  # any other error passes through as it was


def test_the_environment_is_prepared_before_cuda_starts() -> None:
    environ: dict[str, str] = {}
    seeding.deterministic_environment(compose(["deterministic=true"]).deterministic, environ)
    assert environ == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "TORCHINDUCTOR_DETERMINISTIC": "1"}
    kept = {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}  # the smaller deterministic workspace is left as set
    seeding.deterministic_environment(compose(["deterministic=true"]).deterministic, kept)
    assert kept["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    untouched: dict[str, str] = {}
    seeding.deterministic_environment(compose().deterministic, untouched)
    assert untouched == {}
