"""The seam between the framework-neutral part of a rank (`t4bench.rank`: MLflow run, MLPerf log,
telemetry, progress, Python/NumPy seeds) and a framework's training: what the neutral part hands
the training (`RunServices`), what it gets back (`RunResult`), the rank's handle (`RankSession`),
and `Framework`, the typed face each wing shows (`t4bench.pytorch.framework`,
`t4bench.tf.framework`; `t4bench.frameworks` lists them).

Nothing here imports a framework, and neither does a wing's `Framework`: its functions import the
wing's heavy modules when called, so a TensorFlow run never loads torch and a PyTorch run never
loads TensorFlow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from t4bench.errors import T4BenchError
from t4bench.tracking import names

if TYPE_CHECKING:
    from t4bench.benchmark import Benchmark
    from t4bench.mlperf import MLPerfLog
    from t4bench.progress import ProgressReporter
    from t4bench.run_env import RunEnvironment
    from t4bench.spec import RunSpec

T = TypeVar("T")


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


@dataclass(frozen=True)
class Resume:
    """`resume=` of a framework that writes checkpoints."""

    #: `reopened_run(cfg, env)`: the checkpoint's MLflow run as it was, reopened after its checks
    #: (None without `resume`)
    reopened_run: Callable[[RunSpec, RunEnvironment], Any]
    #: `restore(client, run_id, status, outcome)`: a FINISHED run put back after a failed attempt
    restore: Callable[[Any, str, str, str | None], None]


@dataclass(frozen=True)
class Framework:
    """One framework's wing, as the run machinery calls it. Building one imports nothing heavy:
    each function imports what it needs when called."""

    #: what a benchmark class declares (`Benchmark.framework`) and `model.framework` names
    name: str
    #: `join(cfg, env)`: this rank joined to its group, as a `RankSession`
    join: Join
    #: `spawn(cfg, env, fn, args)`: start the ranks of `hw.count=N` without an outer launcher; runs
    #: `fn(*args)` (importable by name) on env.world_size ranks, each seeing RANK/WORLD_SIZE/LOCAL_RANK
    #: (or Horovod's) so `env.for_spawned_rank(os.environ)` places it, and returns rank 0's result
    spawn: Spawn | None = None
    #: `preflight(env)`: the backends its ranks need are here, checked before any run exists
    #: (None: nothing to check)
    preflight: Callable[[RunEnvironment], None] | None = None
    #: None: the framework cannot resume
    resume: Resume | None = None


@contextlib.contextmanager
def loading(framework: str) -> Iterator[None]:
    """Around a wing's import of its heavy modules: a library that is not installed (torch, the
    tensorflow wheel) is one line naming the framework, not a traceback."""
    try:
        yield
    except ImportError as err:
        raise T4BenchError(f"framework {framework}: {err.name or 'a module'} cannot be imported ({err})") from err
