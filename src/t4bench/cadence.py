"""The MLPerf cadence every framework's training loop follows, written once and framework-free (no
torch, no TensorFlow): when to evaluate, when to stop, what to log at each MLPerf event, what
counts as diverged.

init (untimed: data, model) -> run_start -> per epoch: train, evaluating `1 / eval_every` times
(evenly spaced by batch count, the last at the epoch's end), stop at the first evaluation that
reaches the target quality, at max_epochs, when a callback stops the run (the Optuna pruner) or
when the loss diverges -> run_stop (success / aborted).

A framework plugs in a `Steps` (its trainer seen through six calls: train a slice of an epoch,
evaluate, wait for every rank, agree on rank 0's stop); `t4bench.pytorch.loop` and
`t4bench.tf.loop` are that adapter and nothing else.

`input=synthetic` measures throughput instead, also written once here (`measure_throughput`): an
untimed warm-up, then a fixed step count timed between run_start and run_stop, on one generated
batch that a framework's `SyntheticSteps` trains on.

Epochs are counted as trained fractions: an evaluation after batch b of n in epoch e is at epoch
(e - 1) + b / n, which is what `epochs_to_converge` reports. Per-evaluation metrics use the
evaluation's index (1, 2, ...) as step; with the default `eval_every: 1.0` that is the epoch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from t4bench import baselines
from t4bench.errors import T4BenchError
from t4bench.framework import EpochLogger, RunResult
from t4bench.mlperf import MLPerfLog, constants
from t4bench.progress import ProgressReporter
from t4bench.spec import RunSpec
from t4bench.stopping import StopRun
from t4bench.tracking import names
from t4bench.tracking.epoch_metrics import Evaluated, epoch_metrics

if TYPE_CHECKING:
    from t4bench.benchmark import Benchmark


class Diverged(Exception):
    """The loss broke the rule; the loop ends the run with outcome `diverged`."""


@dataclass
class DivergenceRule:
    """When a run has diverged (`divergence:` in conf/config.yaml): a non-finite loss, or a loss
    over `max_loss_ratio` x the reference loss, the mean of the run's first `reference_steps`
    steps (null or 0: only non-finite losses count). See t4bench.pytorch.divergence for why."""

    max_loss_ratio: float | None = 100.0
    reference_steps: int = 1

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> DivergenceRule:
        section = section or {}
        ratio = section.get("max_loss_ratio", cls.max_loss_ratio)
        steps = int(section.get("reference_steps", cls.reference_steps))
        if (ratio is not None and float(ratio) < 0) or steps < 1:
            raise T4BenchError(
                f"divergence.max_loss_ratio must be >= 0 or null and reference_steps >= 1, got {section}"
            )
        return cls(float(ratio) if ratio else None, steps)

    def check(self, loss: float, reference: float | None, what: str = "train loss") -> None:
        """Raise `Diverged` if `loss` breaks the rule against `reference` (None: not known yet)."""
        if not math.isfinite(loss):
            raise Diverged(f"{what} is {loss}")
        ratio = self.max_loss_ratio
        if ratio is None or reference is None or not math.isfinite(reference):
            return
        if reference > 0 and loss > ratio * reference:
            raise Diverged(
                f"{what} {loss:.4g} is over {ratio:g}x the first {self.reference_steps} step(s)' loss {reference:.4g}"
            )


class EpochCallback(Protocol):
    def on_epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> None:
        """After every evaluation that did not reach the target: `epoch` is the evaluation's index
        (the epoch when `eval_every` is 1), `metrics["epoch"]` the fractional epoch. Raises
        `StopRun` to end the run."""


class Steps(Protocol):
    """A framework's side of the cadence: its trainer, seen through these calls."""

    @property
    def global_batch(self) -> int: ...

    @property
    def samples_seen(self) -> int:
        """Samples trained so far (a divergence reports the epochs from it)."""
        ...

    def begin_epoch(self, epoch: int) -> int:
        """Start `epoch`'s training batches; returns how many there are."""
        ...

    def train(self, start: int, stop: int, progress: ProgressReporter, unit: str) -> dict[str, float]:
        """Train the epoch's batches [start, stop): train_loss, throughput, ...; raises `Diverged`."""
        ...

    def evaluate(self) -> dict[str, float]:
        """Quality metric name -> value, the same on every rank."""
        ...

    def barrier(self) -> None:
        """Return when every rank got here (the end of init)."""
        ...

    def agree(self, stop: str | None) -> str | None:
        """Rank 0's stop (an outcome, or None: go on), the same on every rank."""
        ...


