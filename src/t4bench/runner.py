"""Entry from the Hydra app: check the inputs before anything heavy loads, then train here or start
`hw.count` ranks on one MLflow run.

Only the preflight checks' light modules (Hydra, OmegaConf, stdlib) load at import: torch, MLflow
and the benchmark's module load after them, so a wrong `hw=` or `scale=` fails in about a second.
What one rank does lives in `t4bench.rank`; imports flow runner -> rank -> framework, never back.

The runner takes the run spec (t4bench.spec) the Hydra task function built of the job's composed
config, checked here (or by the command-line preflight, whose result arrives as `checked`); what the
run derives from it (emulation, GPU packing, the sweep launcher and Slurm job) is worked out as one
`RunDerived` value, and everything below takes the spec. The composed config is made read-only
first: nothing writes into it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from t4bench import emulation, frameworks, gc_pause, packing, seeding
from t4bench.benchmark import benchmark_class
from t4bench.errors import RunTerminated, T4BenchError
from t4bench.preflight import config, hardware
from t4bench.preflight.command_line import Checked
from t4bench.run_env import RunEnvironment
from t4bench.signals import sigterm_raises
from t4bench.spec import RunDerived, RunSpec
from t4bench.sweep import slurm
from t4bench.tracking import names, store_probe

if TYPE_CHECKING:
    from t4bench.benchmark import Benchmark
    from t4bench.tracking.run import RunTracker


def run(spec: RunSpec, output_dir: Path, checked: Checked | None = None) -> dict[str, Any]:
    """Check scale, hardware, backend and data before any run exists, then train here, or start
    `hw.count` ranks (one MLflow run, made here and handed to them). `spec`: the run spec of the
    job's composed config; `checked`: what the command-line preflight of this process passed (its
    checks of places are not made again for the same task overrides)."""
    OmegaConf.set_readonly(spec.config, True)  # from here on the config is read, never written
    env = checked.env_for(_task_overrides()) if checked is not None else None
    if env is None:
        config.check(spec)  # ranges and what this host holds, before anything else
        env = hardware.check(spec)  # no torch yet: hw=auto resolved, the launcher's ranks read
    # deterministic=true: CUBLAS_WORKSPACE_CONFIG before any CUDA context, inherited by spawned ranks
    seeding.deterministic_environment(spec.deterministic)
    spec = spec.with_derived(derive(spec, env, _multirun()))
    if env.is_main and checked is None:
        store_probe.tracking(str(spec.tracking.uri))  # a dead server or damaged store: one line in seconds
    bench_cls = benchmark_class(spec)
    framework = frameworks.framework_of(spec, bench_cls)
    frameworks.preflight(framework, env)  # PyTorch: torch.distributed / horovod.torch, the ranks' backends
    if not spec.input.synthetic and checked is None:
        bench_cls.check_inputs(spec)
    # `tracking.run_id`: a run made by a launcher (mlflow run) to train into; `resume=`: the
    # checkpoint's run, RUNNING again (also when this process spawns the ranks)
    given_run = spec.tracking.get("run_id")
    resumed = None if given_run or not env.is_main else frameworks.resumed_run(framework, spec, env)
    run_id = given_run or (resumed.info.run_id if resumed else None)
    try:
        if env.spawn:
            return _spawn_ranks(spec, env, output_dir, bench_cls, frameworks.spawner(framework), run_id)
        from t4bench.rank import run_rank  # MLflow and the framework: only now

        return run_rank(spec, env, output_dir, run_id=run_id)
    except BaseException:
        if resumed is not None and resumed.info.status == names.FINISHED:
            # a failed attempt to train a finished run further leaves its result as it was
            frameworks.restore_finished(framework, spec, resumed)
        raise


def derive(spec: RunSpec, env: RunEnvironment, multirun: bool) -> RunDerived:
    """What this run works out from its spec and where it runs, as one value: emulate.world_size=N
    (N ranks' global batch on this one), how many runs share the GPU (t4bench.gpu_share /
    t4bench.mps, a packed CPU run's threads), and which sweep launcher and Slurm job it runs in."""
    batch, emulated = emulation.derive(spec, env.world_size)
    share, threads, shared = packing.derive(spec, multirun)
    return RunDerived(tags={**emulated, **shared, **slurm.tags()}, batch_size=batch, gpu_share=share, threads=threads)


def _task_overrides() -> list[str]:
    """The job's task overrides as Hydra parsed them (none outside a Hydra job)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _multirun() -> bool:
    """Whether this run is one job of a --multirun sweep (whose runs may share the GPU)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _spawn_ranks(
    spec: RunSpec,
    env: RunEnvironment,
    output_dir: Path,
    bench_cls: type[Benchmark],
    spawn: frameworks.Spawn,
    run_id: str | None = None,
) -> dict[str, Any]:
    """hw.count=N without an outer launcher: make the MLflow run, start N ranks on it with the
    framework's `spawn` (PyTorch: torch elastic_launch, or horovod.run for dist=horovod), and mark
    it FAILED/KILLED if they die."""
    from t4bench.tracking import process
    from t4bench.tracking.run import RunTracker, contract_tags

    process.discard()  # the ranks track the run on this process's run: here it only makes and fails it
    # ranks are fresh interpreters without Hydra: hand them the spec with ${...} resolved here
    resolved = spec.resolved()
    tracker = RunTracker(str(spec.tracking.uri), run_id or None)
    tags = {**contract_tags(spec, env, bench_cls), **env.tags, names.LAUNCHER: env.launcher}
    run_id = tracker.start(spec, env, tags)
    status = names.FAILED
    try:
        gc_pause.resume()  # this process waits on its ranks, which run_start on their own
        with sigterm_raises():
            summary = spawn(spec, env, _spawned_rank, (resolved, env, str(output_dir), run_id))
        status = names.FINISHED
        return summary
    except (KeyboardInterrupt, RunTerminated) as stop:
        status = names.KILLED
        if isinstance(stop, RunTerminated):
            stop.run_id = run_id
        raise
    except T4BenchError as err:  # a rank's one line: it names the run (t4bench.__main__)
        err.run_id = run_id
        raise
    finally:
        if status != names.FINISHED:
            _fail_if_running(tracker, status)


def _spawned_rank(spec: RunSpec, env: RunEnvironment, output_dir: str, run_id: str) -> dict[str, Any]:
    """One rank started by `_spawn_ranks` (importable by name: ranks are fresh interpreters)."""
    from t4bench.rank import run_rank

    try:
        return run_rank(spec, env.for_spawned_rank(os.environ), Path(output_dir), run_id=run_id)
    except T4BenchError as err:
        print(f"t4bench: error: {err}", file=sys.stderr, flush=True)
        raise


def _fail_if_running(tracker: RunTracker, status: str) -> None:
    if tracker.client is None or not tracker.run_id:
        return
    try:
        if tracker.client.get_run(tracker.run_id).info.status == names.RUNNING:
            outcome = names.OUTCOME_KILLED if status == names.KILLED else names.OUTCOME_FAILED
            tracker.set_tags({names.OUTCOME: outcome})
            tracker.end(status)
    except Exception:  # the store is gone too: nothing more to do
        pass
