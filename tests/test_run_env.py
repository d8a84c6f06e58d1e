"""The run environment (issue 12): one function reads every launcher's variables, one builds the
immutable RunEnvironment from them and the composed config, which stays as Hydra composed it.

The launcher variables are the input here, so the tests hand them in as a mapping (and once through
the real os.environ); the hardware detection is handed in as a `Found`.
"""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from conftest import REPO
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ReadonlyConfigError

from t4bench import hardware, run_env
from t4bench.errors import T4BenchError
from t4bench.run_env import Launched
from t4bench.spec import RunSpec, build_spec

CPU_HOST = hardware.Found((), "none", "NVML Shared Library Not Found", "no CUDA driver: libcuda.so.1 not found")
H200_X2 = hardware.Found(("NVIDIA H200",) * 2, "nvml")


def torchrun_vars(rank: int, world: int, local_rank: int, local_world: int, addr: str, port: int) -> dict[str, str]:
    """What torchrun sets in each rank's environment."""
    return {
        "TORCHELASTIC_RUN_ID": "x",
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world),
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
    }


def slurm_vars(procid: int, ntasks: int, localid: int, per_node: str) -> dict[str, str]:
    """What srun sets in each task's environment (SLURM_NTASKS_PER_NODE as Slurm writes it)."""
    return {
        "SLURM_PROCID": str(procid),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_LOCALID": str(localid),
        "SLURM_NTASKS_PER_NODE": per_node,
    }


