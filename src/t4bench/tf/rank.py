"""The TensorFlow side of a rank (joined through `t4bench.tf.framework`): threads, the tf.distribute
strategy, the benchmark and its training through `t4bench.tf.loop`. Everything framework-neutral
around it (MLflow run, MLPerf log, telemetry, progress, seeds of Python and NumPy) is
`t4bench.rank`'s. torch is never imported on this path.

Strategies, by where the ranks train:
- one CPU process: OneDeviceStrategy on the CPU;
- hw=cpu hw.count=N: N worker processes (started by `t4bench.tf.launch` with TF_CONFIG), one
  MultiWorkerMirroredStrategy (ring all-reduce over gRPC) across them;
- a GPU profile: ONE process drives every GPU of the host, MirroredStrategy over hw.count GPUs
  (NCCL all-reduce); `t4bench.tf.launch` runs it in the launching process instead of spawning.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from t4bench import run_env, seeding
from t4bench.benchmark import Benchmark
from t4bench.errors import T4BenchError
from t4bench.framework import RunServices, TrainResult
from t4bench.run_env import RunEnvironment
from t4bench.spec import RunSpec
from t4bench.tf import launch
from t4bench.tracking import names

T = TypeVar("T")

#: whether this process has switched TensorFlow's op determinism on (deterministic=true); process-wide
_OP_DETERMINISM = {"on": False}

HOROVOD_TF_MISSING = (
    "dist=horovod with framework=tensorflow needs Horovod's TensorFlow binding, which t4bench does not "
    "wire: scripts/build_horovod.sh builds Horovod for PyTorch only, and horovod 0.28.1's TensorFlow "
    "helpers do not take Keras 3 variables (docs/tensorflow.md); leave dist at its default "
    "(tf.distribute, hw.count=N)"
)


def settings_for(cfg: RunSpec) -> dict[str, Any]:
    """`cfg.tensorflow` with every per-scale value ({mini: .., reference: ..}) picked for this scale."""
    scale = str(cfg.scale.name)
    picked: dict[str, Any] = {}
    for key, value in (cfg.get("tensorflow") or {}).items():
        if key == "benchmarks":  # keyed by model, read by the config itself (model.benchmark)
            continue
        if isinstance(value, Mapping):
            if scale not in value:
                raise T4BenchError(f"tensorflow.{key} has no value for scale={scale} (has {', '.join(value)})")
            value = value[scale]
        picked[str(key)] = value
    return picked


def _threads(env: RunEnvironment) -> int | None:
    """hw.threads / the host's cores split between local ranks (`env.threads`), else
    OMP_NUM_THREADS: TensorFlow's own thread pools do not read it, torch does, and a comparison
    of the two must give both the same cores."""
    if env.threads is not None:
        return env.threads
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return int(omp) if omp.isdigit() and int(omp) > 0 else None


def _set_threads(tf: Any, threads: int | None) -> None:
    """Size TensorFlow's thread pools, before it creates them. A second run in the same process
    (Hydra's multirun launches jobs in-process) finds them created: they keep the first run's
    size, which is the same configuration's."""
    if threads is None or tf.config.threading.get_intra_op_parallelism_threads() == threads:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass


class TFRank:
    """A `framework.RankSession` for TensorFlow benchmarks."""

    def __init__(self, cfg: RunSpec, env: RunEnvironment) -> None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ INFO lines are noise in a run's output
        if env.dist_backend == "horovod":
            raise T4BenchError(HOROVOD_TF_MISSING)
        import tensorflow as tf

        from t4bench.tf.context import TFContext

        self.cfg, self.env = cfg, env
        self.threads = _threads(env)
        _set_threads(tf, self.threads)
        import keras

        keras.backend.clear_session()  # a previous run in this process (Hydra multirun) leaves its graphs
        # deterministic=true: TF's op determinism (its random ops then need a seed: `seed` below
        # sets the global one before any is built). TensorFlow has no public way to switch it off
        # again, so the tag reads what this process has had switched on
        if cfg.deterministic:
            tf.config.experimental.enable_op_determinism()
            _OP_DETERMINISM["on"] = True
        self.strategy, workers, self.backend = self._strategy(tf)
        self.ctx = TFContext(
            strategy=self.strategy,
            precision=str(env.hw.precision),
            rank=env.rank if workers > 1 else 0,
            workers=workers,
            seed=int(cfg.seed),
            data_root=Path(str(cfg.paths.data_root)),
            settings=settings_for(cfg),
            data_seed=cfg.data_seed,
        )

    def _strategy(self, tf: Any) -> tuple[Any, int, str]:
        """(strategy, worker processes, the dist_backend tag)."""
        env = self.env
        if env.device_kind == "cuda":
            gpus = tf.config.list_physical_devices("GPU")
            if len(gpus) < env.world_size:
                raise T4BenchError(
                    f"hw={env.hw.name} hw.count={env.world_size} trains on CUDA, but TensorFlow {tf.__version__} "
                    f"here sees {len(gpus)} GPU(s) (tensorflow-cpu, or no usable driver)"
                )
            if env.world_size == 1:
                return tf.distribute.OneDeviceStrategy("/gpu:0"), 1, "none"
            devices = [f"/gpu:{index}" for index in range(env.world_size)]
            return tf.distribute.MirroredStrategy(devices), 1, "tf.distribute/MirroredStrategy (NCCL)"
        if env.world_size == 1:
            return tf.distribute.OneDeviceStrategy("/cpu:0"), 1, "none"
        if not os.environ.get("TF_CONFIG"):
            raise T4BenchError(
                f"{env.world_size} CPU ranks need TF_CONFIG (the cluster and this worker's index) in each "
                "rank's environment; give hw.count=N without a launcher and t4bench sets it"
            )
        ring = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=ring)
        return strategy, env.world_size, "tf.distribute/MultiWorkerMirroredStrategy (ring, gRPC)"

    def broadcast(self, obj: T) -> T:
        """Rank 0's object on every worker: its pickle summed over workers (the others add zeros)."""
        if self.ctx.workers == 1:
            return obj
        import tensorflow as tf

        strategy = self.strategy

        def sum_over_workers(values: list[int]) -> Any:
            local = tf.constant(values, tf.int32)
            return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(local,)), axis=None)

        data = pickle.dumps(obj) if self.env.is_main else b""
        (length,) = sum_over_workers([len(data)]).numpy()
        summed = sum_over_workers(list(data.ljust(int(length), b"\0"))).numpy()
        loaded: T = pickle.loads(bytes(int(b) for b in summed))
        return loaded

    def tags(self) -> dict[str, str]:
        import tensorflow as tf

        kind = "gpu" if self.env.device_kind == "cuda" else "cpu"
        tags = {}
        if self.env.launcher == run_env.ELASTIC_LAUNCH:  # hw.count=N: t4bench.tf.launch started them
            tags[names.LAUNCHER] = launch.LAUNCHER_NAME if self.ctx.workers > 1 else "none (one process, all GPUs)"
        return {
            **tags,
            names.DIST_BACKEND: self.backend,
            names.DEVICE: f"{kind} x{self.env.world_size}",
            names.THREADS: str(self.threads or tf.config.threading.get_intra_op_parallelism_threads() or "tf default"),
            # the versions this run imported (the wheel is tensorflow-cpu or tensorflow)
            f"{names.VERSION_PREFIX}tensorflow": tf.__version__,
            f"{names.VERSION_PREFIX}keras": __import__("keras").__version__,
            **seeding.deterministic_tags(_OP_DETERMINISM["on"]),
        }

    def seed(self, seed: int) -> None:
        import keras

        keras.utils.set_random_seed(seed)  # Python, NumPy and TensorFlow's global generator

    def train(self, bench_cls: type[Benchmark], services: RunServices) -> TrainResult:
        from t4bench.tf import loop

        if getattr(bench_cls, "framework", "pytorch") != "tensorflow":
            raise T4BenchError(
                f"model.benchmark={self.cfg.model.benchmark} is a {bench_cls.framework} benchmark; "
                "framework=tensorflow runs the model's Keras benchmark (model=resnet50 only)"
            )
        bench = bench_cls(self.cfg, self.ctx)
        if self.cfg.input.synthetic:
            return loop.measure_throughput(bench, self.cfg, self.ctx, services)
        return loop.train_to_target(bench, self.cfg, self.ctx, services)

    def close(self) -> None:
        """tf.distribute has no group to leave; the worker processes exit after the run."""


def join(cfg: RunSpec, env: RunEnvironment) -> TFRank:
    return TFRank(cfg, env)
