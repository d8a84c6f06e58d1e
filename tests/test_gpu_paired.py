"""scripts/gpu/paired.sh on the CPU: a base tree (git archive of this commit's src/ and conf/) and
this tree train the same model and seed through the CLI one after the other, each printing one
line with its outcome and time to train; a missing or wrong base tar exits 2 with one line."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import DATA_ROOT, REPO

SCRIPT = REPO / "scripts" / "gpu" / "paired.sh"


def paired(tmp_path: Path, tar: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "PAIRED_TAR": str(tar),
        "HW": "cpu",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        **env,
    }
    full.pop("PYTHONPATH", None)
    return subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=full, capture_output=True, text=True, timeout=300)


def test_base_and_new_tree_train_the_same_seed(tmp_path: Path) -> None:
    tar = tmp_path / "base.tar"
    subprocess.run(["git", "archive", "-o", str(tar), "HEAD", "src", "conf"], cwd=REPO, check=True)
    done = paired(tmp_path, tar, PAIRED_MODELS="ncf", PAIRED_SEEDS="0", PAIRED_ARGS="")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:4] for line in lines] == [["base", "ncf", "seed", "0"], ["new", "ncf", "seed", "0"]], lines
    for line in lines:
        assert "exit 0" in line and "converged" in line and "time_to_train_s" in line, line
    logs = sorted(p.name for p in (tmp_path / "out" / "paired").glob("*.log"))
    assert logs == ["base_ncf_seed0.log", "new_ncf_seed0.log"]
    assert (tmp_path / "out" / "paired" / "base.db").exists() and (tmp_path / "out" / "paired" / "new.db").exists()


@pytest.mark.parametrize("case", ["missing", "no-conf"])
def test_a_base_tar_that_cannot_serve_exits_2(tmp_path: Path, case: str) -> None:
    tar = tmp_path / "base.tar"
    if case == "no-conf":
        (tmp_path / "src" / "t4bench").mkdir(parents=True)
        with tarfile.open(tar, "w") as archive:
            archive.add(tmp_path / "src", arcname="src")
    done = paired(tmp_path, tar)
    assert done.returncode == 2 and len(done.stdout.strip().splitlines()) == 1, done.stdout
    assert "no such file" in done.stdout if case == "missing" else "holds no src/t4bench and conf/" in done.stdout
    assert not (tmp_path / "out" / "paired").exists() or not any((tmp_path / "out" / "paired").iterdir())
