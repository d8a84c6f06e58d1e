"""MLflow layout of a sweep.

    sweep parent run   tags t4bench.sweep_id=<id>, t4bench.sweep_role=parent, t4bench.sweep_kind
      trial run        (Optuna sweeps) mlflow.parentRunId=<parent>, t4bench.sweep_role=trial,
                       t4bench.trial_number, t4bench.optuna.state; params = the trial's parameters
        seed run       the training run itself: mlflow.parentRunId=<trial or parent>,
                       t4bench.sweep_id=<id> (set through tracking.parent_run_id / tracking.sweep_id)

Training runs carry no t4bench.sweep_role tag; that is how summaries find them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from t4bench.errors import T4BenchError
from t4bench.tracking import names, search
from t4bench.tracking.client import mlflow_client


class SweepIdConflict(T4BenchError):
    """A sweep id already names the parent run of another sweep."""


def experiment_id(uri: str, name: str) -> str:
    from t4bench.tracking.run import RunTracker

    return RunTracker(uri).ensure_experiment(name)


def ensure_hydra_config(config: Any) -> None:
    """`${hydra:...}` interpolations in the task config (tracking.uri uses hydra:runtime.cwd) need
    HydraConfig, which Hydra sets only per job; multirun-level callbacks and sweepers resolve
    them before any job ran."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        HydraConfig.instance().set_config(config)


def for_config(config: Any) -> tuple[Any, str]:
    """(MLflow client, experiment id) of the composed config's `tracking` node, from a sweep
    process (a seed-sweep callback or the Optuna sweeper), before any job has run."""
    ensure_hydra_config(config)
    uri = str(config.tracking.uri)
    # two sweeps starting on one new SQLite store: one creates it
    return mlflow_client(uri, new_store=True), experiment_id(uri, str(config.tracking.experiment))


def _quote(value: str) -> str:
    return "'" + value.replace("'", "\\'") + "'"


def find_runs(mlflow: Any, exp_id: str, sweep_id: str, role: str | None) -> list[Any]:
    query = f"tags.`{names.SWEEP_ID}` = {_quote(sweep_id)}"
    if role is not None:
        query += f" and tags.`{names.SWEEP_ROLE}` = {_quote(role)}"
    runs = list(search.all_runs(mlflow, [exp_id], query))
    if role is None:
        runs = [r for r in runs if names.SWEEP_ROLE not in r.data.tags]
    return runs


def get_or_create_parent(
    mlflow: Any,
    exp_id: str,
    sweep_id: str,
    kind: str,
    run_name: str,
    tags: Mapping[str, str] | None = None,
    *,
    identity: str,
    reopen: bool = True,
) -> str:
    """The sweep's parent run: found by tag when the sweep is resumed (RUNNING again unless
    `reopen` is false: a validation adds no trials to it), else created.

    A parent found under `sweep_id` is reused only when its names.SWEEP_IDENTITY tag equals `identity` (the
    same study, the same seed-sweep folder): another sweep that reuses an old sweep id must not
    reopen, and then leave RUNNING, a parent that is not its own (SweepIdConflict)."""
    found = find_runs(mlflow, exp_id, sweep_id, "parent")
    if found:
        run = found[0]
        check_identity(mlflow, run, sweep_id, identity)
        run_id = run.info.run_id
        if reopen and run.info.status != names.RUNNING:
            mlflow.update_run(run_id, status=names.RUNNING)
        return str(run_id)
    from t4bench.tracking.tags import create_run

    return create_run(mlflow, exp_id, run_name, parent_tags(sweep_id, kind, identity, tags or {}))


def parent_tags(sweep_id: str, kind: str, identity: str, tags: Mapping[str, Any]) -> dict[str, Any]:
    """What a sweep's parent run is created with: its sweep id, role, kind and identity."""
    return {
        names.SWEEP_ID: sweep_id,
        names.SWEEP_ROLE: "parent",
        names.SWEEP_KIND: kind,
        names.SWEEP_IDENTITY: identity,
        **dict(tags),
    }


def check_identity(mlflow: Any, run: Any, sweep_id: str, identity: str) -> None:
    """Raise SweepIdConflict unless `run` (a parent found by `sweep_id`) carries `identity` (a
    tag of its tag file)."""
    from t4bench.tracking.tags import run_tags

    theirs = run_tags(mlflow, run).get(names.SWEEP_IDENTITY)
    if theirs != identity:
        raise SweepIdConflict(
            f"sweep id {sweep_id!r} belongs to another sweep ({theirs or 'one made before sweep identities'}; "
            f"MLflow run {run.info.run_id}, {run.info.status}): choose another sweep id"
        )


