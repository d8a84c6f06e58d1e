"""`t4bench`: one command for everything t4bench does (the console script of pyproject.toml).

    t4bench [run] [OVERRIDES...]     train one run (the Hydra app; `run` may be left out)
    t4bench sweep [OVERRIDES...]     several runs (Hydra --multirun: seeds, +sweeps=<name>)
    t4bench report [ARGS...]         tables and figures from the MLflow store
    t4bench runs [ARGS...]           MLflow runs left RUNNING: list, repair
    t4bench check MLLOG...           MLPerf compliance of a run's mlperf.log
    t4bench validate [ARGS...]       held-out validation of a sweep's best trial

Each subcommand calls the module that `python -m t4bench...` runs (those keep working); the
training path goes through `t4bench.__main__.main`, error handling included. `--help` is answered
here from the files in conf/ and sweeps/ (what a user can choose), without importing Hydra, torch,
MLflow or Optuna, so it takes well under a second.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

#: conf/ and sweeps/ of the checkout (the Hydra app's config_path is ../../conf as well)
ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SWEEPS = ROOT / "sweeps"

SUBCOMMANDS = {
    "run": "train one run (default: `t4bench model=ncf` is `t4bench run model=ncf`)",
    "sweep": "several runs: seeds, or an Optuna search of sweeps/<name>.yaml",
    "report": "report.md/report.html and figures from the runs in an MLflow store",
    "runs": "MLflow runs left RUNNING by a killed process: list them, repair them",
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
    its error handling), as Hydra needs to find conf/ beside it (imported as a module, Hydra
    would look for a Python package `conf` instead)."""
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
    from t4bench.runs.__main__ import main

    return main(argv)


def _validate(argv: Sequence[str]) -> int:
    from t4bench.sweep.holdout.cli import main

    return main(argv)


def _wants_help(argv: Sequence[str]) -> bool:
    return any(a in ("-h", "--help") for a in argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"], ["help"]):
        print(top_help())
        return 0
    command = args[0] if args and args[0] in SUBCOMMANDS else "run"
    rest = args[1:] if args and args[0] == command else args
    if command in ("run", "sweep") and _wants_help(rest):
        print(run_help() if command == "run" else sweep_help())
        return 0
    handlers: dict[str, Callable[[Sequence[str]], int]] = {
        "run": _hydra,
        "sweep": lambda a: _hydra(["--multirun", *a]),
        "check": _check,
        "report": _report,
        "runs": _runs,
        "validate": _validate,
    }
    return handlers[command](rest)


def console() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console()
