"""Where the default run's whole-process time goes, phase by phase, under two source trees.

One `python -m t4bench` process per arm and repeat (the default NCF mini on the CPU, run to its
end), cut at the MLPerf events of the run's mlperf.log:

    launch -> init_start        interpreter, imports, config composition, the command-line checks
    init_start -> run_start     the store (MLflow run), data, model
    run_start -> run_stop       training: the time to train
    run_stop -> exit            summary, closing the run, interpreter exit

Each phase has wall seconds (the events' `time_ms` is wall-clock time) and CPU seconds (the
process's and its children's, read from /proc when the script sees the event, polled every 20 ms;
at exit from wait4's rusage). The host may be shared: CPU seconds are the figure that stays
comparable under load. The run goes with `-X importtime`, whose stderr lines (unbuffered, in
order) are cut at the same moments, so each phase also tells how much of its wall went to imports
(the flag itself adds a little to every import). `--plain` runs without it, as a user does: the
phases are then the figures a user sees, and the import rows are "-". `python -m t4bench --help`
is timed as its own process too.

    python scripts/startup_time.py --before /tmp/before --after . [--repeats 3] [--plain]

Each tree is a checkout root (its src/ is imported, its data/ read; its conf/ comes with it). The arms alternate so
that load on a shared host falls on both alike; the table holds medians over the repeats.
`OMP_NUM_THREADS=1`: threads that spin while waiting would add CPU seconds that depend on the
host's load, not on the code. No other override: this is the default run. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
#: MLPerf events that end a phase, in the order a run writes them
EVENTS = ("init_start", "run_start", "run_stop")
POLL_S = 0.02


@dataclass
class Mark:
    """One moment of a run, seconds since launch: wall, CPU, and the import seconds so far."""

    wall: float
    cpu: float
    #: None: the run went without `-X importtime` (`--plain`)
    imports: float | None


@dataclass
class Run:
    """The marks of one run: at each event in EVENTS, then at exit ("exit")."""

    marks: dict[str, Mark] = field(default_factory=dict)


def _cpu_s(pid: int) -> float:
    """utime + stime + cutime + cstime of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(tick) for tick in fields[11:15]) / TICKS


def _events_ms(log: Path) -> dict[str, float]:
    """Each MLPerf event of EVENTS in `log` (first occurrence) -> its wall-clock time_ms."""
    found: dict[str, float] = {}
    if log.is_file():
        for line in log.read_text().splitlines():
            if ":::MLLOG " in line:
                record = json.loads(line.split(":::MLLOG ", 1)[1])
                if record.get("key") in EVENTS:
                    found.setdefault(record["key"], float(record["time_ms"]))
    return found


def _import_s(stderr: Path) -> float:
    """Seconds spent in outermost imports so far, from `-X importtime` lines in `stderr`."""
    total_us = 0
    for line in stderr.read_text(errors="replace").splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split(":", 1)[1].split("|")
        # nested imports are indented under theirs, whose cumulative figure holds them
        if cumulative.strip().isdigit() and not name.startswith("  "):
            total_us += int(cumulative)
    return total_us / 1e6


def _env(tree: Path) -> dict[str, str]:
    # the tree's data/ (the run's working folder is an empty one)
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "OMP_NUM_THREADS": "1",
        "T4BENCH_DATA_DIR": str(tree / "data"),
    }
    env.pop("MLFLOW_TRACKING_URI", None)  # the default store: mlflow.db in the run's working folder
    return env


def default_run(tree: Path, work: Path, importtime: bool = True) -> Run:
    """The default run of `tree`, in the empty folder `work`, marked at each event and at exit;
    with `-X importtime` when `importtime`."""
    log, stderr = work / "run" / "mlperf.log", work / "stderr.txt"
    flags = ["-X", "importtime"] if importtime else []
    command = [sys.executable, *flags, "-m", "t4bench", f"hydra.run.dir={work / 'run'}"]
    run = Run()
    with stderr.open("w") as err:
        launched = time.time()
        proc = subprocess.Popen(command, cwd=work, env=_env(tree), stdout=subprocess.DEVNULL, stderr=err)
        while True:
            # the process's state first, then the log: an event seen is one the process had written
            done_pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            cpu = usage.ru_utime + usage.ru_stime if done_pid else _cpu_s(proc.pid)
            ended = time.time() - launched
            for key, ms in _events_ms(log).items():
                if key not in run.marks:
                    run.marks[key] = Mark(ms / 1000 - launched, cpu, _import_s(stderr) if importtime else None)
            if done_pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(POLL_S)
    missing = [key for key in EVENTS if key not in run.marks]
    if proc.returncode or missing:
        tail = stderr.read_text(errors="replace").splitlines()
        errors = "\n".join(line for line in tail if not line.startswith("import time:"))[-2000:]
        sys.exit(f"{tree}: exit {proc.returncode}, events missing {missing}: {errors}")
    run.marks["exit"] = Mark(ended, cpu, _import_s(stderr) if importtime else None)
    return run


