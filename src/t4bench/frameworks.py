"""The seam between the framework-neutral part of a rank (`t4bench.rank`: MLflow run, MLPerf log,
telemetry, progress, Python/NumPy seeds) and a framework's training.

A framework plugs in with one function, `join(cfg, env) -> RankSession`, named in `ENTRIES` under
the framework a benchmark class declares (`Benchmark.framework`, "pytorch" by default). Nothing
here imports a framework: `join` imports only the entry of the run's framework, so a TensorFlow
run never loads torch and a PyTorch run never loads TensorFlow.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec
from t4bench.tracking import names

if TYPE_CHECKING:
    from t4bench.benchmark import Benchmark
    from t4bench.mlperf import MLPerfLog
    from t4bench.progress import ProgressReporter
    from t4bench.run_env import RunEnvironment

T = TypeVar("T")

#: framework -> "module:function" returning a RankSession: `join(cfg, env)`
ENTRIES = {
    "pytorch": "t4bench.pytorch.rank:join",
    "tensorflow": "t4bench.tf.rank:join",
}
#: framework -> "module:function" starting the ranks of `hw.count=N` without an outer launcher:
#: `spawn(cfg, env, fn, args)` runs `fn(*args)` (importable by name) on env.world_size ranks, each
#: seeing RANK/WORLD_SIZE/LOCAL_RANK (or Horovod's) so `env.for_spawned_rank(os.environ)` places
#: it, and returns rank 0's result
SPAWNERS = {
    "pytorch": "t4bench.pytorch.launch:spawn",
    "tensorflow": "t4bench.tf.launch:spawn",
}
#: framework -> "module:function" checking, before any run exists, that the backends its ranks
#: need are here: `preflight(env)` (a framework without one has nothing to check)
PREFLIGHTS = {
    "pytorch": "t4bench.pytorch.launch:preflight",
}
#: framework -> the module behind `resume=`, with `reopened_run(cfg, env)` (the checkpoint's MLflow
#: run as it was, reopened after its checks; None without `resume`) and `restore(client, run_id,
#: status, outcome)` (a FINISHED run put back after a failed attempt); a framework without one
#: cannot resume
RESUMERS = {
    "pytorch": "t4bench.pytorch.resume",
}


class EpochLogger(Protocol):
    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None: ...


@dataclass(frozen=True)
class RunServices:
    """What the neutral part hands the framework's training loop (rank 0's are live, the other
    ranks' are no-ops)."""

    #: MLPerf log: the loop writes INIT_STOP, RUN_START, EPOCH_*, EVAL_*, RUN_STOP; RUN_START and
    #: RUN_STOP also bound telemetry's energy window, so a loop must write them
    mlperf: MLPerfLog
    progress: ProgressReporter
    #: per-epoch metrics (step = epoch): train_loss, throughput, epoch_time_s, eval_quality, eval_<name>
    logger: EpochLogger
    #: cfg.callbacks, instantiated (objects with `on_epoch_end(epoch, metrics)`; rank 0 only)
    callbacks: Sequence[Any]
    #: time.perf_counter() when the rank started (init time is reported from it)
    init_started: float


class TrainResult(Protocol):
    """What training returns (`t4bench.pytorch.loop.RunResult` is one)."""

    #: one of tracking.names.OUTCOME_* (converged, not_converged, diverged, pruned, throughput_only)
    outcome: str
    #: epochs trained (fractional when evaluations fall inside an epoch)
    epochs_run: float
    #: the epoch at which the target was reached; None when it was not
    epochs_to_converge: float | None
    #: seconds from MLPerf run_start to run_stop, whatever the outcome
    train_s: float
    avg_throughput: float
    #: eval_<name> -> value of the last evaluation
    final_quality: dict[str, float]
    #: why the run ended as it did, when that needs saying (a divergence's loss); "" otherwise
    note: str
    #: peak device memory in GiB (CUDA runs), None elsewhere
    peak_memory_gib: float | None

    @property
    def converged(self) -> bool: ...

    @property
    def time_to_train_s(self) -> float | None:
        """MLPerf's time to train: `train_s` of a converged run, None for any other."""
        ...


