"""`resume=<checkpoint file | folder | run id>`: continue a killed run in the same MLflow run.

Before anything starts, `find(cfg)` reads the checkpoint (weights-only) and refuses one written by
a different experiment setup (model, scale, seed, per-rank batch, rank count: resuming those would
produce a run that is neither): one `CheckpointError` line. `reopen(client, run_id)` puts the
MLflow run back to RUNNING (a repaired or crashed run is KILLED/FAILED by then), so the loop can
continue at the next epoch with per-epoch metrics at new steps (nothing logged twice) and
time-to-train counting the saved training time plus the new (MLPerf counts training time only).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from t4bench.cadence import Continued
from t4bench.pytorch import checkpoint
from t4bench.pytorch.checkpoint import CheckpointError
from t4bench.spec import RunSpec
from t4bench.tracking import names

if TYPE_CHECKING:
    from t4bench.run_env import RunEnvironment

#: what must match between the checkpoint's run and this one (config keys)
SAME_SETUP = ("model.name", "scale.name", "seed", "model.batch_size", "hw.count")
RESUMED_TAG = names.RESUMED_FROM_EPOCH

log = logging.getLogger(__name__)


#: what a resumed run may set differently from the run it continues: how long it trains and how it
#: is watched and recorded. Anything else (LR, model, data, eval cadence...) would make a run that
#: is neither setup: refused, naming the keys. Entries ending in "." cover their whole subtree.
MAY_CHANGE = (
    "max_epochs",
    "progress",
    "resume",
    "resume_finished",
    "checkpoint.",
    "tracking.",
    "paths.",
    "callbacks.",
    "hw.telemetry.",
    "hw.threads",
    "hw.loader_workers",
)
#: the longest param value MLflow keeps (and t4bench logs)
PARAM_CHARS = 6000


def may_change(key: str) -> bool:
    return any(key == entry or (entry.endswith(".") and key.startswith(entry)) for entry in MAY_CHANGE)


def check_changes(wanted: str, logged: dict[str, str], planned: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The params this resume sets differently from those the run logged at its start, as
    key -> (was, now); CheckpointError naming the keys when one of them may not change."""
    differs = {
        key: (logged[key], value[:PARAM_CHARS])
        for key, value in planned.items()
        if key in logged and logged[key] != value[:PARAM_CHARS]
    }
    refused = {key: pair for key, pair in differs.items() if not may_change(key)}
    if refused:
        shown = ", ".join(f"{key}={now} (the run has {was})" for key, (was, now) in sorted(refused.items()))
        raise CheckpointError(
            f"resume={wanted}: may not change when resuming: {shown}; resume with the run's values or start a new run"
        )
    return differs


def check_status(wanted: str, run: Any, allow_finished: bool) -> None:
    """A FINISHED run is trained further only when asked for (resume_finished=true)."""
    if run.info.status == names.FINISHED and not allow_finished:
        outcome = run.data.tags.get(names.OUTCOME, "?")
        raise CheckpointError(
            f"resume={wanted}: run {run.info.run_id} is FINISHED (outcome {outcome}); give resume_finished=true "
            "to train it further (e.g. with a higher max_epochs)"
        )


def restore(client: Any, run_id: str, status: str, outcome: str | None) -> None:
    """Put a FINISHED run's status and outcome back after a resumed attempt on it failed."""
    from t4bench.tracking.tags import store_tags

    store_tags(client, run_id, {**({names.OUTCOME: outcome} if outcome else {}), RESUME_FAILED_TAG: "true"})
    client.set_terminated(run_id, status=status)


RESUME_FAILED_TAG = names.RESUME_FAILED


@dataclass(frozen=True)
class ResumePoint:
    path: Path
    payload: dict[str, Any]

    @property
    def run_id(self) -> str | None:
        return self.payload["meta"].get("run_id") or None

    @property
    def epoch(self) -> int:
        """The last completed epoch: training continues at epoch + 1."""
        return int(self.payload["loop"]["epoch"])


def setup_of(cfg: RunSpec) -> dict[str, str]:
    # the spec's values, so an emulated run's batch is the one it trains with
    return {key: str(functools.reduce(getattr, key.split("."), cfg)) for key in SAME_SETUP}


def meta_for(cfg: RunSpec, run_id: str | None) -> dict[str, Any]:
    """What a checkpoint records about the run that wrote it (`checkpoint.save(meta=...)`)."""
    return {"run_id": run_id or "", "setup": setup_of(cfg)}


