"""Sweep machinery without training: statistics, robust objective, search space, storage,
plugin discovery, sweep definitions, stale-trial accounting on a real journal / PostgreSQL."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from t4bench.sweep import space, stats
from t4bench.sweep.objective import RobustObjective
from t4bench.tracking.client import mlflow_client
from tests.conftest import REPO, run_cli


def test_olympic_mean_and_describe() -> None:
    assert stats.olympic_mean([3, 4, 5, 10]) == 4.5
    # one non-converged run is the slowest and is dropped; two make it undefined
    assert stats.olympic_mean([3, 4, 5, math.nan]) == 4.5
    assert math.isnan(stats.olympic_mean([3, 4, math.nan, math.nan]))
    d = stats.describe([4, 4, 5, 5, None], [True, True, True, True, False])
    assert d["n"] == 5 and d["n_converged"] == 4 and d["converged_fraction"] == 0.8
    assert d["mean"] == 4.5 and d["min"] == 4 and d["max"] == 5
    assert d["std"] == pytest.approx(0.57735, rel=1e-4)
    assert d["cv"] == pytest.approx(d["std"] / 4.5)
    # the outcome counts, not the values present: a value of a run that did not converge is no score
    d = stats.describe([4, 4, 5, 5, 9], [True, True, True, True, False])
    assert d["n_converged"] == 4 and d["max"] == 5 and d["olympic_mean"] == pytest.approx(14 / 3)
    with pytest.raises(ValueError):
        stats.describe([1.0, 2.0], [True])


def test_describe_runs_counts_converged_runs_from_their_outcome() -> None:
    """Every run has an epochs_run, none converged: the fraction is 0 in every row (it was 1.0 in the
    epochs_run row when present values counted as converged)."""
    runs = [{"outcome": "not_converged", "epochs_run": 3.0, "run_train_s": 7.0} for _ in range(4)]
    rows = stats.describe_runs(runs)
    assert {name: row["converged_fraction"] for name, row in rows.items()} == {
        "epochs_to_converge": 0.0,
        "time_to_train_s": 0.0,
        "epochs_run": 0.0,
    }
    assert rows["epochs_run"]["mean"] == 3.0 and math.isnan(rows["time_to_train_s"]["mean"])
    mixed = [*runs[:2], {"outcome": "converged", "epochs_run": 2.0, "epochs_to_converge": 2.0, "time_to_train_s": 5.0}]
    rows = stats.describe_runs(mixed)
    assert rows["epochs_run"]["n_converged"] == 1 and rows["time_to_train_s"]["mean"] == 5.0
    assert rows["epochs_run"]["mean"] == pytest.approx(8 / 3)


def test_sweep_summary_says_when_max_epochs_stopped_every_run() -> None:
    from t4bench.sweep.summary import budget_note, summarize

    short = [{"outcome": "not_converged", "epochs_run": 3.0, "max_epochs": 3.0, "seed": i} for i in range(4)]
    summary = summarize(short)
    assert summary["n_converged"] == 0 and summary["converged_fraction"] == 0.0
    assert (
        budget_note(summary, short) == "t4bench: 0 of 4 runs reached the target within max_epochs=3: raise max_epochs"
    )
    mixed = [*short[:3], {"outcome": "diverged", "epochs_run": 1.0, "max_epochs": 3.0, "seed": 9}]
    assert budget_note(summarize(mixed), mixed) == (
        "t4bench: 0 of 4 runs reached the target within max_epochs=3 (3 stopped there, 1 diverged): raise max_epochs"
    )
    done = [*short[:3], {"outcome": "converged", "epochs_run": 2.0, "epochs_to_converge": 2.0, "max_epochs": 3.0}]
    assert budget_note(summarize(done), done) is None
    assert summarize(done)["converged_fraction"] == 0.25
    diverged = [{"outcome": "diverged", "epochs_run": 1.0, "max_epochs": 3.0}]
    assert budget_note(summarize(diverged), diverged) is None  # max_epochs stopped none of them


def test_robust_objective_penalties_and_aggregates() -> None:
    runs = [
        {"outcome": "converged", "epochs_to_converge": 3.0, "epochs_run": 3, "time_to_train_s": 30.0},
        # as rank.summary_metrics gives them: no time to train, only the seconds the run trained
        {"outcome": "not_converged", "epochs_run": 10, "run_train_s": 100.0},
        {"outcome": "diverged", "epochs_run": 2, "run_train_s": 20.0},
    ]
    value, per_seed = RobustObjective()(runs, max_epochs=10)
    assert per_seed == [3.0, 15.0, 20.0] and value == pytest.approx(38 / 3)
    timed = RobustObjective(metric="time_to_train_s", aggregate="max")
    assert timed(runs, 10)[1] == [30.0, 150.0, 200.0] and timed(runs, 10)[0] == 200.0
    robust = RobustObjective(aggregate="mean_std", std_weight=1.0)
    vals = [3.0, 5.0]
    assert robust.aggregate_values(vals) == pytest.approx(4.0 + math.sqrt(2))
    assert RobustObjective(aggregate="quantile", quantile=0.5).aggregate_values([1, 2, 9]) == 2
    assert RobustObjective(aggregate="median").aggregate_values([1, 2, 3, 10]) == 2.5
    with pytest.raises(ValueError):
        RobustObjective(aggregate="nope")


def test_search_space_from_override_syntax() -> None:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    s = space.parse(
        ["model.optimizer.lr=tag(log,interval(1e-4,1e-2))", "seed=range(0,3)", "max_epochs=5"],
        {
            "model.batch_size": "choice(128,256)",
            "model.arch.mlp_layers": "choice([64,32,16],[128,64,32])",
            "a": "range(1,10,2)",
            "b": "int(interval(1,8))",
            "c": "tag(log,int(interval(16,512)))",
            "d": "0.1,0.2",
        },
    )
    d = s.distributions
    assert d["model.optimizer.lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert d["model.batch_size"] == CategoricalDistribution([128, 256])
    assert d["a"] == IntDistribution(1, 9, step=2)
    assert d["b"] == IntDistribution(1, 8)
    assert d["c"] == IntDistribution(16, 512, log=True)
    assert d["d"] == CategoricalDistribution([0.1, 0.2])
    assert s.seeds == [0, 1, 2] and s.fixed == ["max_epochs=5"]
    assert s.overrides({"model.arch.mlp_layers": "[64,32,16]", "model.batch_size": 128, "x": 1}) == [
        "model.arch.mlp_layers=[64,32,16]",
        "model.batch_size=128",
    ]
    assert space.format_value("a b") == "'a b'" and space.format_value(True) == "true"
    with pytest.raises(ValueError):
        space.parse(["a=interval(0,1)"]).grid()


def test_plugins_discovered_and_sweeps_compose() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "t4bench", "--info", "plugins"], capture_output=True, text=True, cwd=REPO
    )
    assert "T4OptunaSweeper" in out.stdout and "T4BenchSweepsSearchPath" in out.stdout
    for sweep in sorted((REPO / "sweeps").glob("*.yaml")):
        proc = subprocess.run(
            [sys.executable, "-m", "t4bench", f"+sweeps={sweep.stem}", "--cfg", "hydra"],
            capture_output=True,
            text=True,
            cwd="/",
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        # a preset that does not pick the Optuna sweeper is a plain multirun (seed lists, seed_sources)
        optuna = "override /hydra/sweeper: optuna" in sweep.read_text() or not sweep.stem.endswith(
            ("_seeds", "_sources")
        )
        expected = "T4OptunaSweeper" if optuna else "BasicSweeper"
        assert expected in proc.stdout, sweep.name
        assert f"multirun/sweeps/{sweep.stem}" in proc.stdout or "${hydra.sweeper.study_name}" in proc.stdout


def _stale_running_trial(storage_url: str) -> tuple[Any, int]:
    """A RUNNING trial claimed by a process that is gone (public Optuna API only)."""
    import optuna

    from t4bench.sweep import liveness
    from t4bench.sweep.storage import open_storage

    study = optuna.create_study(study_name="stale", storage=open_storage(storage_url))
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    liveness.claim(trial)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    trial.set_user_attr(liveness.PID_ATTR, dead.pid)
    return study, trial.number


def test_stale_trial_of_dead_worker_is_failed_and_requeued(tmp_path: Path) -> None:
    import optuna
    from optuna.trial import TrialState

    from t4bench.sweep import liveness

    study, number = _stale_running_trial(f"journal:{tmp_path / 's.journal'}")
    # a live trial of this very process is never stale, however old its heartbeat
    mine = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    liveness.claim(mine)
    failed = liveness.fail_stale_trials(study, stale_after=3600.0)
    assert [t.number for t in failed] == [number]
    states = [t.state for t in study.trials]
    assert states == [TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING]
    waiting = study.trials[2]
    assert waiting.user_attrs[liveness.RETRY_ATTR] == number
    assert liveness.excused_failures(study.trials) == 1
    redo = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    assert redo.params == study.trials[0].params
    # the silence rule: a claim whose heartbeat is older than stale_after is stale on any host
    redo.set_user_attr(liveness.HEARTBEAT_ATTR, 0.0)
    redo.set_user_attr(liveness.HOST_ATTR, "another-host")
    frozen = study.trials[redo.number]
    assert liveness.is_stale(frozen, stale_after=60.0) and not liveness.is_stale(frozen, stale_after=1e12)


PG_BIN = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def postgres_url(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql)")
    import tempfile

    # not under tmp_path: pytest's base folder is private to root, the server runs as postgres
    base = Path(tempfile.mkdtemp(prefix="t4bench-pg-"))
    os.chmod(base, 0o755)
    data = base / "pg"
    sock = base / "sock"
    sock.mkdir()
    port = 20000 + os.getpid() % 20000
    as_postgres = os.getuid() == 0
    if as_postgres:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")

    def pg(*cmd: str) -> None:
        full = [str(PG_BIN / cmd[0]), *cmd[1:]]
        if as_postgres:
            full = ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(full)]
        # output to a file: the server inherits it and would hold a pipe open
        with open(base / "pg_ctl.out", "ab") as log:
            subprocess.run(full, check=True, stdout=log, stderr=subprocess.STDOUT, timeout=120)

    pg("initdb", "-D", str(data), "-A", "trust", "-U", "postgres")
    pg("pg_ctl", "-D", str(data), "-l", str(base / "server.log"), "-o", f"-p {port} -k {sock}", "-w", "start")
    try:
        yield f"postgresql+psycopg2://postgres@/postgres?host={sock}&port={port}"
    finally:
        pg("pg_ctl", "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(base, ignore_errors=True)


def test_postgresql_storage_accounting(postgres_url: str) -> None:
    """Any SQLAlchemy URL works: a study on a throwaway PostgreSQL cluster, stale trial handling."""
    import optuna
    from optuna.trial import TrialState

    from t4bench.sweep import liveness
    from t4bench.sweep.storage import critical_section, is_journal

    assert not is_journal(postgres_url)
    with critical_section(postgres_url):  # no file lock for SQL storages
        study, number = _stale_running_trial(postgres_url)
    assert [t.number for t in liveness.fail_stale_trials(study, stale_after=3600.0)] == [number]
    assert liveness.fail_stale_trials(study, stale_after=3600.0) == []  # failed once, not twice
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    assert trial.params == study.trials[0].params  # the requeued parameters
    study.tell(trial, 1.0)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.COMPLETE]


def test_validate_rejects_bad_input_in_one_line(tmp_path: Path) -> None:
    import optuna

    from t4bench.sweep.storage import open_storage

    optuna.create_study(study_name="s", storage=open_storage(f"journal:{tmp_path / 'optuna.journal'}"))
    cases = [
        (["--sweep-dir", str(tmp_path / "nope")], "no study journal at"),
        (["--sweep-dir", str(tmp_path), "--seeds", "1-x"], "--seeds '1-x'"),
        (["--sweep-dir", str(tmp_path), "--study", "other"], "no study 'other'"),
    ]
    for args, message in cases:
        proc = run_cli(*args, "--dry-run", module="t4bench.sweep.holdout", timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def _runs(epochs: list[float | None], max_epochs: int = 8) -> list[dict[str, Any]]:
    """Run results as the task function returns them; None = did not reach the target."""
    return [
        {
            "seed": 100 + i,
            "outcome": "converged" if e is not None else "not_converged",
            "converged": 1.0 if e is not None else 0.0,
            "epochs_to_converge": e if e is not None else math.nan,
            "epochs_run": e if e is not None else max_epochs,
            "time_to_train_s": 10.0,
            "max_epochs": float(max_epochs),
        }
        for i, e in enumerate(epochs)
    ]


def test_censored_epochs_and_arm_statistics() -> None:
    runs = _runs([3.0, 4.5, None, 3.25])
    assert stats.censored_epochs(runs, default_max_epochs=99) == [3.0, 4.5, 8.0, 3.25]
    del runs[2]["max_epochs"]  # a run without a recorded budget falls back to the config's
    assert stats.censored_epochs(runs, default_max_epochs=6)[2] == 6.0
    arm = stats.arm_stats([3.0, 4.5, 8.0, 3.25], n_converged=3)
    assert arm["olympic_mean"] == pytest.approx((3.25 + 4.5) / 2)  # one min and one max dropped
    assert arm["converged_fraction"] == 0.75 and arm["mean"] == pytest.approx(18.75 / 4)
    assert arm["std"] == pytest.approx(float(np.std([3.0, 4.5, 8.0, 3.25], ddof=1)))


def test_compare_arms_uses_scipy_and_the_goal_separates_real_gains() -> None:
    from scipy import stats as sps

    rng = np.random.default_rng(7)
    reference = np.round(rng.normal(10.0, 2.0, 20), 2).tolist()
    tuned = np.round(rng.normal(5.0, 0.5, 20), 2).tolist()  # half the epochs, a quarter of the spread
    comp = stats.compare_arms(tuned, reference)
    assert comp["mean_ratio"]["value"] == pytest.approx(np.mean(tuned) / np.mean(reference))
    assert comp["std_ratio"]["value"] == pytest.approx(np.std(tuned, ddof=1) / np.std(reference, ddof=1))
    for key in ("mean_ratio", "std_ratio"):
        r = comp[key]
        assert r["ci_low"] < r["value"] < r["ci_high"] < 1.0, r
    assert comp["brown_forsythe"]["p_value"] == pytest.approx(sps.levene(tuned, reference, center="median").pvalue)
    assert comp["mann_whitney"]["p_value"] == pytest.approx(sps.mannwhitneyu(tuned, reference).pvalue)
    assert comp["mann_whitney"]["p_value"] < 0.001 and comp["brown_forsythe"]["p_value"] < 0.01
    assert stats.goal_check(comp) == {"mean": True, "std": True, "pass": True}
    # the same distribution in both arms: ratios near 1, CIs that include 1: no gain claimed
    same = stats.compare_arms(np.round(rng.normal(10.0, 2.0, 20), 2).tolist(), reference)
    assert same["mean_ratio"]["ci_low"] < 1.0 < same["mean_ratio"]["ci_high"]
    assert stats.goal_check(same)["pass"] is False
    # 35% faster but just as spread: the mean passes, the std does not
    shifted = (np.asarray(reference) * 0.6 + rng.normal(0.0, 0.01, 20)).tolist()
    partial = stats.goal_check(stats.compare_arms(shifted, reference))
    assert partial == {"mean": True, "std": False, "pass": False}


def test_validation_report_tables_and_goal_lines(tmp_path: Path) -> None:
    from t4bench.sweep.holdout import report as validate

    arms = {
        "tuned": {
            "sweep_id": "s-validate-best-t3",
            "overrides": ["model.optimizer.lr=0.005"],
            "results": _runs([3.0, 3.0, 3.25, 3.0, 3.5, 3.0]),
        },
        "reference": {
            "sweep_id": "s-validate-reference",
            "overrides": [],
            "results": _runs([4.0, 5.0, None, 4.0, 6.0, 4.5]),
        },
    }
    report = validate.build_report(
        "ncf", "s", list(range(100, 106)), {"trial": 3, "params": {}, "value": 3.1}, arms, default_max_epochs=8
    )
    assert report["arms"]["reference"]["epochs"] == [4.0, 5.0, 8.0, 4.0, 6.0, 4.5]
    assert report["arms"]["reference"]["stats"]["n_converged"] == 5
    lines = validate.goal_lines(report)
    assert [line.split(":")[0] for line in lines] == ["goal ncf mean", "goal ncf std", "goal ncf"]
    verdict = "PASS" if report["goal"]["pass"] else "FAIL"
    assert lines[-1] == f"goal ncf: {verdict}"
    text = validate.render(report)
    assert "right-censored" in text and "| mean |" in text and "reference: 100:4 101:5 102:- " in text
    validate.write_csv(report, tmp_path / "v.csv")
    rows = (tmp_path / "v.csv").read_text().splitlines()
    assert rows[0] == "statistic,tuned,reference,ratio,ci_low,ci_high" and rows[4].startswith("mean,")
    assert validate.metrics(report)["goal_pass"] == float(report["goal"]["pass"])


def test_seed_sweep_reusing_another_sweeps_id_fails_in_one_line(tmp_path: Path) -> None:
    """A seed sweep under the sweep id of another sweep's FINISHED parent: one line, exit 2, the
    old parent left FINISHED, no run created (it stops before any job)."""
    from t4bench.tracking import sweep_layout

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri, new_store=True)
    exp = client.create_experiment("t4bench-ncf")
    old = sweep_layout.get_or_create_parent(client, exp, "shared", "seeds", "sweep-old", identity="seeds:/elsewhere")
    client.set_terminated(old, status="FINISHED")
    proc = run_cli(
        "--multirun",
        "seed=0,1",
        "tracking.sweep_id=shared",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        store=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.startswith("t4bench: error: sweep id 'shared' belongs to another sweep (seeds:/elsewhere")
    assert proc.stderr.count("\n") == 1
    runs = client.search_runs([exp])
    assert [(r.info.run_id, r.info.status) for r in runs] == [(old, "FINISHED")]


def test_jobs_that_end_at_once_each_count_their_own_place(tmp_path: Path) -> None:
    """A packed sweep's workers count the jobs done from the store: two jobs that both ended
    before either counted are 1/N and 2/N by end time, not 2/N twice."""
    import time

    from t4bench.tracking import names, sweep_layout

    client = mlflow_client(f"sqlite:///{tmp_path / 'mlflow.db'}", new_store=True)
    exp = client.create_experiment("t4bench-ncf")
    since = int(time.time() * 1000)
    parent = sweep_layout.get_or_create_parent(client, exp, "s", "seeds", "sweep-s", identity="seeds:/here")
    children = [client.create_run(exp, tags={names.MLFLOW_PARENT_RUN_ID: parent}).info.run_id for _ in range(3)]
    first, second, running = children
    client.set_terminated(first, end_time=since + 10_000)
    client.set_terminated(second, end_time=since + 20_000)
    assert sweep_layout.ended_children(client, exp, parent, since) == 2  # no run of its own: the count
    assert sweep_layout.ended_children(client, exp, parent, since, second) == 2
    assert sweep_layout.ended_children(client, exp, parent, since, first) == 1
    assert sweep_layout.ended_children(client, exp, parent, since, running) == 2  # not ended: the count
    assert sweep_layout.ended_children(client, exp, parent, since + 60_000, first) == 0  # an earlier attempt's
