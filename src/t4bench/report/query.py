"""Which runs a report covers: filters → MLflow search → one pandas row per training run.

Only training runs are rows: sweep parents and Optuna trial runs carry a `t4bench.sweep_role`
tag and report runs a `t4bench.report` tag, so both are left out. Runs still RUNNING are left
out too (they have no outcome yet) but counted, so the report can say how many it skipped.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient

from t4bench.report import configs
from t4bench.report.errors import ReportError
from t4bench.tracking import names
from t4bench.tracking.tags import kept_on_run

REPORT_TAG = names.REPORT
ROLE_TAG = names.SWEEP_ROLE
PRICE_PARAM = "hw.price_per_gpu_hour"
HPARAMS_PARAM = "hparams.name"

#: (column, MLflow metric) for the summary metrics of the README's MLflow contract
METRIC_COLUMNS = (
    ("time_to_train_s", names.TIME_TO_TRAIN_S),
    ("epochs_to_converge", names.EPOCHS_TO_CONVERGE),
    ("epochs_run", names.EPOCHS_RUN),
    ("avg_throughput", names.AVG_THROUGHPUT),
    ("eval_quality", names.EVAL_QUALITY),
    # t4bench.telemetry's summary over the timed span (GPU runs only; absent on CPU)
    ("energy_to_train_kj", names.ENERGY_TO_TRAIN_KJ),
    ("avg_power_w", names.AVG_POWER_W),
)
#: (column, tag) read from each run
TAG_COLUMNS = (
    ("model", names.MODEL),
    ("scale", names.SCALE),
    ("hw", names.HW),
    ("data", names.DATA),
    ("outcome", names.OUTCOME),
    ("throughput_unit", names.THROUGHPUT_UNIT),
    ("sweep_id", names.SWEEP_ID),
    ("framework", names.FRAMEWORK),
)


class QueryError(ReportError):
    """Bad filter or nothing to report."""


@dataclass(frozen=True)
class RunFilter:
    """What the user asked for; every field narrows the search (AND)."""

    experiments: Sequence[str] = ()
    models: Sequence[str] = ()
    sweep_id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def describe(self) -> str:
        parts = [f"experiment in {list(self.experiments)}" if self.experiments else "all experiments"]
        if self.models:
            parts.append(f"model in {list(self.models)}")
        if self.sweep_id:
            parts.append(f"sweep_id {self.sweep_id}")
        parts += [f"{k}={v}" for k, v in self.tags.items()]
        if self.since:
            parts.append(f"since {self.since.isoformat()}")
        if self.until:
            parts.append(f"until {self.until.isoformat()}")
        return ", ".join(parts)


def parse_date(text: str) -> dt.datetime:
    """'2026-12-03' or '2026-12-03T04:10' (UTC unless an offset is given)."""
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(f"date {text!r}: expected e.g. 2026-12-03 or 2026-12-03T04:10") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)


def parse_tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise QueryError(f"--tag {text!r}: expected KEY=VALUE, e.g. t4bench.hw=t4")
    if not kept_on_run(key):  # MLflow searches only the tags on a run
        raise QueryError(
            f"--tag {key}: not a tag a run carries (it is in each run's {names.RUN_TAGS_FILE}); "
            f"filter on one of {', '.join(sorted(names.RUN_TAGS))}"
        )
    return key, value


def _quote(value: str) -> str:
    return "'" + value.replace("'", "\\'") + "'"


def filter_string(flt: RunFilter) -> str:
    """The MLflow search filter; `%` in --sweep-id is a LIKE wildcard (e.g. `ncf_robust-validate-%`)."""
    clauses = []
    if flt.sweep_id:
        op = "LIKE" if "%" in flt.sweep_id else "="
        clauses.append(f"tags.`{names.SWEEP_ID}` {op} {_quote(flt.sweep_id)}")
    for key, value in flt.tags.items():
        clauses.append(f"tags.`{key}` = {_quote(value)}")
    if flt.since:
        clauses.append(f"attributes.start_time >= {int(flt.since.timestamp() * 1000)}")
    if flt.until:
        clauses.append(f"attributes.start_time <= {int(flt.until.timestamp() * 1000)}")
    return " and ".join(clauses)


def experiment_ids(client: MlflowClient, flt: RunFilter) -> dict[str, str]:
    """{id: name} of the experiments to search (named ones must exist)."""
    if flt.experiments:
        found = {}
        for name in flt.experiments:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise QueryError(f"--experiment {name!r} does not exist in this tracking store")
            found[exp.experiment_id] = exp.name
        return found
    # every experiment: `mlflow run --experiment-name X` puts t4bench runs anywhere; the
    # t4bench.model tag (checked per run) is what makes a run a t4bench run
    found, token = {}, None
    while True:
        page = client.search_experiments(view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token)
        found.update({e.experiment_id: e.name for e in page})
        token = page.token
        if not token:
            return found


def search(client: MlflowClient, ids: Sequence[str], query: str) -> Iterator[Run]:
    """Every matching run, page by page (search_runs returns at most max_results at a time)."""
    token: str | None = None
    while True:
        page = client.search_runs(list(ids), filter_string=query, max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _metric(run: Run, name: str) -> float:
    value = run.data.metrics.get(name)
    return float(value) if value is not None else math.nan


def _price(run: Run) -> float:
    text = run.data.params.get(PRICE_PARAM)
    try:
        return float(text) if text not in (None, "", "None", "null") else math.nan
    except ValueError:
        return math.nan


def run_row(run: Run, experiment: str) -> dict[str, Any]:
    tags = run.data.tags
    row: dict[str, Any] = {
        "run_id": run.info.run_id,
        "run_name": run.info.run_name,
        "experiment": experiment,
        "status": run.info.status,
    }
    row.update({column: tags.get(tag, "") for column, tag in TAG_COLUMNS})
    count = tags.get(names.HW_COUNT, "")
    row["hw_count"] = int(count) if count.isdigit() else 1
    seed = tags.get(names.SEED, "")
    row["seed"] = int(seed) if seed.lstrip("-").isdigit() else None
    row.update({column: _metric(run, metric) for column, metric in METRIC_COLUMNS})
    row["converged"] = row["outcome"] == names.OUTCOME_CONVERGED
    row["price_per_gpu_hour"] = _price(run)
    row["start_time"] = pd.Timestamp(run.info.start_time, unit="ms", tz="UTC")
    params = run.data.params
    row["hparams"] = params.get(HPARAMS_PARAM, "")
    row["config"] = configs.config_id(params)
    row["config_params"] = configs.config_params(params)
    try:  # runs packed several to a GPU (their seconds are shared): kept out of speed tables
        row["gpu_share"] = float(tags.get(names.GPU_SHARE, "1") or 1)
    except ValueError:
        row["gpu_share"] = 1.0
    return row


@dataclass
class Selection:
    """The training runs a report covers, plus what was found but left out (and why)."""

    runs: pd.DataFrame
    running: int
    searched: dict[str, str]


def select(client: MlflowClient, flt: RunFilter) -> Selection:
    ids = experiment_ids(client, flt)
    rows, running = [], 0
    if ids:
        for run in search(client, list(ids), filter_string(flt)):
            tags = run.data.tags
            if ROLE_TAG in tags or REPORT_TAG in tags or names.MODEL not in tags:
                continue
            if flt.models and tags[names.MODEL] not in flt.models:
                continue
            if run.info.status in (names.RUNNING, names.SCHEDULED):
                running += 1
                continue
            rows.append(run_row(run, ids[run.info.experiment_id]))
    if not rows:
        extra = f" ({running} still RUNNING)" if running else ""
        raise QueryError(f"no runs match {flt.describe()}{extra}")
    frame = pd.DataFrame(rows).sort_values(["model", "scale", "hw", "hw_count", "seed"], na_position="last")
    return Selection(runs=frame.reset_index(drop=True), running=running, searched=ids)
