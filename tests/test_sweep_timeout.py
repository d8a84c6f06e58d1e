"""`hydra.sweeper.timeout`: after it, a worker claims no new trial (Optuna's optimize(timeout=)), so
a time-boxed GPU session ends with whole trials. Real sweep processes, real journal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
from conftest import DATA_ROOT
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend


def _sweep(tmp_path: Path, timeout: str) -> optuna.Study:
    sweep_dir = tmp_path / f"sweep-{timeout}"
    subprocess.run(
        [sys.executable, "-m", "t4bench", "--multirun", "+sweeps=ncf_tuned", "hw=cpu", "max_epochs=1",
         "hydra.sweeper.n_trials=2", "hydra.sweeper.seeds_per_trial=1", f"hydra.sweeper.timeout={timeout}",
         f"hydra.sweep.dir={sweep_dir}", f"tracking.uri=sqlite:///{sweep_dir}.db",
         f"paths.data_root={DATA_ROOT}"],
        check=True, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "optuna.journal")))
    return optuna.load_study(study_name="ncf_tuned", storage=storage)


def test_a_spent_timeout_starts_no_trial_and_a_long_one_runs_them_all(tmp_path: Path) -> None:
    assert _sweep(tmp_path, "0").trials == []
    finished = [t for t in _sweep(tmp_path, "3600").trials if t.state.is_finished()]
    assert len(finished) == 2
