"""What the hardware's perf profile buys on the GPU at hand: per model, the synthetic throughput of
`python -m t4bench hw=auto` (the options conf/perf/<hw>.yaml sets for that model, the profile
hw=auto picks) against the same command with `perf=default` (the plain eager loop), in one call.

    python perf/profile_default.py                                  # six models, hw=auto
    python perf/profile_default.py --models ncf resnet50 --steps 30 --warmup 6
    python perf/profile_default.py --smoke                          # CPU, tiny: the path CI runs

Each arm is a fresh `python -m t4bench input=synthetic` process (gpu_suite.harness_run: its
avg_throughput and train_loss read back from MLflow), `--repeats` times, alternating which arm goes
first; figures are the medians. A run whose loss is not finite gives NaN, never a throughput, and
its ratio is NaN. The profile arm's run tags name the profile it used (t4bench.perf.profile) and,
where that profile sets nothing for the model, say so (t4bench.perf.profile_note): both arms are
then the same settings and the ratio is run-to-run spread. Writes a CSV (date, GPU, commit, command,
unit, both figures, ratio; perf/results/profile_default_<gpu>_<date>.csv or --csv) after every
model, so a SIGTERM (a time limit) keeps the models finished; prints a markdown table.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from gpu_suite import MODELS, harness_run, median_figure, median_or_nan
from harness_overhead import synthetic_config
from model_rows import cut_short, each_model, results_csv

from t4bench import hardware
from t4bench.benchmark import benchmark_class
from t4bench.pytorch import perf_profiles
from t4bench.tracking import names
from t4bench.tracking.tags import run_tags

REPO = Path(__file__).resolve().parents[1]
#: the MLflow store harness_overhead.t4bench_metrics gives every run under the work folder
STORE = "harness.db"
#: the tag that finds one arm's run in that store
ARM_TAG = "profile_default_arm"
#: what the profile arm's run says about its options (t4bench.pytorch.perf.PerfOptions.tags)
PROFILE_TAG = f"{names.PERF_PREFIX}profile"
PROFILE_NOTE_TAG = f"{names.PERF_PREFIX}profile_note"
#: --smoke: mini-size models on the CPU, a few steps (tests/test_profile_default.py)
SMOKE = {"hw": "cpu", "steps": 2, "warmup": 1, "batch": 64, "models": ["ncf"]}
#: --smoke's sizes: mini models, but NCF at its reference tables (its mini config takes its table
#: sizes from the dataset, which synthetic mode does not read; reference NCF is small on a CPU)
SMOKE_MODEL = {"ncf": []}
SMOKE_SIZE = ["scale=mini"]


@dataclass
class ProfileRow:
    date: str
    gpu: str
    git_commit: str
    model: str
    #: the conf/hw profile the runs trained on (hw=auto's pick) and the perf profile the profile
    #: arm's run used, as its t4bench.perf.profile tag says
    hw: str
    profile: str
    #: what the profile sets for the model ("" where it sets nothing: see notes)
    profile_options: str
    unit: str
    default_throughput: float
    profile_throughput: float
    ratio: float
    default_loss: float
    profile_loss: float
    batch: int
    steps: int
    warmup: int
    repeats: int
    torch: str
    #: the profile arm's command; the baseline is the same with perf=default
    command: str
    notes: str = ""


def git_commit() -> str:
    """GIT_COMMIT, else HEAD with "+changed" where src/ or conf/ differ from it (as
    scripts/gpu/smoke.sh records it: a GPU machine's copy of .git can be older than its tree)."""
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown"
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "conf"], cwd=REPO).returncode != 0
    return head.stdout.strip() + ("+changed" if changed else "")


def hw_and_gpu(hw: str) -> tuple[str, str]:
    """(the conf/hw profile the runs train on, the GPU's name or "cpu"); hw=auto asks NVML as the
    runs will."""
    found = hardware.detect()
    picked = hardware.profile_for(found) if hw == "auto" else hw
    return picked, ("cpu" if picked == "cpu" or not found.gpus else found.gpus[0])


