"""A run's tags within its budget: `names.RUN_TAGS` (and MLflow's own, a user's own) stay on the
run, where the UI's Tags and Columns show them; every other t4bench tag (versions, perf options,
devices, liveness) goes to the run's `names.RUN_TAGS_FILE` artifact. `run_tags(client, run)` reads
both."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from t4bench.tracking import names

T = TypeVar("T")
log = logging.getLogger(__name__)

#: MLflow accepts at most this many entries per log_batch call
BATCH_LIMIT = 100


def kept_on_run(key: str) -> bool:
    """Whether a tag stays on the run: MLflow's own, a user's own and `names.RUN_TAGS` do; every
    other t4bench tag goes to the run's `names.RUN_TAGS_FILE`."""
    return not key.startswith(names.NAMESPACE) or key in names.RUN_TAGS


def split_tags(tags: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(tags kept on the run, tags for the file), values as strings."""
    kept: dict[str, str] = {}
    moved: dict[str, str] = {}
    for key, value in tags.items():
        (kept if kept_on_run(key) else moved)[key] = str(value)
    return kept, moved


def file_tags(client: MlflowClient, run_id: str) -> dict[str, str]:
    """The tags in the run's `names.RUN_TAGS_FILE` ({} when it has none)."""
    if not any(entry.path == names.RUN_TAGS_FILE for entry in client.list_artifacts(run_id)):
        return {}
    # one small file: MLflow's per-download progress bar would be noise on the run's console
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory() as scratch:
        path = client.download_artifacts(run_id, names.RUN_TAGS_FILE, scratch)
        found = json.loads(Path(path).read_text())
    return {str(k): str(v) for k, v in found.items()}


def run_tags(client: MlflowClient, run: Any) -> dict[str, str]:
    """Every tag of `run` (an MLflow Run): those on it and those in its file (the run's own win)."""
    return {**file_tags(client, run.info.run_id), **run.data.tags}


def _write_file_tags(client: MlflowClient, run_id: str, moved: Mapping[str, str]) -> None:
    merged = {**file_tags(client, run_id), **moved}
    client.log_dict(run_id, dict(sorted(merged.items())), names.RUN_TAGS_FILE)


def store_tags(client: MlflowClient, run_id: str, tags: Mapping[str, Any]) -> None:
    """Tag the run: `names.RUN_TAGS` (and MLflow's own, a user's own) on it, the rest merged into
    its file. If the file cannot be written, those tags go on the run: over the budget, not lost."""
    kept, moved = split_tags(tags)
    entries = [RunTag(k, v[:5000]) for k, v in kept.items()]  # MLflow caps a tag's value
    if moved:
        try:
            _write_file_tags(client, run_id, moved)
        except Exception as err:
            log.warning(
                "t4bench: %s of run %s not written (%s): its tags stay on the run", names.RUN_TAGS_FILE, run_id, err
            )
            entries += [RunTag(k, v[:5000]) for k, v in moved.items()]
    for chunk in chunks(entries):
        client.log_batch(run_id, tags=chunk)


def fold_tags(client: MlflowClient, run_id: str) -> None:
    """Move the t4bench tags written straight onto the run that are not `names.RUN_TAGS` (the
    heartbeat's, a resume's) into its file and off the run: when the run ends."""
    moved = {k: v for k, v in client.get_run(run_id).data.tags.items() if not kept_on_run(k)}
    if moved:
        _write_file_tags(client, run_id, moved)
        for key in moved:
            client.delete_tag(run_id, key)


def create_run(client: MlflowClient, experiment_id: str, run_name: str, tags: Mapping[str, Any]) -> str:
    """A new run with `tags` stored as `store_tags` does."""
    kept, moved = split_tags(tags)
    run_id = str(client.create_run(experiment_id, run_name=run_name, tags=kept).info.run_id)
    if moved:
        store_tags(client, run_id, moved)
    return run_id


def chunks(entries: list[T]) -> list[list[T]]:
    """`entries` in slices of at most what one log_batch call accepts."""
    return [entries[start : start + BATCH_LIMIT] for start in range(0, len(entries), BATCH_LIMIT)]