class Trainer(Protocol):
    """What the shared half of an adapter needs from a framework's trainer."""

    global_batch: int
    samples_seen: int

    def evaluate(self) -> dict[str, float]: ...


T = TypeVar("T", bound=Trainer)


class TrainerSteps(Generic[T]):
    """The half of `Steps` that is the same in every framework: the batch counts and evaluation
    come straight from the trainer, an epoch's batches from the benchmark. A framework's adapter
    adds `train`, `barrier` and `agree`."""

    def __init__(self, bench: Benchmark, trainer: T) -> None:
        self.bench, self.trainer = bench, trainer
        self.batches: Any = ()
        self.iterator: Iterator[Any] = iter(())

    @property
    def global_batch(self) -> int:
        return self.trainer.global_batch

    @property
    def samples_seen(self) -> int:
        return self.trainer.samples_seen

    def begin_epoch(self, epoch: int) -> int:
        self.batches = self.bench.train_batches(epoch)
        self.iterator = iter(self.batches)
        return len(self.batches)

    def evaluate(self) -> dict[str, float]:
        return self.trainer.evaluate()


@dataclass
class Continued:
    """Where the loop picks up (a resumed run: t4bench.pytorch.resume): the first epoch to train,
    the training time already spent (run_train_s adds it), the earlier throughputs and
    evaluation count (metric steps go on)."""

    first_epoch: int = 1
    elapsed_s: float = 0.0
    throughputs: list[float] = field(default_factory=list)
    evaluations: int = 0


#: after a whole epoch without a stop: (epoch, elapsed_s, throughputs, evaluations) (checkpoints)
AfterEpoch = Callable[[int, float, list[float], int], None]


def reached_target(metrics: Mapping[str, float], target: Mapping[str, float]) -> bool:
    return all(metrics[name] >= float(threshold) for name, threshold in target.items())


def evaluations_per_epoch(eval_every: float) -> int:
    """`eval_every` (a fraction of an epoch, 1/k for a whole k) -> k."""
    per_epoch = round(1.0 / eval_every) if eval_every > 0 else 0
    if not 0 < eval_every <= 1 or abs(per_epoch * eval_every - 1.0) > 1e-3:
        raise T4BenchError(f"eval_every={eval_every}: must be 1/k of an epoch for a whole k >= 1 (1, 0.5, 0.25, ...)")
    return per_epoch


def evaluation_points(n_batches: int, per_epoch: int) -> list[int]:
    """Batch counts within an epoch of `n_batches` after which to evaluate (the last is the end)."""
    if n_batches <= 0:
        return [0]
    return sorted({max(1, round(j * n_batches / per_epoch)) for j in range(1, per_epoch + 1)})


def mllog_epoch(epoch: float) -> float | int:
    """Whole epochs stay integers in the MLPerf log and the progress lines (3, then 3.25 within one)."""
    return int(epoch) if float(epoch).is_integer() else round(epoch, 4)


def callback_stop(callbacks: Sequence[EpochCallback], evaluation: int, metrics: Mapping[str, float]) -> str | None:
    """The outcome a callback asked for (it raised `StopRun`), or None to keep training."""
    for callback in callbacks:
        try:
            callback.on_epoch_end(evaluation, metrics)
        except StopRun as stop:
            return stop.outcome
    return None