#: rank 1 of 2 on this host, as `torchrun --nproc-per-node 2` starts it
TORCHRUN_RANK_1 = torchrun_vars(1, 2, 1, 2, "127.0.0.1", 29400)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param({}, Launched(), id="plain"),
        pytest.param(
            torchrun_vars(3, 4, 1, 2, "node0", 29500), Launched("torchrun", 3, 4, 1, 2, "node0", 29500), id="torchrun"
        ),
        pytest.param(
            {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2"},
            Launched("horovodrun", 1, 2, 1, 2),
            id="horovodrun-gloo",
        ),
        pytest.param(
            {
                "OMPI_COMM_WORLD_RANK": "2",
                "OMPI_COMM_WORLD_SIZE": "4",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            },
            Launched("mpirun", 2, 4, 0, 2),
            id="horovodrun-mpi-or-openmpi",
        ),
        pytest.param(
            {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"},
            Launched("mpirun", 5, 8, 1, 4),
            id="pmi-mpich",
        ),
        pytest.param(  # srun --mpi=pmi2: PMI names the rank, only SLURM the local one
            {
                "PMI_RANK": "3",
                "PMI_SIZE": "4",
                **slurm_vars(3, 4, 1, "2"),
                "MASTER_ADDR": "gpu01",
                "MASTER_PORT": "1234",
            },
            Launched("mpirun", 3, 4, 1, 2, "gpu01", 1234),
            id="pmi-srun",
        ),
        pytest.param(
            {**slurm_vars(2, 4, 0, "2(x2)"), "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_ID": "12345"},
            Launched("slurm", 2, 4, 0, 2, None, 20000 + 12345, "gpu[01-02]"),
            id="slurm",
        ),
        pytest.param({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"}, Launched(), id="slurm-one-task"),
        pytest.param(  # torchrun inside a SLURM allocation: torchrun's ranks, not the allocation's
            {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", **TORCHRUN_RANK_1},
            Launched("torchrun", 1, 2, 1, 2, "127.0.0.1", 29400),
            id="torchrun-in-slurm",
        ),
        pytest.param(  # no local size given: all ranks on this host
            {"HOROVOD_RANK": "0", "HOROVOD_SIZE": "2"},
            Launched("horovodrun", 0, 2, 0, 2),
            id="no-local-size",
        ),
    ],
)
def test_read_launcher(environ: dict[str, str], expected: Launched) -> None:
    assert run_env.read_launcher(environ) == expected


def test_a_bad_launcher_variable_is_one_line() -> None:
    with pytest.raises(T4BenchError, match=r"^WORLD_SIZE='two': a launcher variable must be a whole number$"):
        run_env.read_launcher({"WORLD_SIZE": "two", "RANK": "0"})


def test_the_app_stops_on_a_bad_launcher_variable_with_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    env = {**os.environ, "WORLD_SIZE": "x", "RANK": "0"}
    proc = subprocess.run([sys.executable, "-m", "t4bench"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["t4bench: error: WORLD_SIZE='x': a launcher variable must be a whole number"]


def test_the_process_environment_is_the_default_input(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("WORLD_SIZE", "HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    assert run_env.launched_rank() == 0
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert run_env.launched_rank() == 3


def composed(hw: str = "cpu", dist: str = "ddp", backend: str | None = None, **hw_keys: object) -> RunSpec:
    """The run spec of the parts of a composed config the run environment reads, from the real
    conf/ files (`backend`: a dist.backend in place of the file's)."""
    node = hardware.load_profile(hw)
    for key, value in hw_keys.items():
        node[key] = value
    cfg = OmegaConf.create({"hw": node, "dist": OmegaConf.load(REPO / "conf" / "dist" / f"{dist}.yaml")})
    assert isinstance(cfg, DictConfig)
    if backend is not None:
        cfg.dist.backend = backend
    return build_spec(cfg)


def test_hw_count_without_a_launcher_spawns() -> None:
    cfg = composed(count=2)
    env = run_env.resolve(cfg, {}, CPU_HOST)
    assert (env.launcher, env.spawn, env.world_size, env.local_world_size) == ("elastic_launch", True, 2, 2)
    assert (env.device_kind, env.process_group, env.dist_backend) == ("cpu", "gloo", "ddp")
    # two ranks share this host's cores unless OMP_NUM_THREADS decides
    assert env.threads == max(1, hardware.host_cores() // 2)
    assert run_env.resolve(cfg, {"OMP_NUM_THREADS": "1"}, CPU_HOST).threads is None
    assert run_env.resolve(composed("cpu", "horovod", count=2), {}, CPU_HOST).launcher == "horovod.run"
    single = run_env.resolve(composed(), {}, CPU_HOST)
    assert (single.launcher, single.spawn, single.world_size, single.rank) == ("none", False, 1, 0)


def test_an_outer_launcher_decides_the_rank_count_and_the_config_stays() -> None:
    cfg = composed()
    env = run_env.resolve(cfg, TORCHRUN_RANK_1, CPU_HOST)
    assert (env.launcher, env.spawn, env.rank, env.world_size, env.local_rank) == ("torchrun", False, 1, 2, 1)
    assert env.outer_launcher and not env.is_main
    assert env.hw.count == 2 and env.requested_count == 1
    assert cfg.hw.count == 1  # the composed config is not changed
    with pytest.raises(T4BenchError, match=r"hw.count=3 but the launcher started 2 ranks"):
        run_env.resolve(composed(count=3), TORCHRUN_RANK_1, CPU_HOST)


def test_auto_resolves_into_the_environment_only() -> None:
    cfg = composed("auto")
    env = run_env.resolve(cfg, {}, H200_X2)
    assert (env.hw.name, env.hw.requested, env.hw.precision) == ("h200", "auto", "bf16")
    assert (env.device_kind, env.process_group) == ("cuda", "nccl")
    assert env.tags["t4bench.hw_requested"] == "auto" and env.tags["t4bench.hw_detected"] == "2x NVIDIA H200"
    assert cfg.hw.name == "auto" and "requested" not in cfg.hw


def test_a_gpu_profile_without_cuda_trains_on_cpu_only_when_not_strict() -> None:
    with pytest.raises(T4BenchError, match="hw=t4 asks for 1x NVIDIA T4, but this machine has no NVIDIA GPU"):
        run_env.resolve(composed("t4"), {}, CPU_HOST)
    env = run_env.resolve(composed("t4", strict=False), {}, CPU_HOST)
    assert env.device_kind == "cpu" and env.process_group == "gloo"
    assert env.tags["t4bench.device"] == "cpu (no CUDA here; hw.strict=false)"
    assert "no NVIDIA GPU" in env.tags["t4bench.hw_mismatch"]


def test_bad_backend_and_threads_fail_before_anything_starts() -> None:
    with pytest.raises(T4BenchError, match=r"dist.backend=mpi: must be one of ddp, horovod"):
        run_env.resolve(composed(backend="mpi"), {}, CPU_HOST)
    with pytest.raises(T4BenchError, match=r"^hw.threads=0"):
        run_env.resolve(composed(threads=0), {}, CPU_HOST)


def test_a_spawned_rank_takes_its_place_from_the_launcher() -> None:
    parent = run_env.resolve(composed(count=2), {}, CPU_HOST)
    shipped = pickle.loads(pickle.dumps(parent))  # what the elastic launcher hands each rank
    rank = shipped.for_spawned_rank({**TORCHRUN_RANK_1, "TORCHELASTIC_RUN_ID": "t4bench-x"})
    assert (rank.launcher, rank.rank, rank.local_rank, rank.world_size, rank.spawn) == (
        "elastic_launch",
        1,
        1,
        2,
        False,
    )
    assert not rank.outer_launcher
    with pytest.raises(T4BenchError, match="sees 4 ranks, 2 were started"):
        shipped.for_spawned_rank({"WORLD_SIZE": "4", "RANK": "0"})


def test_the_environment_is_immutable() -> None:
    env = run_env.resolve(composed(), {}, CPU_HOST)
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.rank = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.hw.count = 4  # type: ignore[misc]
    with pytest.raises(ReadonlyConfigError):
        env.hw.rest.count = 4
