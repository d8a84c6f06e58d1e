"""Shared fixtures: run the real `python -m t4bench` in a subprocess against a throwaway MLflow
store, compose configs without running them, and skip GPU-only tests on CPU hosts."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from t4bench.pytorch.context import RunContext
    from t4bench.spec import RunSpec

# Under pytest-xdist the host's cores are split between the workers: every run a test starts (and
# torch in the worker itself) gets its share of threads, unless the caller set OMP_NUM_THREADS.
# Two workers whose runs each take every core oversubscribe them, and torch's OpenMP threads then
# wait for each other: a ResNet step of two 2-thread runs side by side on the 2-core CI host took
# 2.4x as long as that of two 1-thread runs.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    os.environ.setdefault("OMP_NUM_THREADS", _share)
    os.environ.setdefault("MKL_NUM_THREADS", os.environ["OMP_NUM_THREADS"])

# torch's side first, whatever tests are selected: importing torchvision.models (torch._dynamo,
# triton) after TensorFlow is loaded in the same process segfaults (docs/tensorflow.md), and the
# TF tests load TensorFlow in this process
import torchvision.models  # noqa: F401  # isort: skip

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "conf"
DATA_ROOT = Path(os.environ.get("T4BENCH_DATA_DIR", REPO / "data")).resolve()


@functools.cache
def can_unshare_mounts() -> bool:
    """Whether this process may mount in a private namespace (`unshare -m`, as root): the tests of a
    read-only or a full file system mount one."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-gpu", action="store_true", help="run @pytest.mark.gpu tests")


#: the tests that read conftest's session-wide shared runs, by group: each group runs in one
#: pytest-xdist worker, so each shared run is made once (test_vision_e2e and the MLPerf compliance
#: test read the converged vision minis, test_translation and the compliance test the translation
#: minis, the compliance test and the TensorFlow test the one-epoch PyTorch ResNet mini); the groups
#: share no run, so two workers run them side by side. Each group is named for the fixture its tests
#: read.
SHARED_RUN_TESTS = {
    "vision_minis": (
        "test_vision_e2e.py::test_mini_converges_with_the_full_contract",
        "test_mlperf_compliance.py::test_converged_vision_mini_log_passes_the_checker",
    ),
    "translation_minis": (
        "test_translation.py::test_mini_gnmt_and_transformer_reach_their_bleu_targets",
        "test_mlperf_compliance.py::test_translation_trained_past_the_floor_passes",
    ),
    "resnet50_one_epoch": (
        "test_mlperf_compliance.py::test_one_epoch_resnet50_log_passes_the_checker",
        "test_tf_e2e.py::test_keras_resnet_mini_reaches_the_target_without_torch",
    ),
}
#: the groups handed out first, longest first (from `--durations` of a full CI run; resnet50_one_epoch
#: placed by its runs' CPU seconds): with two workers the long ones overlap, and the many short ones
#: fill in at the end
LONGEST_FIRST = (
    "vision_minis",
    "translation_minis",
    "test_trial_kill_points",
    "test_slurm",
    "test_honest_metrics",
    "test_store_refusals",
    "test_wheel_install",
    "test_seed_sources",
    "resnet50_one_epoch",
    "test_tf_e2e",
    "test_report",
    "test_resume_safety",
    "test_ncf_run",
    "test_distributed",
    "test_mlperf_compliance",
    "test_translation",
    "test_vision_e2e",
)


