"""NVML telemetry. The parsing and summary logic is fed a fake NVML (this host has none); the real
NVML path runs on the GPU machine (scripts/gpu/checks.sh). Here: telemetry must be off, tagged."""

from __future__ import annotations

import time
from types import SimpleNamespace

from t4bench import telemetry


class FakeNVML:
    """Just the pynvml calls the sampler makes, with made-up readings (parsing tests only)."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1

    def __init__(self) -> None:
        self.energy = 1_000_000

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=90, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=2 * 10**9, total=16 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h):
        return 250_000

    def nvmlDeviceGetTemperature(self, h, kind):
        return 70 + h

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 if h == 1 else 0x1  # gpu1 power-capped; gpu0 idle (not throttling)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.energy += 500_000  # +0.5 kJ per read
        return self.energy

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    nvmlDeviceGetMaxPcieLinkGeneration = nvmlDeviceGetCurrPcieLinkGeneration
    nvmlDeviceGetMaxPcieLinkWidth = nvmlDeviceGetCurrPcieLinkWidth

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        raise RuntimeError("NVMLError_NotSupported")

    def nvmlShutdown(self):
        pass


def test_reading_parses_units() -> None:
    r = telemetry.read_gpu(FakeNVML(), 1, 1, now=5.0)  # type: ignore[arg-type]
    assert (r.util_pct, r.mem_used_gb, r.power_w, r.temp_c, r.sm_clock_mhz) == (90.0, 2.0, 250.0, 71.0, 1980.0)
    assert r.throttled
    assert not telemetry.read_gpu(FakeNVML(), 0, 0).throttled  # idle is not throttling
    points = telemetry.metric_points([r], step=3, energy_base_mj={1: r.energy_mj - 2_000_000})
    names = {name: value for name, value, _, step in points}
    assert names["system/gpu_1_temperature_celsius"] == 71.0 and names["system/gpu_1_energy_kilojoules"] == 2.0
    assert {step for *_, step in points} == {3}


def test_inventory_tags() -> None:
    tags = telemetry.inventory(FakeNVML(), [0, 1])  # type: ignore[arg-type]
    assert tags["t4bench.gpu.names"] == "NVIDIA H200, NVIDIA H200"
    assert tags["t4bench.gpu.driver"] == "580.159.04" and tags["t4bench.gpu.cuda_driver"] == "13.0"
    assert tags["t4bench.gpu.pcie"].startswith("gpu0 gen5 x16")
    assert "t4bench.gpu.power_limit_w" not in tags  # unsupported queries are left out, not errors


def test_summary_over_the_window() -> None:
    def sample(t: float, power: float, reasons: int, temp: float) -> list[telemetry.Reading]:
        return [telemetry.Reading(0, t, 50.0, 1.0, power, temp, 1500.0, reasons, None)]

    samples = [sample(0, 100, 0, 40), sample(1, 300, 0x4, 60), sample(2, 300, 0, 80), sample(9, 999, 0x4, 99)]
    window = telemetry.Window(start_s=0.0, stop_s=2.0)
    summary = telemetry.summarize(samples, window)  # no energy counter: trapezoids of power
    assert summary["energy_to_train_kj"] == (200 + 300) / 1000
    assert summary["avg_power_w"] == 250.0
    assert summary["max_temp_c"] == 80.0 and summary["throttled_fraction"] == 1 / 3
    counted = telemetry.summarize(samples, telemetry.Window(0.0, 2.0, {0: 0}, {0: 1_000_000}))
    assert counted["energy_to_train_kj"] == 1.0 and counted["avg_power_w"] == 500.0


def test_sampler_thread_flushes_to_the_sink() -> None:
    got: list[telemetry.MetricPoint] = []
    sampler = telemetry.Sampler(FakeNVML(), [0, 1], interval_s=0.05, log_interval_s=0.1, sink=got.extend)  # type: ignore[arg-type]
    sampler.start()
    sampler.mark_start()
    time.sleep(0.4)
    sampler.mark_stop()
    summary = sampler.stop()
    assert summary["energy_to_train_kj"] > 0 and summary["max_temp_c"] == 71.0
    assert 0 < summary["throttled_fraction"] <= 1
    assert any(name == "system/gpu_0_sm_clock_megahertz" for name, *_ in got)
    assert sampler.tags()["t4bench.telemetry"].startswith("on: 2 GPU(s)")


def test_no_gpu_means_off_with_a_reason() -> None:
    off = telemetry.start(enabled=True, on_gpu=False, gpus=1)
    assert not off.enabled and off.tags()["t4bench.telemetry"].startswith("off: ")
    assert off.stop() == {}
    disabled = telemetry.start(enabled=False, on_gpu=True, gpus=1)
    assert "disabled" in disabled.tags()["t4bench.telemetry"]


def test_real_nvml_here_is_off_or_on_but_never_raises() -> None:
    result = telemetry.start(enabled=True, on_gpu=True, gpus=1)
    assert result.tags()["t4bench.telemetry"].split(":")[0] in {"on", "off"}
    result.stop()
