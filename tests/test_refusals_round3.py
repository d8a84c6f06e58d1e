"""Refusals that create and change nothing (issue 52): a Slurm sweep with no controller, a run folder
on a full disk, a report's --out on a read-only mount, `n_trials=0` on a study, and every command
given input that makes it refuse or find nothing. Real processes, real files and stores; the
working folder is listed (with each file's hash) before and after."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA_ROOT, can_unshare_mounts, run_cli

from t4bench.tracking.client import mlflow_client

ERROR = "t4bench: error: "
SWEEP = ("sweep", "model=ncf", "seed=range(0,2)", "max_epochs=1")
SLURM = "hydra/launcher=submitit_slurm"


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder` with its content's hash (folders as such)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


def mlflow_store(path: Path, runs: int = 0) -> str:
    """A real MLflow SQLite store at `path` with `runs` finished runs; its URI."""
    uri = f"sqlite:///{path}"
    client = mlflow_client(uri, new_store=True)
    experiment = client.create_experiment("t4bench-ncf", artifact_location=(path.parent / "artifacts").as_uri())
    for _ in range(runs):
        client.set_terminated(client.create_run(experiment).info.run_id)
    return uri


def one_refusal(proc: subprocess.CompletedProcess[str], starts: str = ERROR) -> str:
    """The process's one error line (exit 2, nothing else on stderr but MLflow's own log lines)."""
    lines = [line for line in proc.stderr.splitlines() if " INFO mlflow." not in line]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert lines[0].startswith(starts), lines[0]
    return lines[0]


needs_data = pytest.mark.skipif(not (DATA_ROOT / "movielens-100k").is_dir(), reason="movielens-100k not prepared")
needs_mounts = pytest.mark.skipif(not can_unshare_mounts(), reason="needs root and `unshare -m` for a private mount")
needs_slurm_clients = pytest.mark.skipif(
    shutil.which("scontrol") is None or shutil.which("sbatch") is None, reason="Slurm's client commands not here"
)


def dead_controller(folder: Path) -> Path:
    """A slurm.conf whose controller (a free port on this host) is not running."""
    conf = folder / "slurm.conf"
    conf.write_text(
        "ClusterName=dead\nSlurmctldHost=localhost\nSlurmctldPort=6999\nAuthType=auth/none\nCredType=cred/none\n"
        "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=debug Nodes=localhost Default=YES State=UP\n"
    )
    return conf


# ---- a Slurm sweep with no controller ------------------------------------------------------


@needs_data
@pytest.mark.parametrize("where", ["no sbatch on PATH", "controller down", "SLURM_CONF not a file"])
def test_a_slurm_sweep_without_a_controller_makes_nothing(where: str, tmp_path: Path) -> None:
    """One line naming the problem in Slurm's words, exit 2, before the parent run, the store or
    the sweep folder exist."""
    work = tmp_path / "work"
    work.mkdir()
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}"}
    if where == "no sbatch on PATH":
        env["PATH"] = str(Path(sys.executable).parent)
        expected = "sbatch is not on PATH"
    elif where == "controller down":
        if shutil.which("scontrol") is None:
            pytest.skip("scontrol not here")
        env["SLURM_CONF"] = str(dead_controller(tmp_path))
        expected = "no Slurm controller answers (scontrol ping: Slurmctld(primary) at "
    else:
        if shutil.which("sbatch") is None:
            pytest.skip("sbatch not here")
        env["SLURM_CONF"] = str(tmp_path / "absent.conf")
        expected = f"SLURM_CONF={tmp_path / 'absent.conf'} is not a file"
    proc = run_cli(*SWEEP, SLURM, cwd=work, env=env, timeout=120)
    line = one_refusal(proc, f"{ERROR}{SLURM}: ")
    assert expected in line and line.endswith("nothing was submitted (SLURM_CONF names the cluster; docs/cluster.md)")
    assert snapshot(work) == {}


@needs_slurm_clients
def test_an_sbatch_that_refuses_later_is_one_line(tmp_path: Path) -> None:
    """Past the preflight (a controller gone between the check and the submission): submitit echoes
    sbatch's stderr before it raises; t4bench's launcher holds that back and says it in its line."""
    from submitit.core.utils import CommandFunction, FailedJobError

    from hydra_plugins.t4bench_slurm.launcher import _SbatchWordsHeld, _submit_failed
    from t4bench.preflight.slurm import shorten

    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    env = {**os.environ, "SLURM_CONF": str(dead_controller(tmp_path))}
    # a stream of the test's own, not pytest's capture of fd 2 (which a worker keeps for its later tests)
    real = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    held = _SbatchWordsHeld(real)
    with contextlib.redirect_stderr(held), pytest.raises(FailedJobError) as failed:
        CommandFunction(["sbatch", str(script)], verbose=False, env=env)()
    print("after", file=held)  # anything else still goes through
    held.flush()
    assert real.buffer.getvalue() == b"after\n"  # type: ignore[attr-defined]
    assert (held.isatty(), held.encoding) == (real.isatty(), real.encoding)
    assert _submit_failed(failed.value)
    assert (
        shorten(str(failed.value))
        == "Batch job submission failed: Unable to contact slurm controller (connect failure)"
    )


# ---- a full disk, a read-only --out --------------------------------------------------------


@needs_data
@needs_mounts
def test_a_run_folder_on_a_full_disk_is_refused_before_it_exists(tmp_path: Path) -> None:
    """hydra.run.dir on a 1 MB tmpfs: t4bench's one line (no Hydra "Error executing job" line), exit
    2, nothing on that disk and no store made."""
    full = tmp_path / "full"
    full.mkdir()
    command = [sys.executable, "-m", "t4bench", "max_epochs=1", f"hydra.run.dir={full / 'out'}"]
    script = f"mount -t tmpfs -o size=1m tmpfs {full} && {' '.join(command)}; echo rc=$? >&2; ls -A {full}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    *errors, rc = proc.stderr.splitlines()
    assert rc == "rc=2" and errors == [
        f"{ERROR}hydra.run.dir={full / 'out'}: only 1.0 MB free on the filesystem of {full} (a run needs up to "
        "16 MB); Hydra writes the run's outputs there"
    ], proc.stderr
    assert proc.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["full"]


@needs_data
def test_a_disk_that_fills_during_the_run_is_one_line(tmp_path: Path) -> None:
    """A write inside the run that meets a full device (a callback copying a file to /dev/full, whose
    writes fail with ENOSPC): t4bench's line alone, without Hydra's "Error executing job ..." first."""
    (tmp_path / "note.txt").write_text("a few bytes")
    fill = ["+callbacks.fill._target_=shutil.copyfile", f"+callbacks.fill.src={tmp_path / 'note.txt'}"]
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    proc = run_cli(
        "max_epochs=1",
        f"hydra.run.dir={tmp_path / 'out'}",
        *fill,
        "+callbacks.fill.dst=/dev/full",
        cwd=tmp_path,
        env=env,
    )
    assert one_refusal(proc) == (
        f"{ERROR}the disk is full (tracking store or run folder); free space and run "
        "`python -m t4bench.runs repair` to close a run left RUNNING"
    )


@needs_mounts
@pytest.mark.parametrize("command", ["report", "report export"])
def test_report_out_on_a_read_only_mount(command: str, tmp_path: Path) -> None:
    """--out under a read-only bind mount: one line, exit 2 (was 1), the store byte-identical."""
    uri = mlflow_store(tmp_path / "mlflow.db", runs=1)
    (tmp_path / "ro").mkdir()
    before = snapshot(tmp_path)
    argv = [sys.executable, "-m", "t4bench", *command.split(), "--tracking-uri", uri, "--out", "ro/report"]
    script = f"mount --bind ro ro && mount -o remount,ro,bind ro && {' '.join(argv)}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert one_refusal(proc) == f"{ERROR}--out ro/report: ro is not writable (Read-only file system)"
    assert snapshot(tmp_path) == before


# ---- n_trials=0 --------------------------------------------------------------------------------

OPTUNA = ("sweep", "hydra/sweeper=optuna", "model.optimizer.lr=interval(0.001,0.002)", "hydra.sweeper.n_trials=0")


def finished_study(sweep: Path) -> None:
    """A study as a one-trial sweep leaves it (the name and direction the sweeper uses)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    sweep.mkdir()
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(sweep / "optuna.journal")))
    study = optuna.create_study(study_name="ncf-optuna", storage=storage, direction="minimize")
    lr = optuna.distributions.FloatDistribution(0.001, 0.002)
    study.add_trial(
        optuna.trial.create_trial(
            params={"model.optimizer.lr": 0.0015}, distributions={"model.optimizer.lr": lr}, value=3.0
        )
    )


