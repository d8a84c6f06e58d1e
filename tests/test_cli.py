"""The command line: progress lines (epoch k/N, evaluation number, ETA), `--help` and `--cfg job`
content and what they import. Their speed is printed by scripts/bench_cli.sh, never asserted."""

from __future__ import annotations

import io
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from conftest import run_cli
from rich.console import Console

from t4bench import progress
from t4bench.progress import ProgressReporter, duration

REPO = Path(__file__).resolve().parents[1]
METRICS = {"train_loss": 0.25, "eval_quality": 0.61, "eval_hr_at_10": 0.61, "throughput": 1234.0, "epoch_time_s": 1.5}


def plain(max_epochs: int | None) -> tuple[ProgressReporter, io.StringIO]:
    reporter = ProgressReporter("plain", max_epochs=max_epochs)
    out = io.StringIO()
    reporter.console = Console(file=out, highlight=False, soft_wrap=True)
    return reporter, out


def test_duration_reads_like_a_clock() -> None:
    assert [duration(s) for s in (0.4, 42, 185, 7620, -3)] == ["0s", "42s", "3m05s", "2h07m", "0s"]


def test_each_evaluation_shows_epoch_of_budget_eval_number_and_an_eta_to_the_budget() -> None:
    reporter, out = plain(max_epochs=5)
    for epoch in (1, 2):
        reporter.epoch_start(epoch, 10)
        time.sleep(0.2)
        reporter.epoch_end(epoch, METRICS, "samples/s")
    first, second = out.getvalue().splitlines()
    assert first.startswith("epoch   1/5  eval 1  train_loss 0.2500  eval_quality 0.6100")
    assert second.startswith("epoch   2/5  eval 2  ")
    assert "throughput 1,234 samples/s  time 1.5s  eta <= " in second and second.endswith("(to epoch 5)")
    # 2 epochs in >= 0.4 s: 3 more take at least 0.6 s (an upper bound: the run may converge first)
    eta = reporter.eta_to_max_epochs(2.0)
    assert eta is not None and 0.6 <= eta < 30


def test_fractional_epochs_and_the_last_epoch() -> None:
    reporter, out = plain(max_epochs=2)
    reporter.epoch_start(1, 5)
    reporter.epoch_end(0.5, METRICS, "samples/s")
    reporter.epoch_start(2, 5)
    reporter.epoch_end(2, METRICS, "samples/s")
    half, last = out.getvalue().splitlines()
    assert half.startswith("epoch 0.5/2  eval 1  ") and "eta <= " in half
    assert last.startswith("epoch   2/2  eval 2  ") and "eta" not in last  # nothing left to estimate


def test_a_resumed_run_paces_from_its_first_epoch_here() -> None:
    reporter, _ = plain(max_epochs=10)
    reporter.epoch_start(6, 10)  # epochs 1-5 ran in an earlier process
    time.sleep(0.1)
    eta = reporter.eta_to_max_epochs(6.0)
    assert eta is not None and 0.4 <= eta < 20  # 4 epochs left at >= 0.1 s each, not 4 x 0.1/6


def test_no_budget_no_fraction_no_eta() -> None:
    reporter, out = plain(max_epochs=None)  # a throughput run (input=synthetic)
    reporter.epoch_start(1, 10)
    reporter.epoch_end(1, METRICS, "samples/s")
    assert out.getvalue().startswith("epoch   1  eval 1  ") and "eta" not in out.getvalue()


def test_plain_logs_get_step_lines_within_long_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    reporter, out = plain(max_epochs=3)
    reporter.epoch_start(2, 400)
    reporter.batch_done(0.5, 900.0, "samples/s", steps=20)
    assert out.getvalue() == ""  # not before PLAIN_STEP_LINE_S seconds of the epoch
    monkeypatch.setattr(progress, "PLAIN_STEP_LINE_S", 0.0)
    time.sleep(0.01)
    reporter.batch_done(0.5, 900.0, "samples/s", steps=100)
    line = out.getvalue().strip()
    assert line.startswith("epoch   2/3  step 100/400  loss 0.5000  900 samples/s  eta ")