def arm_tags(out: Path, mark: str) -> dict[str, str]:
    """The tags of the run an arm tagged with `mark` (empty when it left no run)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out}/{STORE}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.{ARM_TAG} = '{mark}'")
    return run_tags(client, runs[0]) if runs else {}


def run_arm(model: str, overrides: list[str], out: Path, notes: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """One fresh t4bench process: its metrics and its run's tags; a failed run (its error in
    `notes`) has no tags and NaN figures."""
    mark, errors = uuid.uuid4().hex, len(notes)
    # the mark first: harness_run names an arm by its last override (hw=... or perf=default)
    metrics = harness_run(model, [f"+tracking.tags.{ARM_TAG}={mark}", *overrides], out, notes)
    return {**metrics, "failed": float(len(notes) > errors)}, arm_tags(out, mark)


def arm_figure(arm: str, runs: list[dict[str, float]], notes: list[str]) -> tuple[float, float]:
    """(median throughput, median loss) of an arm's runs: NaN, and a note, where a run that
    finished had a loss that is not finite (a failed run has its own note already)."""
    losses = [run["train_loss"] for run in runs]
    if any(not run["failed"] and not math.isfinite(run["train_loss"]) for run in runs):
        notes.append(f"{arm} arm: loss not finite ({', '.join(f'{loss:.4g}' for loss in losses)}): no figure")
    return median_figure([run["avg_throughput"] for run in runs], losses), median_or_nan(losses)


def measure(model: str, args: argparse.Namespace, out: Path, gpu: str, commit: str) -> ProfileRow:
    profile_arm = [f"model={model}", f"input.steps={args.steps}", f"input.warmup_steps={args.warmup}"]
    if args.batch is not None:
        profile_arm.append(f"model.batch_size={args.batch}")
    smoke = SMOKE_MODEL.get(model, SMOKE_SIZE) if args.smoke else []
    profile_arm += [*args.overrides, *smoke, f"hw={args.hw}"]
    arms = {"profile": profile_arm, "default": [*profile_arm, "perf=default"]}
    cfg = synthetic_config(profile_arm, out)
    chosen = perf_profiles.chosen(cfg, args.picked_hw)
    notes: list[str] = []
    runs: dict[str, list[dict[str, float]]] = {"profile": [], "default": []}
    tags: dict[str, str] = {}
    for repeat in range(args.repeats):
        # alternate which arm goes first, so neither always meets the GPU as the other left it
        for arm in ("profile", "default") if repeat % 2 == 0 else ("default", "profile"):
            metrics, arm_run_tags = run_arm(model, arms[arm], out, notes)
            runs[arm].append(metrics)
            if arm == "profile":
                tags = arm_run_tags
    figures = {arm: arm_figure(arm, arm_runs, notes) for arm, arm_runs in runs.items()}
    note = tags.get(PROFILE_NOTE_TAG, "")
    if note:
        notes.append(f"{note}: both arms ran the same settings (the ratio is run-to-run spread)")
    return ProfileRow(
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        gpu=gpu,
        git_commit=commit,
        model=model,
        hw=args.picked_hw,
        profile=tags.get(PROFILE_TAG, f"{chosen.profile} (not in the run's tags)"),
        profile_options=" ".join(f"{key}={value}" for key, value in sorted(chosen.options.items())),
        unit=benchmark_class(cfg).throughput_unit,
        default_throughput=figures["default"][0],
        profile_throughput=figures["profile"][0],
        ratio=figures["profile"][0] / figures["default"][0] if figures["default"][0] > 0 else math.nan,
        default_loss=figures["default"][1],
        profile_loss=figures["profile"][1],
        batch=int(cfg.model.batch_size),
        steps=args.steps,
        warmup=args.warmup,
        repeats=args.repeats,
        torch=torch.__version__,
        command=" ".join(["python -m t4bench input=synthetic", *profile_arm]),
        notes="; ".join(notes),
    )


def write_csv(rows: list[ProfileRow], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def markdown(rows: list[ProfileRow]) -> str:
    """The README's table: one line a model, NaN figures as "NaN (loss not finite)"."""

    def rate(value: float) -> str:
        return "NaN (loss not finite or run failed)" if math.isnan(value) else f"{value:,.0f}"

    head = rows[0]
    lines = [
        f"{head.gpu}, commit {head.git_commit}, {head.date}, torch {head.torch}, {head.steps} timed steps after "
        f"{head.warmup}, {head.repeats} run(s) an arm",
        "",
        "| model | unit | perf=default | profile (hw's pick) | with the profile | profile / default |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for row in rows:
        ratio = "-" if math.isnan(row.ratio) else f"{row.ratio:.3f}"
        lines.append(
            f"| {row.model} | {row.unit} | {rate(row.default_throughput)} | {row.profile} | "
            f"{rate(row.profile_throughput)} | {ratio} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=None, help="default: all six (--smoke: ncf)")
    parser.add_argument("--hw", default=None, help="hw profile of both arms (default: auto; --smoke: cpu)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps a run (default 30; --smoke 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed warm-up steps (default 6; --smoke 1)")
    parser.add_argument("--batch", type=int, default=None, help="per-GPU batch (default: each model's reference)")
    parser.add_argument("--repeats", type=int, default=1, help="runs an arm, alternating which goes first")
    parser.add_argument("--csv", type=Path, default=None, help="default: perf/results/profile_default_<gpu>_<date>.csv")
    parser.add_argument("--smoke", action="store_true", help="tiny CPU run of the same path (hw=cpu, mini models)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for both arms")
    args = parser.parse_args(argv)
    defaults = SMOKE if args.smoke else {"hw": "auto", "steps": 30, "warmup": 6, "batch": None, "models": list(MODELS)}
    for key in ("hw", "steps", "warmup", "batch", "models"):
        if getattr(args, key) is None:
            setattr(args, key, defaults[key])
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1 or (args.batch is not None and args.batch < 1):
        parser.error("--steps, --repeats and --batch must be >= 1, --warmup >= 0")
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, cut_short)
    args.picked_hw, gpu = hw_and_gpu(args.hw)
    commit = git_commit()
    path = args.csv or results_csv("profile_default", gpu)
    print(f"{gpu} (hw={args.hw}: {args.picked_hw}), commit {commit}, torch {torch.__version__}", flush=True)
    rows = each_model(
        args.models,
        "PROFILE_DEFAULT_WORK",
        lambda model, out: measure(model, args, out, gpu, commit),
        lambda rows: write_csv(rows, path),
    )
    for row in rows:
        print(f"  {row.model}: {row.profile} / perf=default {row.ratio:.3f}", flush=True)
    if not rows:
        sys.exit("profile_default: cut short by SIGTERM before any model finished; nothing written")
    print(f"wrote {path}\n")
    print(markdown(rows))
    if len(rows) < len(args.models):
        sys.exit(f"profile_default: cut short by SIGTERM: {len(rows)} of {len(args.models)} models written")


if __name__ == "__main__":
    main(sys.argv[1:])