@needs_data
def test_zero_trials_reads_the_study_and_writes_nothing(tmp_path: Path) -> None:
    """The study's status printed, exit 0; the journal, the store and the folder byte for byte as
    they were (no parent run, lock file or summary file)."""
    uri = mlflow_store(tmp_path / "mlflow.db")
    finished_study(tmp_path / "sweep")
    before = snapshot(tmp_path)
    proc = run_cli(
        *OPTUNA, f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path, env={"MLFLOW_TRACKING_URI": uri}, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 complete, 0 pruned, 0 failed, 0 running" in proc.stdout
    assert "best trial 0: mean epochs_to_converge = 3.0000 with {'model.optimizer.lr': 0.0015}" in proc.stdout
    assert snapshot(tmp_path) == before


@needs_data
def test_zero_trials_without_a_study_is_refused(tmp_path: Path) -> None:
    uri = mlflow_store(tmp_path / "mlflow.db")
    before = snapshot(tmp_path)
    proc = run_cli(
        *OPTUNA, f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path, env={"MLFLOW_TRACKING_URI": uri}, timeout=180
    )
    line = one_refusal(proc, f"{ERROR}hydra.sweeper.n_trials=0 shows a study's status, and journal:")
    assert line.endswith("holds no study 'ncf-optuna'; give n_trials >= 1 to start it")
    assert snapshot(tmp_path) == before


# ---- every command, refusing or finding nothing --------------------------------------------

#: (arguments, exit status, the start of the last stderr line); `STORE` is a real, empty MLflow store
STORE = "sqlite:///store.db"
COMMANDS = [
    (["report"], 2, f"{ERROR}no tracking store at "),
    (["report", "export"], 2, f"{ERROR}no tracking store at "),
    (["report", "--tracking-uri", STORE, "--out", "rep"], 2, f"{ERROR}no runs match"),
    (["report", "export", "--tracking-uri", STORE, "--out", "res"], 2, f"{ERROR}no runs match"),
    (["runs", "list"], 2, f"{ERROR}tracking.uri=sqlite:///"),
    (["runs", "repair"], 2, f"{ERROR}tracking.uri=sqlite:///"),
    (["runs", "list", "--tracking-uri", STORE], 0, ""),
    (["runs", "repair", "--tracking-uri", STORE], 0, ""),
    (["runs", "list", "--tracking-uri", STORE, "--experiment", "nope"], 2, f"{ERROR}--experiment nope: no such"),
    (["data", "check", "imagenet", "missing"], 2, f"{ERROR}check imagenet: missing/train/ not found"),
    (["data", "check", "ml-20m", "missing"], 2, f"{ERROR}check ml-20m: "),
    (["data", "prepare", "wmt16", "--from", "missing", "--out", "out"], 2, f"{ERROR}prepare wmt16: "),
    (["check", "missing.log"], 2, f"{ERROR}missing.log: no such file"),
    (["validate", "--sweep-dir", "missing", "--seeds", "100"], 2, f"{ERROR}no study journal at missing/"),
    (["sweep", "seed=range(5,1)"], 2, f"{ERROR}seed=range(5,1): sweeps nothing"),
    (["run", "model=nope"], 2, f"{ERROR}model=nope: no such option"),
]


@pytest.mark.parametrize(("args", "status", "last"), COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_a_command_that_refuses_or_finds_nothing_creates_nothing(
    args: list[str], status: int, last: str, tmp_path: Path
) -> None:
    mlflow_store(tmp_path / "store.db")
    before = snapshot(tmp_path)
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}  # absent: nothing may make it
    proc = run_cli(*args, cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == status, proc.stdout[-2000:] + proc.stderr[-2000:]
    if last:
        assert proc.stderr.splitlines()[-1].startswith(last), proc.stderr[-2000:]
    assert snapshot(tmp_path) == before


def test_one_line_tells_a_place_from_a_failed_download(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An OSError of a file (here: a folder asked under a regular file) is the user's place to fix:
    exit 2, like bad input; one without a file (a download refused) is a command that failed: 1."""
    import urllib.request

    from t4bench.errors import one_line

    (tmp_path / "afile").write_text("")
    assert one_line("out", lambda: (tmp_path / "afile" / "sub").mkdir()) == (None, 2)
    assert one_line("get", lambda: urllib.request.urlopen("http://127.0.0.1:9", timeout=5)) == (None, 1)
    place, download = capsys.readouterr().err.splitlines()
    assert place == f"{ERROR}out: Not a directory: {tmp_path / 'afile' / 'sub'}"
    assert download.startswith(f"{ERROR}get: <urlopen error [Errno 111] Connection refused>")
