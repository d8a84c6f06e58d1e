"""scripts/study_table.py rebuilds a study's trials table from the Optuna journal a sweep wrote:
a real journal made with Optuna's own API, the script run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "study_table.py"


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "optuna.journal"
    study = optuna.create_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(path))))
    for seeds in ([4.0, 5.0], [3.0, 3.0]):
        trial = study.ask({"model.optimizer.lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
        trial.set_user_attr("seed_values", seeds)
        trial.set_user_attr("epochs_run", sum(seeds))
        study.tell(trial, sum(seeds) / len(seeds))
    study.ask()  # left RUNNING, as a trial cut off by a time limit is
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_table_from_journal(tmp_path: Path) -> None:
    out = tmp_path / "trials.csv"
    done = _run(str(_journal(tmp_path)), "s", str(out))
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    assert list(table["state"]) == ["complete", "complete", "running"]
    assert list(table["objective"].iloc[:2]) == [4.5, 3.0]
    assert table["seed_epochs"].iloc[0] == "4.00 5.00"
    stored = optuna.load_study(
        study_name="s", storage=JournalStorage(JournalFileBackend(str(tmp_path / "optuna.journal")))
    )
    assert list(table["model.optimizer.lr"].iloc[:2]) == [t.params["model.optimizer.lr"] for t in stored.trials[:2]]
    assert done.stdout.splitlines()[0] == "s: 3 trials (complete 2, running 1)"
    assert done.stdout.splitlines()[1].startswith("  trial 1: objective 3.000")


def test_missing_journal_or_study_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "trials.csv"
    missing = _run(str(tmp_path / "nope.journal"), "s", str(out))
    assert missing.returncode == 2 and missing.stderr.startswith("t4bench: error: ")
    assert len(missing.stderr.splitlines()) == 1 and not (tmp_path / "nope.journal").exists()
    wrong = _run(str(_journal(tmp_path)), "other", str(out))
    assert wrong.returncode == 2 and wrong.stderr.startswith("t4bench: error: ")
    assert len(wrong.stderr.splitlines()) == 1 and not out.exists()