def xdist_group_of(nodeid: str) -> str:
    """The group of the test `nodeid` that one pytest-xdist worker runs whole: its shared-run group
    (SHARED_RUN_TESTS), else its file (so a file's module-scoped fixture, a Slurm cluster or a report
    store, is made once)."""
    path, _, name = nodeid.split("@")[0].partition("::")
    test = f"{Path(path).name}::{name.split('[')[0]}"
    group = next((g for g, tests in SHARED_RUN_TESTS.items() if test in tests), None)
    return group or Path(path).name.removesuffix(".py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """`--dist loadgroup` with conftest's groups. pytest-xdist 3.8 passes a test's xdist_group to
    its scheduler in the test id, which pytest 9.2 no longer lets a plugin change (pytest-xdist
    issue #1386): its loadgroup silently hands out single tests, so a file's module fixture and
    the shared runs were made in both workers. Grouping by the id itself needs no marker."""
    from xdist.scheduler import LoadScopeScheduling

    class ConftestGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return ConftestGroups(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # longest groups first (--no-loadscope-reorder in pyproject.toml keeps this order for the
    # scheduler), then the other groups that hold a slow test (end-to-end runs), then the rest: a
    # worker runs a whole group once handed it, so the groups handed out last must be short for the
    # two workers to finish together (an end-to-end file left last in file order kept one worker
    # busy alone). sorted() is stable, so within a rank the files keep their order, the same in
    # every worker
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    slow = {xdist_group_of(item.nodeid) for item in items if "slow" in item.keywords}

    def handed_out(item: pytest.Item) -> int:
        group = xdist_group_of(item.nodeid)
        return rank.get(group, len(rank) + (group not in slow))

    items[:] = sorted(items, key=handed_out)
    if config.getoption("--run-gpu") and cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run with --run-gpu on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that reads a shared-run group's fixture outside that group would make the runs a second
    time in another worker: it fails, saying where to list it."""
    for group in SHARED_RUN_TESTS:
        if group in getattr(item, "fixturenames", ()) and xdist_group_of(item.nodeid) != group:
            pytest.fail(f"{item.nodeid} reads {group}: list it in conftest's SHARED_RUN_TESTS", pytrace=False)


@pytest.fixture
def tracking_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def cli_command(
    args: Sequence[str], store: Path | None, module: str = "t4bench", env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of `python -m <module> <args>` as run_cli runs it."""
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        "T4BENCH_DATA_DIR": str(DATA_ROOT),
        "OMP_NUM_THREADS": "1",
    }
    argv = list(args)
    if store is not None:
        full_env["MLFLOW_TRACKING_URI"] = f"sqlite:///{store / 'mlflow.db'}"
        if module == "t4bench":
            argv += [
                f"hydra.{d}.dir={store / d}"
                for d in ("run", "sweep")
                if not any(a.startswith(f"hydra.{d}.dir=") for a in args)
            ]
    full_env.update(env or {})
    return [sys.executable, "-m", module, *argv], full_env


def run_cli(
    *args: str,
    store: Path | None = None,
    module: str = "t4bench",
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    python_options: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """`python <python_options> -m <module> <args>` in a fresh interpreter (text output captured), as
    a user runs it: this checkout's sources, the mini data, one thread, and with `store` its own MLflow
    store (sqlite:///<store>/mlflow.db) and Hydra output folders under `store` unless `args` name
    them. `env` adds to or overrides the environment; `cwd` defaults to `store`."""
    command, full_env = cli_command(args, store, module, env)
    command[1:1] = python_options
    return subprocess.run(command, cwd=cwd or store, env=full_env, capture_output=True, text=True, timeout=timeout)


def start_cli(
    *args: str, store: Path, until: str, stderr: int = subprocess.STDOUT, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """`python -m t4bench <args>` as run_cli runs it with `store`, started in the background with its
    output unbuffered and piped (stderr into stdout, or apart with stderr=subprocess.PIPE); returned
    once a line of its stdout starts with `until`, so that a test signals it mid-run. Fails with what
    it printed where it ends before."""
    command, full_env = cli_command(args, store, env={"PYTHONUNBUFFERED": "1", **(env or {})})
    proc = subprocess.Popen(command, cwd=store, env=full_env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(until):
            return proc
    proc.kill()
    _, err = proc.communicate()
    raise AssertionError(
        f"no line starting {until!r} from t4bench {' '.join(args)}:\n{''.join(seen)[-3000:]}{err or ''}"
    )


@dataclass(frozen=True)
class SharedRun:
    """A finished real run that several tests read: its MLflow store is `<store>/mlflow.db`, its
    Hydra run folder `<store>/run`."""

    store: Path
    proc: subprocess.CompletedProcess[str]

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.store / 'mlflow.db'}"

    @property
    def mlperf_log(self) -> Path:
        return self.store / "run" / "mlperf.log"

    def client(self):  # type: ignore[no-untyped-def]
        from mlflow.tracking import MlflowClient

        return MlflowClient(self.uri)


class SharedRuns:
    """Expensive end-to-end runs made once per test session, whichever test file asks first: the
    same command line gets the same finished run (the tests only read it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._done: dict[tuple[str, ...], SharedRun] = {}

    def _run(self, args: tuple[str, ...], store: Path, env: Mapping[str, str] | None, timeout: float) -> SharedRun:
        # the thread count the caller's environment gives, a pytest-xdist worker's share of the cores
        # under -n (run_cli's default is one thread)
        threads = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))}
        proc = run_cli(*args, store=store, env={**threads, **(env or {})}, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(
                f"t4bench {' '.join(args)} exited {proc.returncode}\n"
                f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
            )
        return SharedRun(store, proc)

    def get(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 1500) -> SharedRun:
        """The run of `python -m t4bench <args>` with `env` added (made now if this session has not
        made it)."""
        return self.get_side_by_side([args], env=env, timeout=timeout)[0]

    def get_side_by_side(
        self, commands: Sequence[Sequence[str]], env: Mapping[str, str] | None = None, timeout: float = 1500
    ) -> list[SharedRun]:
        """The runs of several command lines; those not made yet run at the same time."""
        keys = [(*c, *(f"env:{k}={v}" for k, v in sorted((env or {}).items()))) for c in commands]
        missing = [
            (key, tuple(c)) for key, c in dict(zip(keys, commands, strict=True)).items() if key not in self._done
        ]
        stores = [self.root / f"run{len(self._done) + i}" for i in range(len(missing))]
        for store in stores:
            store.mkdir()
        with ThreadPoolExecutor(max_workers=max(1, len(missing))) as pool:
            jobs = zip((args for _, args in missing), stores, strict=True)
            made = pool.map(lambda job: self._run(job[0], job[1], env, timeout), jobs)
            self._done.update(zip((key for key, _ in missing), made, strict=True))
        return [self._done[key] for key in keys]


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> SharedRuns:
    return SharedRuns(tmp_path_factory.mktemp("shared_runs"))


#: the mini vision run every file that needs a converged one reads (test_vision_e2e, the MLPerf
#: compliance test)
def vision_mini(model: str) -> tuple[str, ...]:
    return (f"model={model}", "hw=cpu", "seed=1", "progress=plain")


@pytest.fixture(scope="session")
def vision_minis(shared_runs: SharedRuns) -> Callable[[str], SharedRun]:
    """`vision_minis("ssd")`: the converged mini run of that model (made on the first call)."""
    return lambda model: shared_runs.get(*vision_mini(model))


#: the mini translation runs to their shipped BLEU targets, both at once with one thread each (the
#: 2 CI cores), read by test_translation and the MLPerf compliance test
TRANSLATION_MINIS = ("gnmt", "transformer")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def translation_minis(shared_runs: SharedRuns) -> dict[str, SharedRun]:
    runs = shared_runs.get_side_by_side(
        [(f"model={m}", "seed=0", "progress=plain") for m in TRANSLATION_MINIS], env=ONE_THREAD
    )
    return dict(zip(TRANSLATION_MINIS, runs, strict=True))


#: one PyTorch ResNet mini epoch (not converged), one thread: the MLPerf compliance test checks its
#: log, the TensorFlow test compares the Keras run's tag and metric names with its own
RESNET50_ONE_EPOCH = ("model=resnet50", "seed=0", "progress=off", "max_epochs=1")


@pytest.fixture(scope="session")
def resnet50_one_epoch(shared_runs: SharedRuns) -> SharedRun:
    return shared_runs.get(*RESNET50_ONE_EPOCH, env=ONE_THREAD)


RunT4bench = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_t4bench(tmp_path: Path, tracking_uri: str) -> RunT4bench:
    """`run_t4bench("model=ncf", "seed=3", check=True)` -> CompletedProcess (text, captured)."""

    def run(
        *overrides: str,
        check: bool = True,
        module: Sequence[str] = ("-m", "t4bench"),
        env: dict[str, str] | None = None,
        timeout: float = 900,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": tracking_uri,
            "T4BENCH_DATA_DIR": str(DATA_ROOT),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        has_dir = any(o.startswith(("hydra.run.dir=", "hydra.sweep.dir=")) for o in overrides)
        extra = [] if has_dir else [f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
        proc = subprocess.run(
            [sys.executable, *module, *overrides, *extra],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"t4bench {' '.join(overrides)} exited {proc.returncode}\n"
                f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
            )
        return proc

    return run


@pytest.fixture
def mlflow_client(tracking_uri: str):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri)


def all_runs(client, experiment: str):  # type: ignore[no-untyped-def]
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return client.search_runs([found.experiment_id], max_results=1000)


def only_run(client, experiment: str):  # type: ignore[no-untyped-def]
    """The single run of `experiment`; fails listing the run names when there are none or several."""
    runs = all_runs(client, experiment)
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def compose(overrides: Sequence[str] = ()):  # type: ignore[no-untyped-def]
    """The composed config for `overrides`, as `python -m t4bench` would see it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def compose_spec(overrides: Sequence[str] = ()) -> RunSpec:
    """The run spec of `compose(overrides)`: what the code below the Hydra app takes."""
    from t4bench.spec import build_spec

    return build_spec(compose(overrides))


def run_context(
    device: str = "cpu", *, precision: str = "fp32", rank: int = 0, world_size: int = 1, data_root: Path = Path(".")
) -> RunContext:
    """The RunContext of one rank (its local rank the same, seed 0) for a test that builds a benchmark
    or a trainer outside a run."""
    import torch

    from t4bench.pytorch.context import RunContext

    return RunContext(
        device=torch.device(device),
        precision=precision,
        rank=rank,
        world_size=world_size,
        local_rank=rank,
        seed=0,
        data_root=data_root,
    )
