"""Seed-sweep summary: a Hydra callback for `--multirun` with the basic sweeper, and a CLI.

    python -m t4bench --multirun model=ncf seed='range(0,10)'

on_multirun_start creates the sweep's MLflow parent run and exports T4BENCH_SWEEP_ID /
T4BENCH_PARENT_RUN_ID, which every job's `tracking.sweep_id` / `tracking.parent_run_id` read, so
the runs nest under the parent. on_multirun_end collects the sweep's training runs from MLflow and
records on the parent n_converged and converged_fraction (from the runs' outcomes) and the
distribution of epochs_to_converge, time_to_train_s (converged runs) and epochs_run (mean, std,
min, max, cv, olympic mean); it writes summary.json and summary.md into the sweep directory and
prints the table, then one line if max_epochs stopped every run short of the target. With the t4bench Optuna sweeper the
callback does nothing (the sweeper keeps its own parent run and per-trial summaries).

    python -m t4bench.sweep.summary --sweep-id ID [--experiment t4bench-ncf] [--tracking-uri URI]

prints the same summary for any sweep id afterwards.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from t4bench.errors import ArgumentParser, T4BenchError
from t4bench.spec import RunSpec, build_spec
from t4bench.sweep import stats
from t4bench.tracking import experiments, names, run_names

ENV_SWEEP_ID = "T4BENCH_SWEEP_ID"
ENV_PARENT = "T4BENCH_PARENT_RUN_ID"


def _is_t4bench_optuna(spec: RunSpec) -> bool:
    return spec.sweep.target("sweeper").startswith("hydra_plugins.t4bench_sweeper")


def default_sweep_id(spec: RunSpec) -> str:
    explicit = OmegaConf.select(spec.config, "tracking.sweep_id", default=None)
    if explicit:
        return str(explicit)
    return f"{spec.model.name}:{Path(str(spec.sweep.sweep.dir)).as_posix()}"


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    converged = sum(stats.converged_flags(results))
    return {
        "n_runs": len(results),
        # from the outcomes: a sweep where no run converged reports 0, whatever metrics its runs have
        "n_converged": converged,
        "converged_fraction": converged / len(results) if results else math.nan,
        "outcomes": stats.outcome_counts(results),
        "distributions": stats.describe_runs(results),
        "runs": [
            {k: r.get(k) for k in ("seed", "outcome", "epochs_to_converge", "epochs_run", "time_to_train_s", "run_id")}
            for r in results
        ],
    }


def _budgets(results: Sequence[Mapping[str, Any]]) -> str:
    """`max_epochs=3` (or `max_epochs=3,5` when the runs had several), from the runs' params."""
    found = set()
    for r in results:
        value = r.get("max_epochs")
        if value is not None and math.isfinite(float(value)):
            found.add(int(float(value)))
    return "max_epochs=" + ",".join(str(b) for b in sorted(found)) if found else "max_epochs"


