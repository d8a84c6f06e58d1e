"""perf/profile_step.py on the CPU: one real run over a mini model's bare, same and best paths
writes a markdown summary per path whose figures come from the profiler (the same GPU command
makes docs/perf.md's profiler sections); bad arguments exit 2."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "perf"))  # the perf/ scripts import each other by name
profile_step = importlib.import_module("profile_step")

ARGS = ["--device", "cpu", "--models", "ssd", "--steps", "2", "--warmup", "1", "--batch", "2"]


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^#### ", text, flags=re.M)[1:]
    return {part.splitlines()[0].split(" (")[0]: part for part in parts}


def table(section: str) -> dict[str, float]:
    """op -> calls per step, from the section's top-ops table."""
    rows = re.findall(r"^\| `([^`]+)` \| [\d.]+ \| [\d.]+% \| ([\d.e+]+) \|$", section, flags=re.M)
    return {name: float(calls) for name, calls in rows}


def test_profiles_every_path_into_markdown(tmp_path: Path) -> None:
    out = tmp_path / "profile.md"
    profile_step.main([*ARGS, "--out", str(out), "scale=mini"])
    found = sections(out.read_text())
    assert list(found) == ["ssd, bare", "ssd, same", "ssd, best"], list(found)
    for name, section in found.items():
        assert "failed" not in section.splitlines()[0], section
        busy = re.search(r"device busy ([\d.]+) ms/step = (\d+)% of wall", section)
        assert busy and float(busy.group(1)) > 0 and 0 < int(busy.group(2)) <= 100, name
        ops = re.search(r"- ([\d,]+) aten ops", section)
        assert ops and int(ops.group(1).replace(",", "")) > 100, name  # an SSD step is thousands of ops
        assert 0 < len(table(section)) <= profile_step.TOP
    # the same convolutions per step whichever loop runs them: the paths do the same work. Only ops
    # in both top-15 tables: the tables rank by time, and on a loaded host an op near the cut can
    # rank 15th in one path and 16th in the other (a CI run, 2026-12-06)
    bare, same = table(found["ssd, bare"]), table(found["ssd, same"])
    convolutions = [op for op in bare if "convolution" in op and op in same]
    assert convolutions and all(bare[op] == same[op] for op in convolutions), (bare, same)


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        profile_step.main(["--device", "cpu", "--steps", "0", "--out", str(tmp_path / "x.md")])
    assert exit_info.value.code == 2 and "--steps" in capsys.readouterr().err


def test_device_busy_time_counts_overlapping_kernels_once() -> None:
    # two streams: [0, 10) and [5, 12) overlap; [20, 21) apart
    assert profile_step.busy_us([(5.0, 12.0), (0.0, 10.0), (20.0, 21.0), (6.0, 7.0)]) == 13.0
