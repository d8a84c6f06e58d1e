"""`t4bench`: one command for everything t4bench does (the console script of pyproject.toml).

    t4bench [run] [OVERRIDES...]     train one run (the Hydra app; `run` may be left out)
    t4bench sweep [OVERRIDES...]     several runs (Hydra --multirun: seeds, +sweeps=<name>)
    t4bench report [ARGS...]         tables and figures from the MLflow store
    t4bench runs list|repair [ARGS]  MLflow runs left RUNNING by a process that is gone
    t4bench data prepare|check ...   the mini datasets; a reference dataset's files
    t4bench check MLLOG...           MLPerf compliance of a run's mlperf.log
    t4bench validate [ARGS...]       held-out validation of a sweep's best trial

`python -m t4bench ARGS` is the same command (t4bench.__main__ asks `app_argv` first). Each
subcommand calls the module that `python -m t4bench.<module>` runs (those keep working); the
training path goes through `t4bench.__main__.main`, error handling included. `--help` is answered
here from the files in conf/ and sweeps/ (what a user can choose), without importing Hydra, torch,
MLflow or Optuna, so it takes well under a second.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from t4bench import resources

#: conf/ and sweeps/ as shipped in the package (t4bench.resources; the Hydra app reads the same)
CONF = resources.conf_dir()
SWEEPS = resources.sweeps_dir()

SUBCOMMANDS = {
    "run": "train one run (default: `t4bench model=ncf` is `t4bench run model=ncf`)",
    "sweep": "several runs: seeds, or an Optuna search of sweeps/<name>.yaml",
    "report": "report.md/report.html and figures from the runs in an MLflow store",
    "runs": "MLflow runs left RUNNING by a killed process: list them, repair them",
    "data": "the datasets: prepare the mini ones, check a reference one's files",
    "check": "MLPerf compliance of a run's mlperf.log (mlperf-logging's checker, or t4bench's for NCF)",
    "validate": "re-run a sweep's best trial and the reference on held-out seeds",
}


def _names(folder: Path, suffix: str = ".yaml") -> list[str]:
    return sorted(p.name.removesuffix(suffix) for p in folder.glob(f"*{suffix}")) if folder.is_dir() else []


def choices() -> str:
    """What a user chooses, read from conf/ now (a new model or profile shows up by itself)."""
    scales = sorted({*_names(CONF / "scale"), *(n.split("_", 1)[1] for n in _names(CONF / "model_scale") if "_" in n)})
    tuned = [n.removesuffix("_tuned").replace("_", " ") for n in _names(CONF / "model_hparams")]
    lines = [
        f"  model=      {', '.join(_names(CONF / 'model'))}",
        f"  hw=         {', '.join(_names(CONF / 'hw'))}   (hw.count=N GPUs)",
        f"  scale=      {', '.join(scales)}   (mini: minutes on a CPU; reference: MLPerf's size)",
        f"  hparams=    {', '.join(_names(CONF / 'hparams'))}"
        + (f"   (tuned exists for: {', '.join(tuned)})" if tuned else ""),
        f"  framework=  {', '.join(_names(CONF / 'framework'))}",
        f"  input=      {', '.join(_names(CONF / 'input'))}",
        "  seed=N  max_epochs=N  eval_every=EPOCHS  progress=rich|plain|off",
    ]
    return "\n".join(lines)


def _sweeps() -> str:
    return ", ".join(_names(SWEEPS)) or "none"


def top_help() -> str:
    width = max(map(len, SUBCOMMANDS))
    subs = "\n".join(f"  {name:<{width}}  {text}" for name, text in SUBCOMMANDS.items())
    return f"""usage: t4bench [SUBCOMMAND] [ARGS...]

t4bench trains the MLPerf Training v0.5 benchmarks at small scale and measures time to train
(Hydra config, PyTorch/TensorFlow, MLflow tracking, Optuna sweeps).

subcommands (`t4bench SUBCOMMAND --help` for each):
{subs}

choices for run and sweep (KEY=VALUE overrides):
{choices()}

examples:
  t4bench model=ncf                                  one NCF mini run on this machine
  t4bench run model=resnet50 hw=t4 hw.count=2 seed=3
  t4bench sweep model=ncf 'seed=range(0,5)'          five seeds
  t4bench report --out report/                       the study's tables and figures
  t4bench data check imagenet /data/imagenet         a reference dataset where scale=reference reads it
  t4bench runs list                                  runs still RUNNING, and whether their process lives