def budget_note(summary: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str | None:
    """One line when no run reached its target and max_epochs stopped them (outcome
    not_converged): the budget is below what the model needs, so the sweep measured nothing."""
    outcomes = summary["outcomes"]
    stopped = int(outcomes.get(names.OUTCOME_NOT_CONVERGED, 0))
    if summary["n_converged"] or not stopped:
        return None
    n = summary["n_runs"]
    others = ", ".join(f"{v} {k}" for k, v in sorted(outcomes.items()) if k != names.OUTCOME_NOT_CONVERGED)
    why = f" ({stopped} stopped there, {others})" if others else ""
    return f"t4bench: 0 of {n} runs reached the target within {_budgets(results)}{why}: raise max_epochs"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _epochs(value: float | None) -> str:
    """'-' for a run that did not converge; fractional epochs (eval_every < 1) kept."""
    return "-" if value is None or not math.isfinite(value) else f"{value:g}"


def render(summary: Mapping[str, Any], title: str) -> str:
    dists = summary["distributions"]
    lines = [
        stats.format_table(dists, title=title),
        f"converged: {summary['n_converged']} of {summary['n_runs']}; outcomes: "
        + ", ".join(f"{k}={v}" for k, v in sorted(summary["outcomes"].items())),
        "per seed (seed: epochs_to_converge): "
        + ", ".join(f"{r['seed']}:{_epochs(r['epochs_to_converge'])}" for r in summary["runs"]),
    ]
    return "\n".join(lines)


def record(mlflow: Any, parent_id: str, summary: Mapping[str, Any], out_dir: Path | None, title: str) -> str:
    """Log the summary on the parent run (metrics, tags, artifacts) and write it to out_dir."""
    from t4bench.tracking import sweep_layout

    text = render(summary, title)
    metrics = {k: v for k, v in stats.flat_metrics(summary["distributions"]).items()}
    metrics["n_runs"] = float(summary["n_runs"])
    metrics["n_converged"] = float(summary["n_converged"])
    metrics["converged_fraction"] = float(summary["converged_fraction"])
    sweep_layout.log_metrics(mlflow, parent_id, metrics)
    sweep_layout.set_tags(mlflow, parent_id, {f"{names.OUTCOMES_PREFIX}{k}": v for k, v in summary["outcomes"].items()})
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").write_text(json.dumps(_json_safe(dict(summary)), indent=2))
        (out_dir / "summary.md").write_text(f"```\n{text}\n```\n")
        for name in ("summary.json", "summary.md"):
            mlflow.log_artifact(parent_id, str(out_dir / name))
    return text


class SweepSummaryCallback(Callback):
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.parent_id: str | None = None
        self.sweep_id: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._mlflow: Any = None
        self._finished = False
        self._count_in_store = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not self.enabled:
            return
        spec = build_spec(config)
        if _is_t4bench_optuna(spec):
            return
        from t4bench.sweep.recorded_config import config_tags
        from t4bench.tracking import sweep_layout

        self._mlflow, self.exp_id = sweep_layout.for_config(config)
        self.sweep_id = default_sweep_id(spec)
        self.sweep_dir = Path(str(spec.sweep.sweep.dir))
        # `seeds-<MMDD-hhmmss>` (Hydra's dated folder) fitted to the Run Name column; the folder
        # itself is in the parent's tag file (sweep identity)
        run_name = run_names.seed_sweep(self.sweep_dir.name)
        identity = f"seeds:{self.sweep_dir.resolve()}"  # the same folder again: the same seed sweep
        try:
            self.parent_id = sweep_layout.get_or_create_parent(
                self._mlflow, self.exp_id, self.sweep_id, "seeds", run_name, config_tags(spec), identity=identity
            )
        except T4BenchError as err:
            print(f"t4bench: error: {err}", file=sys.stderr)
            sys.exit(2)
        overrides = spec.sweep.overrides("task")
        sweep_layout.set_tags(self._mlflow, self.parent_id, {names.SWEEP_OVERRIDES: " ".join(overrides)})
        self._log_fixed_params(spec, overrides)
        node = spec.sweep.sweeper.get("params")  # +sweeps=<name> files sweep here
        params = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else {}
        assert isinstance(params, dict)
        # the jobs' runs are named by their values of the swept keys (t4bench.tracking.run_names.job)
        swept = run_names.swept_keys([*overrides, *("=".join((str(k), str(v))) for k, v in params.items())])
        exported = {ENV_SWEEP_ID: self.sweep_id, ENV_PARENT: self.parent_id, run_names.ENV_SWEPT_KEYS: ",".join(swept)}
        for key, value in exported.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        atexit.register(self._finish, names.FAILED)
        from t4bench.sweep.talk import Pace, count_jobs

        self._uri = str(spec.tracking.uri)
        # only the basic launcher ends every job here, in order; the others' jobs end in worker
        # processes (packed) or Slurm jobs, each with its own copy of this callback: the store counts
        self._count_in_store = not spec.sweep.target("launcher").endswith("BasicLauncher")
        self._since_ms = int(time.time() * 1000)  # this attempt's jobs (a resumed sweep's earlier ones ended)
        self._pace = Pace(count_jobs(overrides, {str(k): str(v) for k, v in params.items()}))
        total = f"{self._pace.total} jobs" if self._pace.total else "jobs"
        print(f"[t4bench] sweep {self.sweep_id} ({total}): MLflow parent run {self.parent_id}", flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """job i/n and the sweep's ETA from the jobs finished so far (counted in the store unless
        the jobs run in this process: each packed worker counted its own and printed "job 1/16")."""
        if self.parent_id is None or getattr(self, "_pace", None) is None:
            return
        if not self._count_in_store:
            print(self._pace.job_done(), flush=True)
            return
        from t4bench.tracking import sweep_layout

        try:
            returned = getattr(job_return, "_return_value", None)  # unset for a job that raised
            own = str(returned.get("run_id") or "") if isinstance(returned, dict) else ""
            done: int | None = sweep_layout.ended_children(
                self._mlflow, str(self.exp_id), self.parent_id, self._since_ms, own or None
            )
        except Exception:  # the line is only a display: a store that does not answer falls back to a count here
            done = None
        print(self._pace.job_done(done=done), flush=True)

    def _log_fixed_params(self, spec: RunSpec, overrides: list[str]) -> None:
        """The parent's params: the composed config minus the swept keys (and the seed)."""
        from t4bench.sweep.recorded_config import fixed_params
        from t4bench.tracking import sweep_layout

        swept = run_names.swept_keys(overrides)
        try:
            sweep_layout.log_params(self._mlflow, str(self.parent_id), fixed_params(spec, swept, []))
        except Exception as err:  # a resumed sweep logged them already (params are immutable)
            print(f"[t4bench] sweep parent params kept: {err}", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.parent_id is None:
            return
        self._finish(names.FINISHED)

    def _finish(self, status: str) -> None:
        if self._finished or self.parent_id is None:
            return
        self._finished = True
        from t4bench.tracking import sweep_layout

        try:
            results = sweep_layout.seed_results(self._mlflow, self.exp_id, str(self.sweep_id))
            summary = summarize(results)
            text = record(self._mlflow, self.parent_id, summary, self.sweep_dir, f"sweep {self.sweep_id}")
            if results or status == names.FINISHED:  # a sweep that failed before any job: its error line says it
                print(text, flush=True)
            if status == "FINISHED":
                from t4bench.sweep.talk import next_steps

                print(next_steps(self._uri, str(self.exp_id), str(self.sweep_id)), flush=True)
            note = budget_note(summary, results)
            if note:  # last, where it is seen: the sweep measured no time to train at all
                print(note, flush=True)
        finally:
            self._mlflow.set_terminated(self.parent_id, status=status)
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def main(argv: Sequence[str] | None = None) -> int:
    from t4bench.tracking import sweep_layout
    from t4bench.tracking.client import mlflow_client

    parser = ArgumentParser(prog="python -m t4bench.sweep.summary", description=__doc__.split("\n")[0])
    parser.add_argument("--sweep-id", required=True)
    parser.add_argument("--experiment", default="t4bench-ncf")
    parser.add_argument("--tracking-uri", default=experiments.default_tracking_uri())
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    mlflow = mlflow_client(args.tracking_uri, new_store=True)
    exp = mlflow.get_experiment_by_name(args.experiment)
    if exp is None:
        print(f"no experiment {args.experiment!r} in {args.tracking_uri}", file=sys.stderr)
        return 2
    results = sweep_layout.seed_results(mlflow, exp.experiment_id, args.sweep_id)
    summary = summarize(results)
    print(json.dumps(_json_safe(summary), indent=2) if args.json else render(summary, f"sweep {args.sweep_id}"))
    note = budget_note(summary, results)
    if note and not args.json:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
