"""Hardware profiles, `hw=auto` and the fail-fast check (issue 5).

Unit tests feed `check` a detection result (`Found`) for machines this host is not; the
end-to-end tests run the real `python -m t4bench` on this host (CPU only here, H200 on the GPU
machine: see scripts/gpu_checks.sh).
"""

from __future__ import annotations

import pytest
from conftest import all_runs
from omegaconf import DictConfig

from t4bench import hardware
from t4bench.errors import T4BenchError
from t4bench.spec import HwSpec
from t4bench.spec.section import build
from t4bench.tracking.tags import run_tags

FAST = ("max_epochs=1", "model.batch_size=4096", "progress=plain")
GPU_PROFILES = ("t4", "v100-pcie", "v100-sxm2", "a100", "h100", "h200")


def profile_node(name: str, **hw: object) -> DictConfig:
    node = hardware.load_profile(name)
    for key, value in hw.items():
        node[key] = value
    return node


def profile(name: str, **hw: object) -> HwSpec:
    """The profile as the run spec holds it (`hw:` of a composed config)."""
    return build(HwSpec, profile_node(name, **hw), "hw.")


def test_every_profile_has_the_report_facts() -> None:
    assert set(hardware.profile_names()) >= {*GPU_PROFILES, "cpu"}
    for name in (*GPU_PROFILES, "cpu", "auto"):
        profile = hardware.load_profile(name)
        for key in ("name", "count", "precision", "strict", "loader_workers", "telemetry"):
            assert key in profile, f"{name}.yaml lacks {key}"
        if name in GPU_PROFILES:
            for key in ("memory_gb", "memory_bandwidth_gbs", "tdp_w", "interconnect", "nvml_name", "label"):
                assert profile[key], f"{name}.yaml: {key} is empty"
            assert profile.peak_tflops.fp32 and profile.peak_tflops.fp16


@pytest.mark.parametrize(
    ("profile", "precision"),
    [
        ("t4", "fp16"),
        ("v100-pcie", "fp16"),
        ("v100-sxm2", "fp16"),
        ("a100", "bf16"),
        ("h100", "bf16"),
        ("h200", "bf16"),
        ("cpu", "fp32"),
    ],
)
def test_default_precision(profile: str, precision: str) -> None:
    assert hardware.load_profile(profile).precision == precision


