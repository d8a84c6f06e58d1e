"""Checkpoints a run can resume from: model, optimizer, LR scheduler, grad scaler, every RNG
(Python, NumPy, torch CPU and CUDA), the data position and the loop's own counters.

- Written atomically: into a temporary file beside the target, fsync'ed, then `os.replace`d, so a
  kill mid-write leaves the previous checkpoint whole and never a half file under the real name.
- Read with `torch.load(weights_only=True)`: a checkpoint is data, never code to run. Everything in
  it is a tensor or a plain container of numbers and strings for that reason (the RNG states are
  converted to tensors, not pickled as NumPy objects).
- A truncated or foreign file is one `CheckpointError` line naming it.

The loop saves at the end of an epoch (`checkpoint.every` epochs); the data position is then "the
next epoch", which the benchmarks' per-epoch seeding reproduces exactly.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from t4bench.errors import T4BenchError
from t4bench.tracking import names

FORMAT = "t4bench-checkpoint/1"
#: MLflow tag of a run that writes checkpoints: their folder (`resume=<run id>` reads it)
FOLDER_TAG = names.CHECKPOINT_DIR
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_NAME = re.compile(r"^epoch-(\d+)\.pt$")


class CheckpointError(T4BenchError):
    """A checkpoint that is missing, truncated, or not a t4bench checkpoint."""


class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any], /) -> Any: ...


# --------------------------------------------------------------------------------------------
# random number generators, as tensors and plain values (weights_only-loadable)


def capture_rng() -> dict[str, Any]:
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: Mapping[str, Any]) -> None:
    py = state["python"]
    random.setstate((int(py["version"]), tuple(int(v) for v in py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    keys = npy["keys"].numpy().astype(np.uint32)
    np.random.set_state((npy["kind"], keys, int(npy["pos"]), int(npy["has_gauss"]), float(npy["cached"])))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# --------------------------------------------------------------------------------------------
# files


def atomic_save(payload: Mapping[str, Any], path: Path) -> Path:
    """torch.save into `path` all at once: a temporary sibling, fsync, rename, fsync the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            torch.save(dict(payload), out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a power loss
    finally:
        os.close(folder)
    return path


def read(path: Path | str, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The payload of a checkpoint file, loaded weights-only; CheckpointError (one line) otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        text = str(err).strip()
        detail = text.splitlines()[0] if text else type(err).__name__
        raise CheckpointError(f"{path}: unreadable checkpoint, truncated or not one ({detail})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a t4bench checkpoint (no format {FORMAT!r})")
    return payload


def save(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: Stateful | None = None,
    scheduler: Stateful | None = None,
    scaler: Stateful | None = None,
    average: Stateful | None = None,
    loop: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Everything a run needs to continue after `loop['epoch']`. `model` is the unwrapped module
    (not DDP's wrapper, whose keys carry a `module.` prefix)."""
    payload = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        # ema.half_life_epochs: the averaged weights evaluation reads (t4bench.pytorch.averaging)
        "average": average.state_dict() if average is not None else None,
        "rng": capture_rng(),
        "loop": dict(loop),
        "meta": dict(meta or {}),
    }
    return atomic_save(payload, path)


def restore(
    payload: Mapping[str, Any],
    *,
    model: torch.nn.Module,
    optimizer: Stateful | None = None,
    scheduler: Stateful | None = None,
    scaler: Stateful | None = None,
    average: Stateful | None = None,
    rng: bool = True,
) -> dict[str, Any]:
    """Load the states into the given objects (and the RNGs); return the loop state."""
    model.load_state_dict(payload["model"])
    for target, key in ((optimizer, "optimizer"), (scheduler, "scheduler"), (scaler, "scaler"), (average, "average")):
        if target is not None and payload.get(key) is not None:
            target.load_state_dict(payload[key])
    if rng:
        restore_rng(payload["rng"])
    return dict(payload["loop"])


# --------------------------------------------------------------------------------------------
# the training loop's side (t4bench.pytorch.loop.Trainer, duck-typed so this module never imports the loop)


class TrainerLike(Protocol):
    model: torch.nn.Module  # unwrapped (DDP's wrapper shares its parameters)
    optimizer: Any
    scaler: Any
    average: Any  # the weight average (ema.half_life_epochs), or None
    samples_seen: int
    steps: int


def save_trainer(
    path: Path, trainer: TrainerLike, *, epoch: int, loop: Mapping[str, Any], meta: Mapping[str, Any] | None = None
) -> Path:
    """After `epoch` completed: the trainer's states and counters plus the loop's own state
    (train time so far, per-epoch throughputs, best quality...). Rank 0 calls it; the RNG states
    saved are rank 0's (exact resumes are exact for one rank, statistically equal for several)."""
    state = {**dict(loop), "epoch": epoch, "samples_seen": trainer.samples_seen, "steps": trainer.steps}
    guard = getattr(trainer, "guard", None)  # the divergence watch's reference loss, when it can say
    if guard is not None and hasattr(guard, "state_dict"):
        state["guard"] = guard.state_dict()
    return save(
        path,
        model=trainer.model,
        optimizer=trainer.optimizer,
        scaler=trainer.scaler,
        average=trainer.average,
        loop=state,
        meta=meta,
    )


def restore_trainer(payload: Mapping[str, Any], trainer: TrainerLike) -> dict[str, Any]:
    """Load a `save_trainer` checkpoint into a freshly built trainer (every rank); returns the
    loop state, whose `epoch` is the last one completed: training continues at epoch + 1."""
    saved_average = payload.get("average") is not None
    if saved_average != (trainer.average is not None):
        raise CheckpointError(
            f"the checkpoint was saved {'with' if saved_average else 'without'} a weight average and this run "
            f"{'averages' if trainer.average is not None else 'does not'} (ema.half_life_epochs): "
            "resume with the run's setting or start a new run"
        )
    loop = restore(
        payload, model=trainer.model, optimizer=trainer.optimizer, scaler=trainer.scaler, average=trainer.average
    )
    trainer.samples_seen = int(loop["samples_seen"])
    trainer.steps = int(loop["steps"])
    guard = getattr(trainer, "guard", None)
    if "guard" in loop and guard is not None and hasattr(guard, "load_state_dict"):
        guard.load_state_dict(loop.pop("guard"))
    return loop


# --------------------------------------------------------------------------------------------
# a run's checkpoint folder


def path_for(folder: Path, epoch: int) -> Path:
    return Path(folder) / f"epoch-{epoch:04d}.pt"


def rank_rng_path(folder: Path, epoch: int, rank: int) -> Path:
    """The RNG state of rank `rank` > 0 at `epoch` (rank 0's is in the checkpoint itself)."""
    return Path(folder) / f"epoch-{epoch:04d}.rank{rank}.rng.pt"


def save_rank_rng(folder: Path, epoch: int, rank: int, keep: int = 2) -> Path:
    """Rank `rank`'s generators beside the checkpoint of `epoch` (ranks draw differently: each one
    continues from its own state on resume); the rank's older files beyond `keep` removed."""
    path = atomic_save(
        {"format": FORMAT, "rng": capture_rng(), "loop": {"epoch": epoch}}, rank_rng_path(folder, epoch, rank)
    )
    own = sorted(Path(folder).glob(f"epoch-*.rank{rank}.rng.pt"))
    for old in own[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return path


def saved_epochs(folder: Path) -> list[int]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _NAME.match(p.name)))


def latest(folder: Path) -> Path | None:
    epochs = saved_epochs(folder)
    return path_for(folder, epochs[-1]) if epochs else None


def prune(folder: Path, keep: int = 2) -> None:
    """Remove all but the newest `keep` checkpoints (the newest may be mid-write by nobody: the
    writer renames only complete files)."""
    for epoch in saved_epochs(folder)[:-keep] if keep > 0 else []:
        path_for(folder, epoch).unlink(missing_ok=True)


def resolve(resume: str, tracking_uri: str | None = None) -> Path:
    """`resume=`: a checkpoint file, a folder of them (its newest), or an MLflow run id (the
    folder its `t4bench.checkpoint_dir` tag names)."""
    target = Path(resume).expanduser()
    if not target.exists() and _RUN_ID.match(resume) and tracking_uri:
        from mlflow.exceptions import MlflowException

        from t4bench.tracking.client import mlflow_client
        from t4bench.tracking.tags import run_tags

        client = mlflow_client(tracking_uri)
        try:
            tags = run_tags(client, client.get_run(resume))
        except MlflowException as err:
            raise CheckpointError(f"resume={resume}: no such run in {tracking_uri} ({err.error_code})") from None
        if FOLDER_TAG not in tags:
            raise CheckpointError(f"resume={resume}: the run wrote no checkpoints (no {FOLDER_TAG} tag)")
        target = Path(tags[FOLDER_TAG])
    if target.is_dir():
        found = latest(target)
        if found is None:
            raise CheckpointError(f"resume={resume}: no epoch-NNNN.pt checkpoint in {target}")
        return found
    if not target.exists():
        raise CheckpointError(f"resume={resume}: no such checkpoint file or folder")
    return target