def find(cfg: RunSpec) -> ResumePoint | None:
    """The checkpoint `resume=` names (None without `resume`), checked against this config."""
    wanted = cfg.get("resume")
    if wanted in (None, ""):
        return None
    path = checkpoint.resolve(str(wanted), str(cfg.tracking.uri))
    payload = checkpoint.read(path)
    saved = payload.get("meta", {}).get("setup", {})
    now = setup_of(cfg)
    differs = [key for key in SAME_SETUP if key in saved and saved[key] != now[key]]
    if differs:
        was = " ".join(f"{key}={saved[key]}" for key in differs)
        this = " ".join(f"{key}={now[key]}" for key in differs)
        raise CheckpointError(f"resume={wanted}: {path} was written by a run with {was}; this one has {this}")
    return ResumePoint(path, payload)


def reopen(client: Any, run_id: str, epoch: int) -> None:
    """Mark the run RUNNING again (and say from which epoch), so it ends with this process's status."""
    run = client.get_run(run_id)
    if run.info.status != names.RUNNING:
        client.update_run(run_id, status=names.RUNNING)
    client.set_tag(run_id, names.OUTCOME, names.OUTCOME_RUNNING)
    client.set_tag(run_id, RESUMED_TAG, str(epoch))


def reopened_run(cfg: RunSpec, env: RunEnvironment) -> Any:
    """resume=...: the checkpoint's MLflow run as it was before this attempt (None without resume),
    reopened after the checks: settings that may not change, a FINISHED run not asked for;
    `t4bench.pytorch.framework`'s `resume`."""
    if cfg.get("resume") in (None, ""):
        return None
    from t4bench.tracking.client import mlflow_client
    from t4bench.tracking.run import flatten, resolved_config

    point = find(cfg)
    if point is None or not point.run_id:
        return None
    client = mlflow_client(str(cfg.tracking.uri))
    run = client.get_run(point.run_id)
    wanted = str(cfg.resume)
    check_changes(wanted, dict(run.data.params), flatten(resolved_config(cfg, env)))
    check_status(wanted, run, bool(cfg.get("resume_finished", False)))
    reopen(client, point.run_id, point.epoch)
    return run


def _rank_and_world() -> tuple[int, int]:
    """This process's rank and the world size under torch.distributed (0, 1 without it)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class EpochCheckpoints:
    """The training loop's two hooks: `resume_into(trainer)` before the first epoch (every rank),
    `after_epoch(...)` at an epoch's end (rank 0 writes every `checkpoint.every` epochs).

    `logger` is the loop's epoch logger: its `run_id` goes into the checkpoint (so `resume=<folder>`
    finds the run) and, when it can `set_tags`, the run is tagged with the checkpoint folder."""

    def __init__(self, cfg: RunSpec, is_main: bool, logger: Any = None) -> None:
        node = cfg.get("checkpoint") or {}
        self.every = int(node.get("every", 0) or 0)
        self.keep = int(node.get("keep", 2) or 2)
        self.cfg, self.is_main = cfg, is_main
        self.run_id = getattr(logger, "run_id", None) or None
        self.point = find(cfg)
        # a resumed run goes on writing beside the checkpoint it resumed from
        self.folder = self.point.path.parent if self.point else Path(str(node.get("dir") or "checkpoints"))
        if self.every and is_main and hasattr(logger, "set_tags"):
            logger.set_tags({checkpoint.FOLDER_TAG: str(self.folder.resolve())})

    def resume_into(self, trainer: checkpoint.TrainerLike) -> Continued:
        if self.point is None:
            return Continued()
        loop = checkpoint.restore_trainer(self.point.payload, trainer)
        rank, _ = _rank_and_world()
        if rank > 0:  # this rank's own generators (the checkpoint holds rank 0's)
            own = checkpoint.rank_rng_path(self.point.path.parent, self.point.epoch, rank)
            if own.is_file():
                checkpoint.restore_rng(checkpoint.read(own)["rng"])
            else:
                log.warning("rank %d: no RNG state saved at %s; it continues with rank 0's", rank, own)
        return Continued(
            first_epoch=int(loop["epoch"]) + 1,
            elapsed_s=float(loop.get("elapsed_s", 0.0)),
            throughputs=[float(v) for v in loop.get("throughputs", [])],
            evaluations=int(loop.get("evaluations", 0)),
        )

    def after_epoch(
        self,
        trainer: checkpoint.TrainerLike,
        epoch: int,
        *,
        elapsed_s: float,
        throughputs: list[float],
        evaluations: int,
    ) -> None:
        if not (self.every and epoch % self.every == 0):
            return
        rank, world = _rank_and_world()
        if not self.is_main:
            if world > 1:
                checkpoint.save_rank_rng(self.folder, epoch, rank, self.keep)
            return
        loop = {"elapsed_s": elapsed_s, "throughputs": list(throughputs), "evaluations": evaluations}
        checkpoint.save_trainer(
            checkpoint.path_for(self.folder, epoch),
            trainer,
            epoch=epoch,
            loop=loop,
            meta=meta_for(self.cfg, self.run_id),
        )
        checkpoint.prune(self.folder, self.keep)
