"""The framework seam (issues 12 and 16): the run machinery (preflight, run environment, MLflow run,
MLPerf log, telemetry, progress, seeds) carries a framework other than PyTorch without importing
torch. A NumPy least-squares "framework" plugs in as one more `t4bench.frameworks.FRAMEWORKS` entry
and trains through `t4bench.runner.run` in a fresh interpreter, on a real MLflow store.

Run as a script (`python tests/test_frameworks.py OUT`), this file is that interpreter's side.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from t4bench import frameworks
from t4bench.benchmark import Benchmark
from t4bench.errors import T4BenchError
from t4bench.framework import Framework, RunResult, RunServices
from t4bench.tracking.tags import run_tags

REPO = Path(__file__).resolve().parents[1]


class LeastSquares(Benchmark):
    """y = X w + noise; quality is the negative mean squared error on held-out rows."""

    name = "least_squares"
    framework = "numpy"

    def __init__(self, cfg: Any, ctx: Any) -> None:
        super().__init__(cfg, ctx)
        rng = np.random.default_rng(int(cfg.seed))
        self.true_w = rng.normal(size=8)
        self.x = rng.normal(size=(512, 8))
        self.y = self.x @ self.true_w + 0.01 * rng.normal(size=512)

    def dataset_train_size(self) -> int:
        return 384

    def build_model(self) -> Any:
        return np.zeros(8)

    def train_batches(self, epoch: int) -> Iterable[Any]:
        return [(self.x[i : i + 64], self.y[i : i + 64]) for i in range(0, 384, 64)]

    def loss(self, model: Any, batch: Any) -> tuple[Any, int]:
        x, y = batch
        return float(np.mean((x @ model - y) ** 2)), len(x)

    def evaluate(self, model: Any) -> Mapping[str, float]:
        return {"neg_mse": -float(np.mean((self.x[384:] @ model - self.y[384:]) ** 2))}


class NumpySession:
    """A `framework.RankSession`: one process, gradient descent in NumPy."""

    def __init__(self, cfg: Any, env: Any) -> None:
        self.cfg, self.env = cfg, env

    def broadcast(self, obj: Any) -> Any:
        return obj

    def tags(self) -> dict[str, str]:
        return {"t4bench.device": "cpu x1", "t4bench.dist_backend": "none", "t4bench.threads": "1"}

    def seed(self, seed: int) -> None:
        pass  # NumPy's generator is seeded by the run already

    def train(self, bench_cls: type[Benchmark], services: RunServices) -> RunResult:
        import time

        from t4bench.mlperf import constants

        bench = bench_cls(self.cfg, None)  # type: ignore[arg-type]
        w = bench.build_model()
        services.mlperf.end(constants.INIT_STOP)
        services.mlperf.start(constants.RUN_START)
        started = time.perf_counter()
        outcome, quality, epoch = "not_converged", {}, 0
        for epoch in range(1, 51):
            for x, y in bench.train_batches(epoch):
                w -= 0.1 * 2 * x.T @ (x @ w - y) / len(x)
            quality = {f"eval_{k}": v for k, v in bench.evaluate(w).items()}
            services.logger.log_epoch(epoch, {"eval_quality": quality["eval_neg_mse"], **quality})
            if quality["eval_neg_mse"] > -0.001:
                outcome = "converged"
                break
        elapsed = time.perf_counter() - started
        services.mlperf.end(
            constants.RUN_STOP, status=constants.SUCCESS if outcome == "converged" else constants.ABORTED
        )
        converged_at = epoch if outcome == "converged" else None
        return RunResult(outcome, epoch, converged_at, elapsed, bench.train_size * epoch / elapsed, quality)

    def close(self) -> None:
        pass


def join(cfg: Any, env: Any) -> NumpySession:
    return NumpySession(cfg, env)


def test_an_unknown_or_contradicted_framework_is_one_line() -> None:
    from omegaconf import OmegaConf

    with pytest.raises(T4BenchError, match=r"^framework 'jax' has no rank entry; known: pytorch, tensorflow"):
        frameworks.entry("jax")
    with pytest.raises(T4BenchError, match=r"^framework 'jax' has no rank spawner"):
        frameworks.spawner("jax")
    cfg = OmegaConf.create({"model": {"framework": "pytorch", "benchmark": "test_frameworks.LeastSquares"}})
    with pytest.raises(T4BenchError, match=r"model.framework=pytorch but .*LeastSquares is a numpy benchmark"):
        frameworks.framework_of(cfg, LeastSquares)
    assert frameworks.framework_of(OmegaConf.create({"model": {}}), LeastSquares) == "numpy"


def test_a_numpy_framework_runs_through_the_machinery_without_torch(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    proc = subprocess.run(
        [sys.executable, __file__, str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["torch_imported"] is False
    assert report["summary"]["outcome"] == "converged"
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(report["summary"]["run_id"])
    assert run.info.status == "FINISHED"
    tags = run_tags(client, run)
    assert tags["t4bench.framework"] == "numpy" and tags["t4bench.outcome"] == "converged"
    assert tags["t4bench.device"] == "cpu x1" and tags["t4bench.launcher"] == "none"
    assert run.data.metrics["eval_quality"] > -0.001
    log = (tmp_path / "out" / "mlperf.log").read_text()
    assert '"key": "run_start"' in log and '"key": "run_stop"' in log
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"resolved_config.yaml", "mlperf.log"} <= artifacts


def _main(out: Path) -> None:
    """Compose the app's config for the NumPy framework and run it as `python -m t4bench` would."""
    from hydra import compose, initialize_config_dir

    from t4bench import runner
    from t4bench.spec import build_spec

    sys.path.insert(0, str(Path(__file__).parent))
    frameworks.FRAMEWORKS["numpy"] = Framework("numpy", join)
    overrides = [
        "model.benchmark=test_frameworks.LeastSquares",
        "~model.framework",
        "progress=off",
        f"tracking.uri=sqlite:///{out}/mlflow.db",
        f"paths.data_root={out}",
        f"checkpoint.dir={out}/checkpoints",  # its default names Hydra's output folder, unset here
    ]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
        summary = runner.run(build_spec(cfg), out / "out")
    print(json.dumps({"summary": summary, "torch_imported": "torch" in sys.modules}, default=float))


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