def help_run(tree: Path) -> tuple[float, float]:
    """(wall s, CPU s) of `python -m t4bench --help` under `tree`."""
    launched = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "t4bench", "--help"], env=_env(tree), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"{tree}: `python -m t4bench --help` exit {proc.returncode}")
    return time.time() - launched, usage.ru_utime + usage.ru_stime


#: a row's (wall s, CPU s) of one run; None where it has none (an import row's CPU, `--plain`)
Cells = tuple[float | None, float | None]

#: table rows: label, the mark that opens the span (None: launch), the mark that closes it
SPANS = (
    ("imports + compose + checks (launch -> init_start)", None, "init_start"),
    ("store + data + model (init_start -> run_start)", "init_start", "run_start"),
    ("train = TTT (run_start -> run_stop)", "run_start", "run_stop"),
    ("summary + exit (run_stop -> exit)", "run_stop", "exit"),
    ("whole process", None, "exit"),
)
IMPORTS = "... of which imports (-X importtime)"
WHOLE_MINUS_TRAIN = "**whole - train** (target <= 3 s wall)"
HELP = "`python -m t4bench --help` (target <= 0.5 s wall)"


def rows(run: Run, help_s: tuple[float, float]) -> dict[str, Cells]:
    """Row label -> (wall s, CPU s or None) of one run; import rows have wall seconds only."""
    zero = Mark(0.0, 0.0, 0.0)
    table: dict[str, Cells] = {}
    for label, opens, closes in SPANS:
        first, last = run.marks[opens] if opens else zero, run.marks[closes]
        table[label] = (last.wall - first.wall, last.cpu - first.cpu)
        # an import row under each span (labels differ by their span's name: a dict key each)
        imported = None if last.imports is None or first.imports is None else last.imports - first.imports
        table[f"{IMPORTS}, {label.split(' (')[0]}"] = (imported, None)
    end, start, stop = run.marks["exit"], run.marks["run_start"], run.marks["run_stop"]
    table[WHOLE_MINUS_TRAIN] = (end.wall - (stop.wall - start.wall), end.cpu - (stop.cpu - start.cpu))
    table[HELP] = help_s
    return table


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(tables: dict[str, list[dict[str, Cells]]]) -> str:
    """Medians of each arm's rows, side by side: wall columns, then CPU columns."""
    arms = list(tables)
    header = ["phase (median s)", *(f"{arm} wall" for arm in arms), *(f"{arm} CPU" for arm in arms)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", *["---:"] * (len(header) - 1)]) + "|"]
    for label in tables[arms[0]][0]:
        walls = [_median([t[label][0] for t in tables[arm]]) for arm in arms]
        cpus = [_median([t[label][1] for t in tables[arm]]) for arm in arms]
        lines.append("| " + " | ".join([label, *map(_cell, walls), *map(_cell, cpus)]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout root of the earlier tree (omit: one arm)")
    parser.add_argument("--after", type=Path, required=True, help="checkout root of the later tree")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="runs without -X importtime (no import rows)")
    args = parser.parse_args()
    trees = {name: path.resolve() for name, path in (("before", args.before), ("after", args.after)) if path}
    for name, tree in trees.items():
        if not (tree / "src" / "t4bench").is_dir():
            parser.exit(2, f"startup_time.py: error: --{name} {tree}: no src/t4bench in it (a checkout root?)\n")
    if args.repeats < 1:
        parser.exit(2, f"startup_time.py: error: --repeats {args.repeats}: must be 1 or more\n")
    tables: dict[str, list[dict[str, Cells]]] = {name: [] for name in trees}
    for repeat in range(1, args.repeats + 1):
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory(prefix="t4bench-startup-") as work:
                table = rows(default_run(tree, Path(work), importtime=not args.plain), help_run(tree))
            tables[name].append(table)
            wall, cpu = table[WHOLE_MINUS_TRAIN]
            print(f"repeat {repeat} {name}: whole - train {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    print(markdown(tables))


if __name__ == "__main__":
    main()