def test_bar_takes_the_step_count_the_loop_read_at() -> None:
    reporter = ProgressReporter("bar", max_epochs=4)
    reporter.console = Console(file=io.StringIO(), force_terminal=True, width=120, record=True)
    reporter.epoch_start(3, 100)
    reporter.batch_done(0.7, 500.0, "samples/s", steps=40)  # every LOSS_READ_INTERVAL steps, not each
    reporter.batch_done(0.6, 500.0, "samples/s", steps=60)
    reporter.epoch_end(3, METRICS, "samples/s")
    shown = reporter.console.export_text()
    assert "epoch   3/4 " in shown and " 60/100 loss 0.6000  500 samples/s" in shown and " eta " in shown
    assert "\nepoch   3/4  eval 1  train_loss 0.2500" in shown  # the evaluation line after the bar


#: stderr lists every module the interpreter imported
IMPORTTIME = ("-X", "importtime")


def t4bench(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, python_options=IMPORTTIME, cwd=REPO, timeout=120)


def imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines() if line.startswith("import time")}


def test_python_m_t4bench_help_is_t4bench_help_and_loads_no_hydra() -> None:
    """`python -m t4bench --help` is the `t4bench` command's page (not Hydra's config dump), answered
    before Hydra is imported; Hydra's own page stays behind --hydra-help."""
    proc = t4bench("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == cli("--help").stdout
    assert "model=      gnmt, maskrcnn, ncf, resnet50, ssd, transformer" in proc.stdout
    assert "  data " in proc.stdout and "  runs " in proc.stdout
    assert not imported(proc.stderr) & {"torch", "mlflow", "tensorflow", "optuna", "hydra", "omegaconf"}
    hydras = t4bench("--hydra-help")
    assert hydras.returncode == 0 and hydras.stdout.startswith("Hydra ("), hydras.stdout[:200]


def test_cfg_job_prints_the_composed_config_and_loads_no_framework() -> None:
    proc = t4bench("--cfg", "job", "model=gnmt", "max_epochs=3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "name: gnmt" in proc.stdout and "max_epochs: 3" in proc.stdout
    assert not imported(proc.stderr) & {"torch", "mlflow", "tensorflow", "optuna"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The `t4bench` console script's module (pyproject's [project.scripts] points at it)."""
    return run_cli(*args, module="t4bench.cli", python_options=IMPORTTIME, cwd=REPO, timeout=120)


#: every subcommand, and each one's own subcommands
SUBCOMMANDS = ["", "run", "sweep", "report", "runs", "runs list", "runs repair", "data", "data prepare", "data check"]


@pytest.mark.parametrize("sub", [*SUBCOMMANDS, "check", "validate"])
def test_each_subcommand_help_describes_t4bench_and_loads_no_framework(sub: str) -> None:
    proc = cli(*sub.split(), "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # `run` may be left out
    usage = {"run": "usage: t4bench [run]"}.get(sub, f"usage: t4bench {sub}".rstrip())
    assert proc.stdout.startswith(usage), proc.stdout[:200]
    assert not imported(proc.stderr) & {"torch", "mlflow", "tensorflow", "optuna", "hydra"}
    assert "Hydra's own options" in proc.stdout or "hydra.run.dir" not in proc.stdout  # not Hydra's help page
    if sub in ("", "run", "sweep"):
        # the user's choices, read from conf/ when --help runs
        models = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))
        assert f"model=      {', '.join(models)}" in proc.stdout
        assert "hw=" in proc.stdout and "scale=" in proc.stdout and "hparams=" in proc.stdout
    if sub == "sweep":
        assert all(p.stem in proc.stdout for p in (REPO / "sweeps").glob("*.yaml"))


def test_the_default_subcommand_is_the_hydra_app() -> None:
    proc = cli("--cfg", "job", "model=gnmt", "max_epochs=3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "name: gnmt" in proc.stdout and "max_epochs: 3" in proc.stdout
    bad = cli("run", "model=nosuchmodel")
    assert bad.returncode != 0 and "nosuchmodel" in bad.stderr


def test_check_says_one_line_per_log_and_bad_input_exits_2(tmp_path: Path) -> None:
    missing = cli("check", str(tmp_path / "absent.log"))
    assert missing.returncode == 2
    assert [line for line in missing.stderr.splitlines() if not line.startswith("import time")] == [
        f"t4bench: error: {tmp_path / 'absent.log'}: no such file (give the mlperf.log of a run)"
    ]
    junk = tmp_path / "junk.log"
    junk.write_text("hello\n")
    assert cli("check", str(junk)).returncode == 2


def test_a_sweep_counts_its_jobs_and_ends_with_what_to_run_next(tmp_path: Path) -> None:
    """A real 2-seed sweep through `t4bench sweep`: job i/n with an ETA, the UI address and the
    exact report command (which then runs as printed)."""
    # a relative store: the printed report command finds it from the same folder
    env = {"MLFLOW_TRACKING_URI": "sqlite:///mlflow.db"}
    args = ["sweep", "model=ncf", "seed=range(0,2)", "max_epochs=1", "progress=off", "tracking.sweep_id=talk"]
    proc = run_cli(*args, module="t4bench.cli", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "[t4bench] sweep talk (2 jobs)" in out
    assert "[t4bench] sweep job 1/2 done (" in out and "; sweep ETA " in out
    assert "[t4bench] sweep job 2/2 done (" in out and "sweep done" in out
    assert "/runs?workflowType=machine_learning" in out
    (report,) = [line for line in out.splitlines() if line.startswith("[t4bench] report: ")]
    command = shlex.split(report.removeprefix("[t4bench] report: "))
    assert command[:2] == ["t4bench", "report"]
    made = run_cli(*command[1:], "--no-log", module="t4bench.cli", cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr[-2000:]
    assert (tmp_path / "report" / "talk" / "report.md").exists()


def test_pace_and_job_count() -> None:
    from t4bench.sweep.talk import Pace, count_jobs

    assert count_jobs(["model=ncf", "seed=range(0,5)"]) == 5
    assert count_jobs(["seed=0,1,2", "hw.count=1,2"]) == 6
    assert count_jobs([], {"seed": "range(0,10)"}) == 10
    pace = Pace(4, already_done=1)
    assert pace.job_done("trial").startswith("[t4bench] sweep trial 2/4 done (")
    assert pace.job_done("trial", done=4).endswith("sweep done")


@pytest.mark.parametrize(
    ("module", "args", "expected"),
    [
        ("t4bench.sweep.holdout", ["--seeds"], "argument --seeds: expected one argument"),
        ("t4bench.report", ["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        ("t4bench.runs", [], "the following arguments are required: command"),
        ("t4bench.runs", ["repair", "--stale-intervals", "x"], "argument --stale-intervals: invalid int value: 'x'"),
    ],
)
def test_argparse_errors_of_t4bench_commands_are_one_line(module: str, args: list[str], expected: str) -> None:
    """A usage error of t4bench's own argparse commands: one line naming the command's --help, exit
    2, no usage block (argparse's default) and no traceback."""
    proc = run_cli(*args, module=module, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    prog = f"python -m {module}" + (" repair" if args[:1] == ["repair"] else "")
    assert proc.stderr.splitlines() == [f"t4bench: error: {expected} (see {prog} --help)"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["dta", "prepare"], "t4bench: error: unknown subcommand 'dta' (choose from run, sweep, report, runs, data, "),
        (["--bogus"], "t4bench: error: unrecognized arguments: --bogus (see t4bench run --help"),
        (["run", "--cfg", "everything"], "t4bench: error: argument --cfg/-c: invalid choice: 'everything'"),
        (["data"], "t4bench: error: a command is required: prepare or check (see t4bench data --help)"),
        (["data", "fetch"], "t4bench: error: argument COMMAND: invalid choice: 'fetch' (choose from 'prepare', "),
        (["data", "prepare", "nosuch"], "t4bench: error: unknown dataset(s) nosuch; choose from movielens-100k, "),
        (["data", "check", "imagenet", "absent"], "t4bench: error: check imagenet: absent/train/ not found"),
        (["runs", "lst"], "t4bench: error: argument command: invalid choice: 'lst' (choose from 'list', 'repair')"),
        (
            ["runs", "list", "--tracking-uri", "sqlite:///absent.db"],
            "t4bench: error: tracking.uri=sqlite:///absent.db: ",
        ),
    ],
)
@pytest.mark.parametrize("entry", ["t4bench.cli", "t4bench"])
def test_a_mistyped_command_is_one_line_exit_2_and_creates_nothing(
    entry: str, args: list[str], expected: str, tmp_path: Path
) -> None:
    """`t4bench ...` and `python -m t4bench ...` alike: one error line, exit 2, the folder untouched
    (no Hydra output folder, no store)."""
    proc = run_cli(*args, module=entry, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(expected), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_module_commands_keep_working_beside_t4bench() -> None:
    """`python -m t4bench.<module>` is the same command as `t4bench <subcommand>`, under its own name."""
    for module, sub in (("t4bench.data", "data"), ("t4bench.data.check", "data check"), ("t4bench.runs", "runs")):
        own = run_cli("--help", module=module, cwd=REPO, timeout=120)
        via = cli(*sub.split(), "--help")
        assert own.returncode == via.returncode == 0, own.stderr + via.stderr
        assert own.stdout.startswith(f"usage: python -m {module} ") and via.stdout.startswith(f"usage: t4bench {sub} ")


def test_runs_list_tells_live_runs_from_gone_ones_and_changes_nothing(tmp_path: Path) -> None:
    """Two real runs with heartbeats, one process SIGKILLed: `runs list` names both (alive, gone) and
    leaves them RUNNING; `runs repair` then closes the gone one only."""
    from mlflow.tracking import MlflowClient
    from test_runs import start_victim

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("victims", artifact_location=(tmp_path / "artifacts").as_uri())
    alive, alive_id = start_victim(uri)
    gone, gone_id = start_victim(uri)
    try:
        gone.kill()
        gone.wait()
        listed = cli("runs", "list", "--tracking-uri", uri)
        assert listed.returncode == 0, listed.stderr[-2000:]
        lines = listed.stdout.splitlines()
        (alive_line,) = [line for line in lines if alive_id in line]
        (gone_line,) = [line for line in lines if gone_id in line]
        assert alive_line.endswith(": alive") and f"pid {alive.pid}" in alive_line
        assert f"gone (its process {gone.pid} on " in gone_line
        assert lines[-1] == "2 run(s) RUNNING, 1 with their process gone; `t4bench runs repair` marks those KILLED"
        client = MlflowClient(uri)
        assert {client.get_run(i).info.status for i in (alive_id, gone_id)} == {"RUNNING"}
        repaired = cli("runs", "repair", "--tracking-uri", uri)
        assert repaired.returncode == 0 and "1 stale run(s) marked KILLED" in repaired.stdout, repaired.stderr
        assert (client.get_run(alive_id).info.status, client.get_run(gone_id).info.status) == ("RUNNING", "KILLED")
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.parametrize("flag", ["--cfg=job", "--info"])
def test_a_sweep_with_a_printing_flag_is_one_line(flag: str, tmp_path: Path) -> None:
    """Hydra allows one mode at a time (`--multirun --cfg job` is its traceback): one line, exit 2,
    and nothing made in the working folder."""
    proc = run_cli("sweep", "model=ncf", *flag.split("="), module="t4bench.cli", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot go with a sweep" in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []


# a single run in one process, counting Hydra's compositions: the command-line check composes the
# config as @hydra.main would, and the job starts from that one (t4bench.app_job)
COUNT_COMPOSITIONS = """
import runpy, sys
from hydra._internal.hydra import Hydra
count = [0]
compose = Hydra.compose_config
def counted(self, *args, **kwargs):
    count[0] += 1
    return compose(self, *args, **kwargs)
Hydra.compose_config = counted
sys.argv = ["t4bench", *sys.argv[1:]]
try:
    runpy.run_module("t4bench", run_name="__main__")
finally:
    print("compositions", count[0])
"""


@pytest.mark.slow
def test_a_single_runs_job_config_is_composed_once_and_hydra_records_it_as_its_own(tmp_path: Path) -> None:
    import os
    import sys

    from conftest import DATA_ROOT
    from omegaconf import OmegaConf

    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "T4BENCH_DATA_DIR": str(DATA_ROOT), "OMP_NUM_THREADS": "1"}
    task = ["max_epochs=1", "progress=off", "hw.telemetry.enabled=false", 'tracking.run_name="a b"']
    done = subprocess.run(
        [sys.executable, "-c", COUNT_COMPOSITIONS, *task, "hydra.run.dir=run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # two compositions: the job's config (the check's and the job's), and the schema of its group
    # choices alone, which overrides.check_added_keys reads for `key=value` overrides (whether one
    # replaces a group of settings: Hydra lets a value replace a map); @hydra.main's path made four
    assert done.stdout.strip().splitlines()[-1] == "compositions 2"
    # Hydra's record of the job: what @hydra.main writes for the same command line
    hydra_node = OmegaConf.load(tmp_path / "run" / ".hydra" / "hydra.yaml").hydra
    assert (hydra_node.mode, hydra_node.job.name, hydra_node.runtime.version_base) == ("RUN", "t4bench", "1.3")
    assert list(hydra_node.overrides.hydra) == ["hydra.run.dir=run", "hydra.mode=RUN"]
    assert list(hydra_node.overrides.task) == task
    assert OmegaConf.load(tmp_path / "run" / ".hydra" / "config.yaml").tracking.run_name == "a b"
    assert (tmp_path / "run" / "t4bench.log").exists() and (tmp_path / "run" / "mlperf.log").exists()