Runs go to MLFLOW_TRACKING_URI (default sqlite:///mlflow.db here), experiment t4bench-<model>."""


def run_help() -> str:
    return f"""usage: t4bench [run] [KEY=VALUE...] [--cfg job] [--multirun]

Train one benchmark run: time to train from MLPerf run_start to the evaluation that reaches the
model's target, logged to MLflow (experiment t4bench-<model>) with the MLPerf log.

choices:
{choices()}

  --cfg job      print the composed config and exit (nothing runs)
  --hydra-help   Hydra's own options (output dirs, logging)"""


def sweep_help() -> str:
    return f"""usage: t4bench sweep [KEY=VALUE...]

Several runs in one Hydra --multirun: comma lists and range() sweep over values, e.g.
  t4bench sweep model=ncf 'seed=range(0,10)'         seed sweep (summary: olympic mean, std)
  t4bench sweep +sweeps=ncf_tuned                    Optuna search of sweeps/ncf_tuned.yaml
  t4bench sweep +sweeps=ncf_tuned hydra.sweeper.n_jobs=4   four worker processes
Re-running the same command resumes an Optuna sweep (its journal is in the sweep dir).

sweeps/ presets: {_sweeps()}

choices:
{choices()}"""


def _hydra(argv: Sequence[str]) -> int:
    """`python -m t4bench ARGV` in this process: __main__.py runs as `__main__` (its main() with
    its error handling), as Hydra finds the app's config through the `__main__` module's file."""
    import runpy

    sys.argv = [sys.argv[0], *argv]
    runpy.run_module("t4bench", run_name="__main__", alter_sys=True)
    return 0


def _check(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: t4bench check MLLOG...\n\nCheck a run's MLPerf log (`mlperf.log` in its output dir or MLflow "
            "artifacts). The benchmark is read from the log; mlperf-logging's compliance checker runs with the "
            "newest training ruleset that knows it. NCF has none: t4bench's structural checks run instead.\n"
            "One line per log; exit 0 all compliant, 1 some not, 2 bad input."
        )
        return 0 if argv else 2
    from t4bench.compliance import check
    from t4bench.errors import T4BenchError

    status = 0
    for name in argv:
        try:
            ok, line = check(Path(name))
        except T4BenchError as err:
            print(f"t4bench: error: {err}", file=sys.stderr)
            return 2
        print(line)
        status = status or (0 if ok else 1)
    return status


def _report(argv: Sequence[str]) -> int:
    from t4bench.report.__main__ import main

    return main(argv, prog="t4bench report")


def _runs(argv: Sequence[str]) -> int:
    from t4bench.tracking.runs_command import main

    return main(argv, prog="t4bench runs")


def _data(argv: Sequence[str]) -> int:
    from t4bench.data.__main__ import main

    return main(argv, prog="t4bench data")


def _validate(argv: Sequence[str]) -> int:
    from t4bench.sweep.holdout.cli import main

    return main(argv, prog="t4bench validate")


def _wants_help(argv: Sequence[str]) -> bool:
    return any(a in ("-h", "--help") for a in argv)


#: the subcommands that are the Hydra app (the others are argparse commands of their own)
HYDRA_APP = ("run", "sweep")


def route(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The subcommand of `t4bench ARGV` and its arguments: `run` when none is named (the first
    argument is an override or a Hydra flag). A bare first word that is neither is a mistyped
    subcommand: one line, exit 2 (Hydra would call it an override without a value)."""
    args = list(argv)
    if args and args[0] in SUBCOMMANDS:
        return args[0], args[1:]
    first = args[0] if args else ""
    if first and "=" not in first and not first.startswith(("-", "~")):  # `~key` deletes a config key
        print(
            f"t4bench: error: unknown subcommand '{first}' (choose from {', '.join(SUBCOMMANDS)}; "
            "overrides are KEY=VALUE; see t4bench --help)",
            file=sys.stderr,
        )
        sys.exit(2)
    return "run", args


def app_argv(argv: Sequence[str]) -> list[str]:
    """The Hydra app's command line for `t4bench ARGV` (`python -m t4bench ARGV` asks this before
    it loads Hydra): `run`'s arguments, or `--multirun` and `sweep`'s. Everything else (`--help`,
    the other subcommands, a mistyped one) is answered here, and the process exits."""
    if list(argv[:1]) in (["-h"], ["--help"], ["help"]):
        sys.exit(main(argv))
    command, rest = route(argv)
    if command not in HYDRA_APP or _wants_help(rest):
        sys.exit(main(argv))
    return ["--multirun", *rest] if command == "sweep" else rest


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"], ["help"]):
        print(top_help())
        return 0
    command, rest = route(args)
    if command in HYDRA_APP:
        if _wants_help(rest):
            print(run_help() if command == "run" else sweep_help())
            return 0
        return _hydra([command, *rest])  # routed again, to the same place, by __main__'s app_argv
    handlers: dict[str, Callable[[Sequence[str]], int]] = {
        "check": _check,
        "report": _report,
        "runs": _runs,
        "data": _data,
        "validate": _validate,
    }
    return handlers[command](rest)


def console() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console()