@pytest.mark.parametrize(
    ("nvml_name", "profile"),
    [
        ("Tesla T4", "t4"),
        ("Tesla V100-PCIE-16GB", "v100-pcie"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
    ],
)
def test_auto_picks_the_profile_for_the_nvml_name(nvml_name: str, profile: str) -> None:
    assert hardware.profile_for(hardware.Found((nvml_name,), "nvml")) == profile


def test_auto_is_cpu_without_a_gpu_and_unknown_gpus_fail() -> None:
    assert hardware.profile_for(hardware.Found((), "none")) == "cpu"
    with pytest.raises(T4BenchError, match="Quadro T400"):
        hardware.profile_for(hardware.Found(("Quadro T400",), "nvml"))  # not a T4


def test_auto_resolves_with_its_overrides_on_top() -> None:
    auto = profile("auto", precision="fp32")
    picked = hardware.resolve_profile(auto, hardware.Found(("NVIDIA H200",), "nvml"))
    assert picked.name == "h200" and picked.requested == "auto"
    assert picked.precision == "fp32" and picked.peak_tflops.bf16 == 989.0
    assert auto.name == "auto" and auto.precision == "fp32"  # the composed node stays as it was
    assert hardware.resolve_profile(profile("auto"), hardware.Found(("NVIDIA H200",), "nvml")).precision == "bf16"


def test_auto_keeps_the_run_keys_given_on_the_command_line() -> None:
    # a packed sweep under hw=auto: the picked profile is loaded from its files, and the sweep's
    # hw.* run keys must still reach the run (they were dropped: runs_per_gpu=1, no cap, 2026-12-05)
    node = profile_node("auto", runs_per_gpu=12, mps=True, gpu_memory_fraction=0.0375)
    node.peak_memory_gib.gnmt_ding = 5.5
    picked = hardware.resolve_profile(build(HwSpec, node, "hw."), hardware.Found(("NVIDIA H100 80GB HBM3",), "nvml"))
    assert picked.name == "h100" and picked.requested == "auto"
    assert (picked.runs_per_gpu, picked.mps, picked.gpu_memory_fraction) == (12, True, 0.0375)
    assert picked.peak_memory_gib.gnmt_ding == 5.5
    # keys left at the run block's defaults keep the picked profile's own values
    untouched = hardware.resolve_profile(profile("auto"), hardware.Found(("NVIDIA H100 80GB HBM3",), "nvml"))
    assert untouched.peak_memory_gib == hardware.load_profile("h100").peak_memory_gib
    assert (untouched.runs_per_gpu, untouched.gpu_memory_fraction) == (1, None)


def test_this_host_detects_as_cpu_profile() -> None:
    found = hardware.detect()
    if found.gpus:
        pytest.skip(f"this host has {found.describe()}")
    assert hardware.resolve_profile(profile("auto"), found).name == "cpu"


def test_wrong_gpu_fails_with_one_line_naming_both() -> None:
    with pytest.raises(T4BenchError) as err:
        hardware.check(profile("t4"), hardware.Found(("NVIDIA H200",), "nvml"), 1)
    message = str(err.value)
    assert "\n" not in message
    assert "hw=t4" in message and "NVIDIA T4" in message and "1x NVIDIA H200" in message
    assert "hw=h200" in message


def test_too_many_gpus_and_no_gpu_fail() -> None:
    with pytest.raises(T4BenchError, match=r"hw.count=4 asks for 4x NVIDIA H200.*only 1x NVIDIA H200"):
        hardware.check(profile("h200", count=4), hardware.Found(("NVIDIA H200",), "nvml"), 4)
    with pytest.raises(T4BenchError, match="no NVIDIA GPU"):
        hardware.check(profile("a100"), hardware.Found((), "none", "NVML Shared Library Not Found"), 1)
    assert hardware.check(profile("h200", count=2), hardware.Found(("NVIDIA H200",) * 2, "nvml"), 2).mismatch is None


def test_not_strict_passes_and_tags_the_mismatch() -> None:
    checked = hardware.check(profile("t4", strict=False), hardware.Found(("NVIDIA H200",), "nvml"), 1)
    tags = checked.tags()
    assert "NVIDIA H200" in tags["t4bench.hw_mismatch"]
    assert tags["t4bench.hw_requested"] == "t4" and tags["t4bench.hw_detected"] == "1x NVIDIA H200"


def imported_modules(stderr: str) -> set[str]:
    """Top-level module names from `python -X importtime` output."""
    return {
        line.rsplit("|", 1)[-1].strip().split(".")[0] for line in stderr.splitlines() if line.startswith("import time:")
    }


def test_hw_t4_on_this_host_fails_fast_without_a_run(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    if hardware.detect().gpus:
        pytest.skip("this host has a GPU")
    proc = run_t4bench("hw=t4", check=False, module=("-X", "importtime", "-m", "t4bench"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("import time:")]
    assert lines == [lines[-1]] and lines[-1].startswith(
        "t4bench: error: hw=t4 asks for 1x NVIDIA T4, but this machine has no NVIDIA GPU"
    ), lines
    # failing fast means failing before the heavy imports (torch, MLflow: tens of seconds on 2 cores)
    assert not imported_modules(proc.stderr) & {"torch", "mlflow"}
    assert all_runs(mlflow_client, "t4bench-ncf") == []


def test_cpu_host_detection_needs_no_torch() -> None:
    if hardware.cuda_driver_present():
        pytest.skip("this host has a CUDA driver")
    found = hardware.detect()
    assert found.gpus == () and found.source == "none" and "libcuda" in found.describe()


@pytest.mark.parametrize(
    ("threads", "local_ranks", "omp", "expected"),
    [
        (None, 1, None, None),  # one rank: torch's default
        (None, 2, None, max(1, hardware.host_cores() // 2)),  # ranks share the host's cores
        (None, 2, "1", None),  # OMP_NUM_THREADS decides (torch reads it)
        (3, 2, "1", 3),  # hw.threads wins
        (2, 1, None, 2),
    ],
)
def test_threads_per_rank(threads, local_ranks, omp, expected) -> None:  # type: ignore[no-untyped-def]
    environ = {} if omp is None else {"OMP_NUM_THREADS": omp}
    assert hardware.threads_per_rank(profile("cpu", threads=threads), local_ranks, environ) == expected


def test_bad_threads_is_one_line() -> None:
    with pytest.raises(T4BenchError, match=r"^hw.threads=0: must be an integer >= 1"):
        hardware.threads_per_rank(profile("cpu", threads=0), 1, {})


@pytest.mark.slow
def test_not_strict_runs_on_cpu_and_is_tagged(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    if hardware.detect().gpus:
        pytest.skip("this host has a GPU")
    run_t4bench("hw=t4", "hw.strict=false", "hw.precision=fp32", "hw.threads=1", *FAST)
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    assert run.info.status == "FINISHED"
    tags = run_tags(mlflow_client, run)
    assert tags["t4bench.hw"] == "t4" and tags["t4bench.threads"] == "1"
    assert "no NVIDIA GPU" in tags["t4bench.hw_mismatch"]
    assert tags["t4bench.precision"] == "fp32"
    assert tags["t4bench.telemetry"].startswith("off: ")


@pytest.mark.slow
def test_auto_on_this_host_tags_the_perf_profile_it_picked(run_t4bench, mlflow_client) -> None:  # type: ignore[no-untyped-def]
    """hw=auto trains with the perf profile of the hardware it found (here the CPU's) and the run
    says which, and that the profile sets nothing for NCF: a plain-loop run is not read as tuned."""
    if hardware.detect().gpus:
        pytest.skip("this host has a GPU")
    run_t4bench("hw=auto", *FAST)
    (run,) = all_runs(mlflow_client, "t4bench-ncf")
    tags = run_tags(mlflow_client, run)
    assert tags["t4bench.hw"] == "cpu" and tags["t4bench.perf.profile"] == "cpu"
    assert tags["t4bench.perf.profile_note"] == "perf profile cpu sets nothing for ncf: the plain eager loop"