def close_running_children(mlflow: Any, exp_id: str, parent_id: str, status: str) -> list[str]:
    """End the child runs of `parent_id` that are still RUNNING (their process is gone: a killed
    worker's seed runs) with `status`, tagged t4bench.outcome=killed / failed."""
    query = f"tags.`{names.MLFLOW_PARENT_RUN_ID}` = {_quote(parent_id)} and attributes.status = '{names.RUNNING}'"
    closed = []
    for run in mlflow.search_runs([exp_id], filter_string=query, max_results=1000):
        outcome = names.OUTCOME_KILLED if status == names.KILLED else names.OUTCOME_FAILED
        set_tags(mlflow, run.info.run_id, {names.OUTCOME: outcome})
        mlflow.set_terminated(run.info.run_id, status=status)
        closed.append(str(run.info.run_id))
    return closed


def ended_children(mlflow: Any, exp_id: str, parent_id: str, since_ms: int, run_id: str | None = None) -> int:
    """How many child runs of `parent_id` started at or after `since_ms` have ended: the sweep's
    jobs done so far, whichever process ran them (a packed sweep's workers each see only their own).
    With the job's own `run_id`: its place among them by end time, so two jobs that end at once
    and both count after the other ended still print 1/N and 2/N, not 2/N twice."""
    query = f"tags.`{names.MLFLOW_PARENT_RUN_ID}` = {_quote(parent_id)} and attributes.start_time >= {since_ms}"
    ended = [r for r in search.all_runs(mlflow, [exp_id], query) if r.info.status != names.RUNNING]
    order = [r.info.run_id for r in sorted(ended, key=lambda r: (r.info.end_time or 0, r.info.run_id))]
    return order.index(run_id) + 1 if run_id in order else len(order)


def child_tags(parent_id: str, sweep_id: str, role: str, tags: Mapping[str, Any]) -> dict[str, Any]:
    """What a run nested under a sweep's parent (a trial) is created with."""
    return {names.SWEEP_ID: sweep_id, names.SWEEP_ROLE: role, names.MLFLOW_PARENT_RUN_ID: parent_id, **tags}


def log_metrics(mlflow: Any, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    entries = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
    for start in range(0, len(entries), 100):
        mlflow.log_batch(run_id, metrics=entries[start : start + 100])


def set_tags(mlflow: Any, run_id: str, tags: Mapping[str, Any]) -> None:
    """On the run or in its tag file (`t4bench.tracking.tags.store_tags`)."""
    from t4bench.tracking.tags import store_tags

    store_tags(mlflow, run_id, tags)


def log_params(mlflow: Any, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    entries = [Param(k, str(v)[:6000]) for k, v in params.items()]
    for start in range(0, len(entries), 100):
        mlflow.log_batch(run_id, params=entries[start : start + 100])


def run_result(run: Any) -> dict[str, Any]:
    """A training run as the task function's result dict (from its MLflow metrics and tags)."""
    metrics, tags = run.data.metrics, run.data.tags
    result: dict[str, Any] = {
        "outcome": tags.get(names.OUTCOME, "unknown"),
        "run_id": run.info.run_id,
        "seed": int(tags[names.SEED]) if tags.get(names.SEED, "").lstrip("-").isdigit() else None,
        "status": run.info.status,
    }
    # time_to_train_s and epochs_to_converge exist on converged runs only (NaN here otherwise);
    # run_train_s / run_wall_s on every run (the time objective's penalty for the others)
    summary = (
        names.EPOCHS_TO_CONVERGE,
        names.EPOCHS_RUN,
        names.TIME_TO_TRAIN_S,
        names.RUN_TRAIN_S,
        names.RUN_WALL_S,
        names.CONVERGED,
        names.AVG_THROUGHPUT,
    )
    for key in summary:
        result[key] = float(metrics.get(key, math.nan))
    result.update({k: v for k, v in metrics.items() if k.startswith(names.EVAL_PREFIX)})
    # the run's epoch budget (its resolved config is logged as params): where a run that did not
    # converge is censored in a held-out comparison
    max_epochs = run.data.params.get("max_epochs", "")
    result["max_epochs"] = float(max_epochs) if max_epochs.replace(".", "", 1).isdigit() else math.nan
    return result


def seed_results(mlflow: Any, exp_id: str, sweep_id: str) -> list[dict[str, Any]]:
    """All training runs of a sweep that finished (FINISHED status), oldest first."""
    runs = [r for r in find_runs(mlflow, exp_id, sweep_id, None) if r.info.status == names.FINISHED]
    runs.sort(key=lambda r: r.info.start_time or 0)
    return [run_result(r) for r in runs]