@dataclass
class _Tally:
    """The run so far, as the result reports it."""

    continued: Continued
    outcome: str = names.OUTCOME_NOT_CONVERGED
    epochs_done: float = 0.0
    epochs_to_converge: float | None = None
    note: str = ""
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        return self.outcome != names.OUTCOME_NOT_CONVERGED


@dataclass(frozen=True)
class Cadence:
    """One run's fixed parts: what to reach, how often to evaluate, where to report."""

    bench: Benchmark
    target: Mapping[str, float]
    max_epochs: int
    per_epoch: int
    mlperf: MLPerfLog
    progress: ProgressReporter
    logger: EpochLogger
    callbacks: Sequence[EpochCallback]
    is_main: bool

    @classmethod
    def of(cls, bench: Benchmark, cfg: RunSpec, per_epoch: int, **services: Any) -> Cadence:
        return cls(bench, cfg.model.target, int(cfg.max_epochs), per_epoch, **services)


def train_to_target(
    steps: Steps,
    run: Cadence,
    *,
    init_started: float,
    continued: Continued | None = None,
    after_epoch: AfterEpoch | None = None,
) -> RunResult:
    """Train until every target metric is reached, max_epochs epochs ran, a callback stopped the
    run, or the loss diverged; log the MLPerf events of init's end, the run and each evaluation."""
    tally = _Tally(continued or Continued())
    mlperf, progress, target = run.mlperf, run.progress, dict(run.target)
    mlperf.init_events(steps.global_batch, run.bench.train_size, run.bench.dataset_eval_size(), target)
    baselines.announce(run.bench, steps.global_batch, target, run.logger, progress, run.is_main)  # untimed
    steps.barrier()
    mlperf.end(constants.INIT_STOP)
    mlperf.start(constants.RUN_START)
    run_started = time.perf_counter()
    progress.line(f"init took {run_started - init_started:.1f}s; training to {target}")

    tally.epochs_done = float(tally.continued.first_epoch - 1)
    try:
        for epoch in range(tally.continued.first_epoch, run.max_epochs + 1):
            _train_epoch(steps, run, tally, epoch)
            if tally.stopped:
                break
            if after_epoch is not None:
                elapsed = tally.continued.elapsed_s + time.perf_counter() - run_started
                after_epoch(epoch, elapsed, tally.continued.throughputs, tally.continued.evaluations)
    except Diverged as err:
        tally.outcome, tally.note = names.OUTCOME_DIVERGED, str(err)
        tally.epochs_done = steps.samples_seen / max(run.bench.train_size, 1)
        progress.line(f"diverged: {tally.note}")

    # run_start to run_stop whatever the outcome; RunResult makes it the time to train only of a
    # converged run
    trained_s = tally.continued.elapsed_s + time.perf_counter() - run_started
    status = constants.SUCCESS if tally.outcome == names.OUTCOME_CONVERGED else constants.ABORTED
    mlperf.end(constants.RUN_STOP, status=status)
    throughputs = tally.continued.throughputs
    return RunResult(
        outcome=tally.outcome,
        epochs_run=tally.epochs_done,
        epochs_to_converge=tally.epochs_to_converge,
        train_s=trained_s,
        avg_throughput=sum(throughputs) / len(throughputs) if throughputs else 0.0,
        final_quality={k: v for k, v in tally.metrics.items() if k.startswith(names.EVAL_PREFIX)},
        note=tally.note,
    )


def _train_epoch(steps: Steps, run: Cadence, tally: _Tally, epoch: int) -> None:
    """One epoch: train to each evaluation point, evaluate, decide; `tally.stopped` after a stop."""
    mlperf, progress, unit = run.mlperf, run.progress, run.bench.throughput_unit
    mlperf.start(constants.EPOCH_START, epoch_num=epoch)
    n_batches = steps.begin_epoch(epoch)
    done = 0
    for point in evaluation_points(n_batches, run.per_epoch):
        started = time.perf_counter()
        progress.epoch_start(epoch, point - done)
        stats = steps.train(done, point, progress, unit)
        done = point
        tally.epochs_done = epoch - 1 + (done / n_batches if n_batches else 1.0)
        if done == n_batches:
            mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
        tally.continued.throughputs.append(stats[names.THROUGHPUT])
        tally.continued.evaluations += 1
        _evaluate(steps, run, tally, stats, started)
        if tally.stopped:
            if done < n_batches:  # stopped within the epoch: its block ends here
                mlperf.end(constants.EPOCH_STOP, epoch_num=epoch)
            return


