"""Runs' MLPerf logs as submission-style folders, the layout mlperf_logging's package checker and
result summarizer read, one package per ruleset (no ruleset knows all six benchmarks, and the
summarizer checks every log of a package under one):

    <out>/<ruleset>/results/<system>/<benchmark>/result_<i>.txt   each run's mlperf.log artifact
    <out>/<ruleset>/systems/<system>.json                        the system description they require

<ruleset> is the one t4bench.mlperf.ruleset names for the benchmark (`unchecked` for NCF, which
no ruleset knows); <system> is `<hw>x<count>_<scale>` (a mini and a reference-scale run are never
one system's results); <benchmark> is the MLPerf name (`resnet`, not `resnet50`). Runs are
numbered by start time. Then e.g. `python -m mlperf_logging.result_summarizer <out>/0.7.0 training 0.7.0`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

from t4bench.mlperf import mlperf_name, ruleset
from t4bench.report.query import QueryError
from t4bench.tracking import names
from t4bench.tracking.tags import run_tags

LOG_ARTIFACT = names.MLPERF_LOG_FILE


def system_name(row: pd.Series) -> str:
    return f"{row['hw']}x{int(row['hw_count'])}_{row['scale']}"


def system_description(runs: pd.DataFrame, tags: dict[str, str], params: dict[str, str]) -> dict[str, object]:
    """The fields the result summarizer reads, from the first run (open division, research); what
    t4bench does not record says so."""
    first = runs.iloc[0]
    versions = ", ".join(
        f"{k.removeprefix(names.VERSION_PREFIX)} {v}"
        for k, v in sorted(tags.items())
        if k.startswith(names.VERSION_PREFIX)
    )
    return {
        "submitter": "t4bench",
        "division": "open",
        "status": "research",
        "system_name": system_name(first),
        "system_type": "datacenter",
        "number_of_nodes": 1,
        "host_processors_per_node": 1,
        "host_processor_model_name": "not recorded",
        "host_processor_core_count": "not recorded",
        "accelerators_per_node": int(first["hw_count"]) if first["hw"] != "cpu" else 0,
        "accelerator_model_name": params.get("hw.label", str(first["hw"])),
        "framework": f"PyTorch {tags.get(names.VERSION_PREFIX + 'torch', '')}".strip(),
        "hw_notes": f"t4bench hw profile {first['hw']}, scale {first['scale']}",
        "sw_notes": versions,
    }


def export_results(client: MlflowClient, runs: pd.DataFrame, out: Path) -> list[str]:
    """Write the folder; returns one line per file written and per run left out (and why)."""
    # the logs are small: MLflow's per-download progress bars would bury the listing
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    lines: list[str] = []
    written = 0
    runs = runs.sort_values("start_time")
    for system, group in runs.groupby(runs.apply(system_name, axis=1), sort=True):
        first: dict[str, dict[str, str]] = {}
        counters: dict[str, int] = {}
        for row in group.itertuples(index=False):
            benchmark = mlperf_name(str(row.model))
            with tempfile.TemporaryDirectory() as scratch:
                try:
                    local = Path(client.download_artifacts(row.run_id, LOG_ARTIFACT, scratch))
                except Exception as err:  # no log artifact (a run that failed before writing one)
                    lines.append(f"skipped run {row.run_id} ({row.run_name}): no {LOG_ARTIFACT} artifact ({err})")
                    continue
                package = out / (ruleset(benchmark) or "unchecked")
                folder = package / "results" / str(system) / benchmark
                folder.mkdir(parents=True, exist_ok=True)
                index = counters.get(benchmark, 0)
                counters[benchmark] = index + 1
                target = folder / f"result_{index}.txt"
                shutil.copyfile(local, target)
            written += 1
            lines.append(f"{target}  <- run {row.run_id} ({row.run_name}, {row.outcome})")
            if not first:
                run = client.get_run(row.run_id)  # the versions are in its tag file
                first = {"tags": run_tags(client, run), "params": dict(run.data.params)}
        for benchmark in counters:
            desc = out / (ruleset(benchmark) or "unchecked") / "systems" / f"{system}.json"
            if not desc.exists():
                desc.parent.mkdir(parents=True, exist_ok=True)
                desc.write_text(json.dumps(system_description(group, first["tags"], first["params"]), indent=2) + "\n")
                lines.append(str(desc))
    if not written:
        raise QueryError(f"none of the {len(runs)} matching runs has an {LOG_ARTIFACT} artifact")
    return lines
