"""scripts/gpu_smoke.sh refuses a case it does not know before running anything: a misspelt case
(or one from a newer tree) would otherwise run the default model and be written under its name."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_smoke.sh"


@pytest.mark.parametrize("where", ["CASES", "TOGETHER"])
def test_unknown_case_exits_2_with_one_line_and_runs_nothing(tmp_path: Path, where: str) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "CASES": "ncf", "HW": "cpu", where: "gnmt-synthtic"}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown case 'gnmt-synthtic'" in lines[0] and "gnmt-synthetic" in lines[0], lines
    assert done.stdout == "" and not (tmp_path / "smoke" / "ncf.log").exists()