def _evaluate(steps: Steps, run: Cadence, tally: _Tally, stats: Mapping[str, float], started: float) -> None:
    """Evaluate (MLPerf's eval block), log the metrics, and stop at the target or a callback's word."""
    mlperf, evaluation, epochs_done = run.mlperf, tally.continued.evaluations, tally.epochs_done
    epoch_num = mllog_epoch(epochs_done)
    mlperf.start(constants.EVAL_START, epoch_num=epoch_num)
    quality = steps.evaluate()
    mlperf.end(constants.EVAL_STOP, epoch_num=epoch_num)
    mlperf.eval_accuracy(quality, epoch_num)
    # time since the previous evaluation (the epoch's, with one evaluation per epoch)
    seconds = time.perf_counter() - started
    evaluated = Evaluated(quality, next(iter(run.target)), epochs_done)
    tally.metrics = metrics = epoch_metrics(stats, seconds, evaluated)
    run.logger.log_epoch(evaluation, metrics)
    run.progress.epoch_end(epoch_num, metrics, run.bench.throughput_unit)
    if reached_target(quality, run.target):
        tally.outcome, tally.epochs_to_converge = names.OUTCOME_CONVERGED, epochs_done
        return
    stop = steps.agree(callback_stop(run.callbacks, evaluation, metrics) if run.is_main else None)
    if stop is not None:
        tally.outcome = stop


class SyntheticSteps(Protocol):
    """A framework's side of `input=synthetic`: its trainer on one generated batch."""

    @property
    def global_batch(self) -> int: ...

    def repeat(self, count: int, progress: ProgressReporter, unit: str) -> dict[str, float]:
        """Train `count` steps on the generated batch: train_loss, throughput, ...; raises `Diverged`."""
        ...

    def barrier(self) -> None:
        """Return when every rank got here (the end of the warm-up)."""
        ...


def measure_throughput(
    steps: SyntheticSteps,
    bench: Benchmark,
    cfg: RunSpec,
    *,
    mlperf: MLPerfLog,
    progress: ProgressReporter,
    logger: EpochLogger,
) -> RunResult:
    """`input=synthetic`: `input.warmup_steps` untimed steps, then `input.steps` timed ones between
    run_start and run_stop, logged once (step 1). A run whose loss diverges (the same rule as
    training) reports no throughput."""
    unit = bench.throughput_unit
    warmup, timed = int(cfg.input.warmup_steps), int(cfg.input.steps)
    mlperf.event(constants.GLOBAL_BATCH_SIZE, steps.global_batch)
    started = time.perf_counter()
    try:
        # untimed warm-up: kernel selection or tracing and compilation, allocator growth, lazy init
        steps.repeat(warmup, ProgressReporter("off"), unit)
        steps.barrier()
        mlperf.end(constants.INIT_STOP)
        mlperf.start(constants.RUN_START)
        started = time.perf_counter()
        progress.epoch_start(1, timed)
        stats = steps.repeat(timed, progress, unit)
    except Diverged as err:
        progress.line(f"diverged: {err}")
        mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
        # a throughput measured on a diverged loss is not a throughput
        return RunResult(names.OUTCOME_DIVERGED, 0.0, None, time.perf_counter() - started, float("nan"), note=str(err))
    elapsed = time.perf_counter() - started
    metrics = epoch_metrics(stats, elapsed)
    logger.log_epoch(1, metrics)
    progress.epoch_end(1, metrics, unit)
    mlperf.end(constants.RUN_STOP, status=constants.ABORTED)
    return RunResult(names.OUTCOME_THROUGHPUT_ONLY, 0.0, None, elapsed, stats[names.THROUGHPUT])