@dataclass
class RunResult:
    """The `TrainResult` every framework's loop returns."""

    #: one of tracking.names.OUTCOME_* (converged, not_converged, diverged, pruned, throughput_only)
    outcome: str
    #: epochs of training done (fractional when the run stopped within an epoch)
    epochs_run: float
    #: epochs of training done at the first evaluation that met the target; None when none did
    epochs_to_converge: float | None
    #: seconds from MLPerf run_start to run_stop (a resumed run's earlier attempts included),
    #: whatever the outcome: how long the run trained, not a time to train unless it converged
    train_s: float
    avg_throughput: float
    final_quality: dict[str, float] = field(default_factory=dict)
    #: why the run ended as it did, when that needs saying (a divergence's loss); "" otherwise
    note: str = ""
    #: the most device memory the run held at once (GiB; torch's allocator on CUDA), None off a GPU:
    #: what packing several runs on one GPU needs to know
    peak_memory_gib: float | None = None

    @property
    def converged(self) -> bool:
        return self.outcome == names.OUTCOME_CONVERGED

    @property
    def time_to_train_s(self) -> float | None:
        """MLPerf's time to train: `train_s` of a converged run. None for every other outcome: a
        run that stopped short of its target (max_epochs, divergence, pruning) or only measured
        throughput has no time to train, and reporting its seconds as one makes it look fastest."""
        return self.train_s if self.converged else None


class RankSession(Protocol):
    """One rank of a framework, joined to its group (made by the framework's `join`)."""

    def broadcast(self, obj: T) -> T:
        """Rank 0's picklable object on every rank (the MLflow run id, the output directory)."""
        ...

    def tags(self) -> dict[str, str]:
        """t4bench.device, t4bench.dist_backend and t4bench.threads as this framework set them."""
        ...

    def seed(self, seed: int) -> None:
        """Seed the framework's generators (Python's and NumPy's are seeded already)."""
        ...

    def train(self, bench_cls: type[Benchmark], services: RunServices) -> TrainResult:
        """Build the benchmark (MLPerf init) and train it to the target, or measure throughput for
        `input.synthetic`; exceptions propagate (the run is then closed FAILED or KILLED)."""
        ...

    def close(self) -> None:
        """Leave the group after a finished run."""
        ...


Join = Callable[["RunSpec", "RunEnvironment"], RankSession]
Spawn = Callable[["RunSpec", "RunEnvironment", Callable[..., Any], tuple[Any, ...]], Any]


def _load(table: Mapping[str, str], framework: str, what: str) -> Any:
    spec = table.get(framework)
    if spec is None:
        raise T4BenchError(f"framework {framework!r} has no {what}; known: {', '.join(table)}")
    module_name, _, function = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise T4BenchError(f"framework {framework}: {module_name} cannot be imported ({err})") from err
    return getattr(module, function)


def entry(framework: str) -> Join:
    """The `join` function of `framework`, imported now."""
    join: Join = _load(ENTRIES, framework, "rank entry")
    return join


def spawner(framework: str) -> Spawn:
    """The `spawn` function of `framework` (for hw.count=N without an outer launcher), imported now."""
    spawn: Spawn = _load(SPAWNERS, framework, "rank spawner")
    return spawn


def preflight(framework: str, env: RunEnvironment) -> None:
    """`framework`'s check of its ranks' backends (torch.distributed, horovod.torch), if it has one."""
    if framework in PREFLIGHTS:
        _load(PREFLIGHTS, framework, "preflight")(env)


def _resumer(framework: str) -> Any:
    module_name = RESUMERS.get(framework)
    if module_name is None:
        raise T4BenchError(f"framework {framework!r} has no resume (checkpoints); known: {', '.join(RESUMERS)}")
    return importlib.import_module(module_name)


def resumed_run(framework: str, cfg: RunSpec, env: RunEnvironment) -> Any:
    """`resume=...`: the checkpoint's MLflow run as it was before this attempt, reopened by
    `framework` (None without resume)."""
    if cfg.get("resume") in (None, ""):
        return None
    return _resumer(framework).reopened_run(cfg, env)


def restore_finished(framework: str, cfg: RunSpec, run: Any) -> None:
    """After a failed attempt to train the FINISHED `run` further: its status and outcome as they were."""
    from t4bench.tracking.client import mlflow_client

    client = mlflow_client(str(cfg.tracking.uri))
    _resumer(framework).restore(client, run.info.run_id, names.FINISHED, run.data.tags.get(names.OUTCOME))


def framework_of(cfg: RunSpec, bench_cls: type[Benchmark]) -> str:
    """The framework `bench_cls` declares; a `model.framework` in the config must agree with it."""
    declared = str(bench_cls.framework)
    configured = cfg.model.get("framework")
    if configured is not None and str(configured) != declared:
        raise T4BenchError(
            f"model.framework={configured} but model.benchmark={cfg.model.benchmark} is a {declared} benchmark"
        )
    return declared


def join(cfg: RunSpec, env: RunEnvironment, bench_cls: type[Benchmark]) -> RankSession:
    """Join this rank's group with the framework `bench_cls` declares."""
    return entry(framework_of(cfg, bench_cls))(cfg, env)
