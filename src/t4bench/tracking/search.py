"""Searches over an MLflow store that return every match, page after page (MLflow returns at most
`max_results` a call). The client is the caller's: nothing here imports mlflow."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

#: runs a page (MLflow's own limit for search_runs)
PAGE = 1000


def all_runs(client: Any, experiment_ids: Sequence[str], filter_string: str) -> Iterator[Any]:
    """Every run of `experiment_ids` that `filter_string` selects (MlflowClient.search_runs)."""
    token = None
    while True:
        page = client.search_runs(list(experiment_ids), filter_string=filter_string, max_results=PAGE, page_token=token)
        yield from page
        token = getattr(page, "token", None)
        if not token:
            return
