"""The one place t4bench makes an MLflow client (`mlflow_client`). mlflow is imported on the first
call, not with this module: `python -m t4bench --cfg job` and the preflight stay light."""

from __future__ import annotations

from typing import TYPE_CHECKING

from t4bench.tracking import store_lock

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


def mlflow_client(uri: str | None = None, *, new_store: bool = False) -> MlflowClient:
    """A client of the tracking store at `uri` (None: MLflow's own default, $MLFLOW_TRACKING_URI,
    which `mlflow run` sets). `new_store`: this process may be the first to open a new store (a
    run, a sweep), so a new SQLite file is created by one process at a time (`store_lock.ready`);
    readers of an existing store skip that check, which would refuse a store they cannot write."""
    from mlflow.tracking import MlflowClient

    if new_store and uri:
        store_lock.ready(uri)
    return MlflowClient(uri)
