"""End-to-end sweeps on NCF mini (1 epoch per run): seed-sweep summary, pruning,
two workers on one journal, the MLflow parent/trial/seed layout, optuna-dashboard on the journal,
held-out validation. Real runs, real storages, a real dashboard server, no mocks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from t4bench.tracking.tags import run_tags
from tests.conftest import DATA_ROOT, all_runs
from tests.test_run_names import names_that_do_not_fit
from tests.test_sweep_units import postgres_url  # noqa: F401  (fixture: a throwaway PostgreSQL server)

# each test trains (1-3 epoch runs of NCF mini in subprocesses)
pytestmark = pytest.mark.slow

COMMON = [
    "max_epochs=1",
    "progress=off",
    "hydra/sweeper=optuna",
    "hydra/sweeper/sampler=random",
    "model.optimizer.lr=tag(log,interval(1e-4,1e-2))",
]


def _sweep_cmd(*overrides: str, sweep_dir: Path, run_dir: Path | None = None) -> list[str]:
    """`python -m t4bench --multirun` of an Optuna sweep of NCF mini (COMMON, then `overrides`) into
    `sweep_dir` (and Hydra's run folder `run_dir` when given)."""
    dirs = [f"hydra.sweep.dir={sweep_dir}", *([f"hydra.run.dir={run_dir}"] if run_dir else [])]
    return [sys.executable, "-m", "t4bench", "--multirun", *COMMON, *overrides, *dirs]


def _env(tracking_uri: str) -> dict[str, str]:
    return {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }


def _study(sweep_dir: Path, name: str = "ncf-optuna") -> optuna.Study:
    from t4bench.sweep.storage import open_storage

    journal = f"journal:{sweep_dir / 'optuna.journal'}"
    return optuna.load_study(study_name=name, storage=open_storage(journal))


def _trials_so_far(sweep_dir: Path) -> list[optuna.trial.FrozenTrial]:
    """The study's trials while a sweep starts up (no journal, or no study in it yet: none)."""
    if not (sweep_dir / "optuna.journal").exists():
        return []
    try:
        return _study(sweep_dir).trials
    except KeyError:
        return []


def test_seed_sweep_parent_run_and_summary(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_t4bench("--multirun", "max_epochs=1", "seed=0,1", "progress=off", env={"OMP_NUM_THREADS": "1"})
    assert "olympic_mean" in proc.stdout
    runs = all_runs(mlflow_client, "t4bench-ncf")
    parents = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "parent"]
    assert len(parents) == 1
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["t4bench.seed"] for r in children) == ["0", "1"]
    assert {r.data.tags["t4bench.sweep_id"] for r in children} == {parent.data.tags["t4bench.sweep_id"]}
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["epochs_run_mean"] == 1.0
    assert "epochs_to_converge_converged_fraction" in parent.data.metrics
    # readable name, the fixed part of the config as params (not the swept seed), the config's tags
    assert parent.info.run_name == "seeds-sweep" and sorted(r.info.run_name for r in children) == ["seed=0", "seed=1"]
    assert parent.data.params["max_epochs"] == "1" and "seed" not in parent.data.params
    assert parent.data.tags["t4bench.hw"] == "cpu" and parent.data.tags["t4bench.scale"] == "mini"
    assert (tmp_path / "sweep" / "summary.json").exists()


def test_pruning_stops_trials_early_and_marks_them(run_t4bench, mlflow_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a pruner that prunes any quality gap > 0: every lead seed stops after its first epoch of 3
    run_t4bench(
        "--multirun",
        *COMMON,
        "max_epochs=3",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.seeds_per_trial=2",
        "hydra/sweeper/pruner=none",
        "hydra.sweeper.pruner._target_=optuna.pruners.ThresholdPruner",
        "+hydra.sweeper.pruner.upper=0.0",
        env={"OMP_NUM_THREADS": "1"},
    )
    study = _study(tmp_path / "sweep")
    assert [t.state for t in study.trials] == [TrialState.PRUNED, TrialState.PRUNED]
    assert all(t.user_attrs["epochs_run"] == 1 for t in study.trials)  # 1 epoch of 3, second seed never ran
    runs = all_runs(mlflow_client, "t4bench-ncf")
    training = [r for r in runs if "t4bench.sweep_role" not in r.data.tags]
    assert len(training) == 2 and {r.data.tags["t4bench.outcome"] for r in training} == {"pruned"}
    assert all(r.data.metrics["epochs_run"] == 1 for r in training)
    trials = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "trial"]
    assert {r.data.tags["t4bench.optuna.state"] for r in trials} == {"PRUNED"}


