"""Everything the user types, checked before anything exists (issue 25): Hydra's composition
errors, `+` keys no code reads, config values, output folders and sweep ranges, in single runs
and --multirun. Each case is a real `python -m t4bench` process against a real MLflow store that
holds a finished run: one `t4bench: error:` line, exit 2, and the store and the folder exactly as
they were (no run, no output or sweep directory, no Optuna journal). Each takes about a second."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import can_unshare_mounts

from t4bench.errors import T4BenchError
from t4bench.preflight import command_line, overrides
from t4bench.tracking.client import mlflow_client

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real MLflow SQLite store with one FINISHED run (made once for the module)."""
    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    client = mlflow_client(f"sqlite:///{db}", new_store=True)
    run = client.create_run(client.create_experiment("t4bench-ncf"))
    client.log_metric(run.info.run_id, "hr_at_10", 0.61)
    client.set_terminated(run.info.run_id, "FINISHED")
    return db


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` with its content's hash: the store and anything made beside it."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def run_cli(
    folder: Path, store: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    db = folder / "mlflow.db"
    db.write_bytes(store.read_bytes())
    full_env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{db}",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    command = [sys.executable, "-m", "t4bench", "progress=plain", "hw.telemetry.enabled=false", *args]
    return subprocess.run(command, cwd=folder, env=full_env, capture_output=True, text=True, timeout=120)


def refused(tmp_path: Path, store: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a bad command line; assert one error line, exit 2, nothing created or changed."""
    (tmp_path / "afile").write_text("a regular file\n")
    proc = run_cli(tmp_path, store, *args, env=env)
    before = {
        "afile": hashlib.sha256(b"a regular file\n").hexdigest(),
        "mlflow.db": hashlib.sha256(store.read_bytes()).hexdigest(),
    }
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("t4bench: error: "), proc.stderr[-3000:]
    assert snapshot(tmp_path) == before  # the store byte for byte; no outputs/, multirun/, journal
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "mlflow.db"]
    return lines[0].removeprefix("t4bench: error: ")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["model=nope"], "model=nope: no such option; choose one of gnmt, maskrcnn, ncf, resnet50, ssd, transformer"),
        (["hw=h2000"], "hw=h2000: no such option (did you mean h200?); choose one of a100, auto, cpu, h100, h200"),
        # the perf group was optional: a misspelt profile ran the plain eager loop without a word
        (["perf=h20"], "perf=h20: no such option (did you mean h200?); choose one of a100, auto, cpu, default, h100"),
        (["model.lrr=0.1"], "model.lrr=0.1: no such key; did you mean model.optimizer.lr?"),
        (["model.optimzer.lr=0.1"], "model.optimzer.lr=0.1: no such key; did you mean model.optimizer.lr?"),
        (["+model.lrr=0.1"], "+model.lrr=0.1: no t4bench code reads model.lrr; did you mean model.optimizer.lr?"),
        (["+model.optimizer.lr=0.1"], "model.optimizer.lr is in the config already; set it without the +"),
        (["tracking.tags.note=x"], "tracking.tags.note=x: tracking.tags.note is not in the config; add it with +"),
        (["model.optimizer=3"], "model.optimizer=3: model.optimizer is a group of settings (name, lr,"),
        (["hydra.job.chdir=maybe"], "hydra.job.chdir=maybe: Value 'maybe' is not a valid bool"),
        (["seed=[1,2"], "seed=[1,2: cannot be parsed"),
        (["eval_every=0"], "eval_every=0: must be a finite number > 0 and <= 1"),
        (["eval_every=0.3"], "eval_every=0.3: must be 1/k of an epoch"),
        (
            ["+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch", "+callbacks.fail.epok=1"],
            "+callbacks.fail.epok=1: t4bench.faults.RaiseAtEpoch takes no argument 'epok'",
        ),
        (["hydra.run.dir=afile/run"], "hydra.run.dir=afile/run: "),
        (["hw=v100-sxm2"], "hw=v100-sxm2 asks for 1x"),
    ],
)
def test_single_run_refused_before_anything_exists(tmp_path: Path, store: Path, args: list[str], expected: str) -> None:
    line = refused(tmp_path, store, *args)
    assert expected in line, line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["model.optimizer.lr=interval(1,0)"], "model.optimizer.lr=interval(1,0): empty or inverted interval"),
        (["model.optimizer.lr=tag(log,interval(0,1))"], "a log scale needs a low end > 0"),
        (
            ["model.batch_size=choice(64)"],
            "model.batch_size=choice(64): one option is no search; set model.batch_size=64",
        ),
        (["model.lrr=interval(0.1,1)"], "model.lrr=interval(0.1,1): no such key; did you mean model.optimizer.lr?"),
        (["model.optimizer.lr=interval(-1,1)"], "model.optimizer.lr=-1.0: must be a finite number > 0"),
        (["seed=range(0,2)", "eval_every=0"], "eval_every=0: must be a finite number > 0 and <= 1"),
        (["+sweeps=ncf_robust", "model.lrr=3"], "model.lrr=3: no such key; did you mean model.optimizer.lr?"),
        (
            ["+sweeps=ncf_robust", "hydra.sweeper.storage=redis://host/0"],
            "hydra.sweeper.storage=redis://host/0: unknown storage",
        ),
        (["+sweeps=ncf_robust", "hydra.sweep.dir=afile/sweep"], "hydra.sweep.dir=afile/sweep: "),
    ],
)
def test_multirun_refused_before_the_study_exists(tmp_path: Path, store: Path, args: list[str], expected: str) -> None:
    sweeper = (
        [] if any(a.startswith("+sweeps=") for a in args) else ["hydra/sweeper=optuna", "hydra.sweeper.n_trials=1"]
    )
    line = refused(tmp_path, store, "--multirun", *sweeper, *args)
    assert expected in line, line


def test_ratings_without_a_column_refused_before_the_run_folder(tmp_path: Path, store: Path) -> None:
    data = tmp_path.parent / f"{tmp_path.name}-data"
    (data / "movielens-100k").mkdir(parents=True)
    ratings = data / "movielens-100k" / "ml-100k.inter"
    ratings.write_text("user_id:token\titem_id:token\n1\t2\n")
    line = refused(tmp_path, store, "max_epochs=1", env={"T4BENCH_DATA_DIR": str(data)})
    assert line.startswith(f"{ratings}: no column timestamp:float"), line


def test_multirun_with_a_dead_tracking_server(tmp_path: Path, store: Path) -> None:
    line = refused(tmp_path, store, "--multirun", "seed=0,1", env={"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"})
    assert line.startswith("tracking.uri=http://127.0.0.1:9: no MLflow server answers"), line


# ------------------------------------------------------------------ in-process: what stays legitimate


@pytest.mark.parametrize(
    "args",
    [
        ["+tracking.tags.note=baseline", "+tracking.tags.check=1"],
        ["+callbacks.fail._target_=t4bench.faults.RaiseAtEpoch", "+callbacks.fail.epoch=1"],
        ["hw.count=1", "+hw.rank_memory_gb=2"],
        ["model=ncf", "+model.optimizer.clip_grad_norm=1.0"],
        ["++tracking.run_id=abc", "++tracking.experiment=x"],
        ["model=ncf", "+perf.models.ncf.compile=true"],
        ["--multirun", "hydra/sweeper=optuna", "model.optimizer.lr=tag(log,interval(1e-4,1e-2))", "seed=range(0,3)"],
    ],
)
def test_legitimate_command_lines_pass(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    command_line.check(args)
    assert list(tmp_path.iterdir()) == []  # checked, nothing made


@pytest.mark.parametrize("sweep", sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml")))
def test_every_shipped_sweep_passes(sweep: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    command_line.check(["--multirun", f"+sweeps={sweep}"])


def test_a_checked_single_run_is_not_checked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner skips its checks for the task overrides the command-line check passed (the value it
    returns carries the RunEnvironment made then); any other, or a --multirun's, it checks itself."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    checked = command_line.check(["max_epochs=1", "seed=3", f"hydra.run.dir={tmp_path / 'run'}"])
    assert checked is not None
    env = checked.env_for(["max_epochs=1", "seed=3"])  # hydra.* overrides are not the task's
    assert env is not None and env.world_size == 1
    assert checked.env_for(["max_epochs=2", "seed=3"]) is None
    assert checked.env_for([]) is None
    assert command_line.check(["--multirun", "max_epochs=1", "seed=3,4"]) is None


def test_closest_key() -> None:
    keys = ["model", "model.optimizer", "model.optimizer.lr", "model.batch_size", "tracking.tags", "seed"]
    assert overrides.closest("model.lrr", keys) == "model.optimizer.lr"
    assert overrides.closest("model.bach_size", keys) == "model.batch_size"
    assert overrides.closest("zzz.qqq", keys) is None


def test_unread_plus_key_in_process() -> None:
    with pytest.raises(T4BenchError, match=r"\+model.lrr=1: no t4bench code reads model.lrr"):
        command_line.check(["+model.lrr=1"])


@pytest.mark.skipif(not can_unshare_mounts(), reason="needs root and `unshare -m` (a private mount namespace)")
def test_run_dir_on_a_read_only_mount(tmp_path: Path) -> None:
    """hydra.run.dir on a read-only bind mount (root ignores permission bits): one line, nothing written."""
    folder = tmp_path / "ro"
    folder.mkdir()
    command = f"{sys.executable} -m t4bench progress=plain hydra.run.dir={folder}/run"
    script = f"mount --bind -o ro {folder} {folder} && {command}"
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == (
        f"t4bench: error: hydra.run.dir={folder}/run: {folder} is not writable (Read-only file system); "
        "Hydra writes the run's outputs there"
    )
    assert list(folder.iterdir()) == [] and not (tmp_path / "mlflow.db").exists()