@pytest.fixture(scope="module")
def two_worker_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One Optuna sweep, 3 trials x 2 seeds, run by two worker processes on one journal file;
    the tests below read its storage, its MLflow runs and validate it."""
    base = tmp_path_factory.mktemp("two_workers")
    uri = f"sqlite:///{base / 'mlflow.db'}"
    cmd = _sweep_cmd(
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.seeds_per_trial=2",
        "hydra.sweeper.n_jobs=2",
        "hydra/sweeper/pruner=none",
        sweep_dir=base / "sweep",
        run_dir=base / "run",
    )
    proc = subprocess.run(cmd, cwd=base, env=_env(uri), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (base / "stdout.txt").write_text(proc.stdout)
    return base / "sweep", uri


def test_two_workers_share_one_journal_exactly_n_trials(two_worker_sweep: tuple[Path, str]) -> None:
    # the sweep talks: trial i/n with an ETA, then what to run next (exact commands)
    out = (two_worker_sweep[0].parent / "stdout.txt").read_text()
    assert "[t4bench] sweep trial " in out and "/3 done (" in out
    assert f"t4bench validate --sweep-dir {two_worker_sweep[0]} --seeds 1000-1019" in out
    assert "[t4bench] report: t4bench report --tracking-uri " in out and "--optuna-storage " in out
    trials = _study(two_worker_sweep[0]).trials
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.user_attrs["t4bench_pid"] for t in trials}) == 2  # both workers ran trials


def test_mlflow_layout_parent_trials_seeds_best(two_worker_sweep: tuple[Path, str]) -> None:
    from mlflow.tracking import MlflowClient

    sweep_dir, uri = two_worker_sweep
    study = _study(sweep_dir)
    runs = [
        r for r in all_runs(MlflowClient(uri), "t4bench-ncf") if r.data.tags.get("t4bench.sweep_id") == "ncf-optuna"
    ]
    role = {r.info.run_id: r.data.tags.get("t4bench.sweep_role") for r in runs}
    parents = [r for r in runs if role[r.info.run_id] == "parent"]
    assert len(parents) == 1  # one parent although two processes ran the sweep
    parent = parents[0]
    trials = [r for r in runs if role[r.info.run_id] == "trial"]
    assert sorted(int(r.data.tags["t4bench.trial_number"]) for r in trials) == [0, 1, 2]
    assert {r.data.tags["mlflow.parentRunId"] for r in trials} == {parent.info.run_id}
    seeds = [r for r in runs if role[r.info.run_id] is None]
    assert len(seeds) == 6
    by_trial = {r.info.run_id: r.data.tags["t4bench.trial_number"] for r in trials}
    for run in seeds:  # each seed run hangs under the run of its own trial
        assert by_trial[run.data.tags["mlflow.parentRunId"]] == run.data.tags["t4bench.trial_number"]
    assert sorted(r.data.tags["t4bench.seed"] for r in seeds) == ["0", "0", "0", "1", "1", "1"]
    best = study.best_trial
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["best_value"] == pytest.approx(best.value)
    assert parent.data.tags["t4bench.best_trial"] == str(best.number)
    best_lr = run_tags(MlflowClient(uri), parent)["t4bench.best.model.optimizer.lr"]  # in its tag file
    assert float(best_lr) == pytest.approx(best.params["model.optimizer.lr"])
    # readable names, the sweep's fixed params (not the searched one) and the config's tags
    assert parent.info.run_name.startswith("ncf-optuna-")
    # every run of the sweep fits the runs table: a name that shows whole at its nesting depth, at
    # most 20 tags (the rest in its file)
    assert not names_that_do_not_fit(runs) and all(len(r.data.tags) <= 20 for r in runs), [
        (r.info.run_name, len(r.data.tags)) for r in runs
    ]
    assert sorted(r.info.run_name for r in trials) == ["trial-000", "trial-001", "trial-002"]
    assert sorted(r.info.run_name for r in seeds) == ["seed=0"] * 3 + ["seed=1"] * 3
    assert parent.data.params["max_epochs"] == "1" and parent.data.params["model.name"] == "ncf"
    assert "model.optimizer.lr" not in parent.data.params and "seed" not in parent.data.params
    assert parent.data.params["sweep.seeds"] == "0,1"
    assert {parent.data.tags[k] for k in ("t4bench.model", "t4bench.hw", "t4bench.scale")} == {"ncf", "cpu", "mini"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_optuna_dashboard_opens_the_journal(two_worker_sweep: tuple[Path, str], tmp_path: Path) -> None:
    port = _free_port()
    journal = two_worker_sweep[0] / "optuna.journal"
    with open(tmp_path / "dashboard.log", "wb") as log:
        server = subprocess.Popen(
            ["optuna-dashboard", str(journal), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        studies = None
        deadline = time.time() + 60
        while studies is None and time.time() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as resp:
                    studies = json.load(resp)["study_summaries"]
            except OSError:
                time.sleep(0.5)
        assert studies is not None, (tmp_path / "dashboard.log").read_text()[-2000:]
        assert [s["study_name"] for s in studies] == ["ncf-optuna"]
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}", timeout=10
        ) as resp:
            detail = json.load(resp)
        assert len(detail["trials"]) == 3
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_held_out_validation_reports_both_arms_with_statistics(
    two_worker_sweep: tuple[Path, str], tmp_path: Path
) -> None:
    sweep_dir, uri = two_worker_sweep
    cmd = [sys.executable, "-m", "t4bench.sweep.holdout", "--sweep-dir", str(sweep_dir)]
    # seeds the sweep tuned on (0, 1) are refused in one line
    refused = subprocess.run([*cmd, "--seeds", "1-2", "--dry-run"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "used while tuning" in refused.stderr
    proc = subprocess.run(
        [*cmd, "--seeds", "7-8", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        env=_env(uri),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Held-out validation" in proc.stdout and "goal ncf:" in proc.stdout
    result = json.loads((sweep_dir / "validation.json").read_text())
    assert result["best"]["trial"] == _study(sweep_dir).best_trial.number
    for arm in ("tuned", "reference"):
        runs = result["arms"][arm]["runs"]
        assert [r["seed"] for r in runs] == [7, 8]
        # epochs of a run that missed the target enter as its max_epochs (1): censored, not dropped
        expected = [r["epochs_to_converge"] if r["outcome"] == "converged" else 1.0 for r in runs]
        assert result["arms"][arm]["epochs"] == expected and result["arms"][arm]["stats"]["n"] == 2
    assert set(result["comparison"]) == {"mean_ratio", "std_ratio", "brown_forsythe", "mann_whitney"}
    csv_rows = (sweep_dir / "validation.csv").read_text().splitlines()
    assert csv_rows[0] == "statistic,tuned,reference,ratio,ci_low,ci_high" and len(csv_rows) == 9
    from mlflow.tracking import MlflowClient

    runs = all_runs(MlflowClient(uri), "t4bench-ncf")
    parents = {r.data.tags["t4bench.sweep_id"]: r for r in runs if r.data.tags.get("t4bench.sweep_role") == "parent"}
    best = result["best"]["trial"]
    # the sweep's own parent is left FINISHED; the validation parent holds one finished run per arm
    assert {k: r.info.status for k, r in parents.items()} == {
        "ncf-optuna": "FINISHED",
        "ncf-optuna-validate": "FINISHED",
        f"ncf-optuna-validate-best-t{best}": "FINISHED",
        "ncf-optuna-validate-reference": "FINISHED",
    }
    validation = parents["ncf-optuna-validate"]
    for arm, name in (
        (f"ncf-optuna-validate-best-t{best}", f"tuned-t{best}"),
        ("ncf-optuna-validate-reference", "reference"),
    ):
        assert parents[arm].data.tags["mlflow.parentRunId"] == validation.info.run_id
        assert parents[arm].info.run_name == name  # short: the sweep id tag keeps the long identity
    assert "mean_ratio" in validation.data.metrics and validation.data.tags["t4bench.goal"] in ("PASS", "FAIL")
    names = {
        r.info.run_name for r in runs if r.data.tags.get("t4bench.sweep_id", "").startswith("ncf-optuna-validate-")
    }
    assert names == {f"tuned-t{best}", "reference", "seed=7", "seed=8"}  # seed runs under their arm's run
    # every name fits the Run Name column, every run carries at most 20 tags
    assert not names_that_do_not_fit(runs) and all(len(r.data.tags) <= 20 for r in runs)


def test_other_study_reusing_the_sweep_id_fails_in_one_line(two_worker_sweep: tuple[Path, str], tmp_path: Path) -> None:
    """A new study under an old sweep id must not reopen the old (FINISHED) parent run."""
    _, uri = two_worker_sweep
    cmd = _sweep_cmd(
        "hydra.sweeper.study_name=another", "hydra.sweeper.sweep_id=ncf-optuna", sweep_dir=tmp_path / "sweep"
    )
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(uri), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.startswith("t4bench: error: sweep id 'ncf-optuna' belongs to another sweep")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    from mlflow.tracking import MlflowClient

    runs = all_runs(MlflowClient(uri), "t4bench-ncf")
    parent = [
        r
        for r in runs
        if r.data.tags.get("t4bench.sweep_id") == "ncf-optuna" and r.data.tags.get("t4bench.sweep_role") == "parent"
    ]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
