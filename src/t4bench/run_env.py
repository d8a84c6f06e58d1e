"""The run environment, decided once: who started this process (nobody, this process itself, torchrun,
horovodrun, mpirun, SLURM), which rank it is of how many, the hardware profile it trains on (with
`hw=auto` resolved), the device kind and the CPU threads per rank.

`resolve(spec)` builds it from the launcher's environment variables (read in `read_launcher` and
nowhere else) and the run spec, before torch or MLflow load; it is immutable and passed down
explicitly. The composed config is never changed: the profile trained on is a new section
(`RunEnvironment.hw`), which a record of the run (MLflow params, resolved_config.yaml) logs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from t4bench import hardware
from t4bench.errors import T4BenchError
from t4bench.spec import HwSpec, RunSpec
from t4bench.spec.run import DistSpec
from t4bench.sweep import slurm
from t4bench.tracking import names

# who started the ranks (the t4bench.launcher tag)
NONE = "none"
#: hw.count=N without an outer launcher: this process starts N ranks (torch's elastic launcher)
ELASTIC_LAUNCH = "elastic_launch"
#: the same for dist=horovod (horovod.run, gloo controller)
HOROVOD_RUN = "horovod.run"
TORCHRUN = "torchrun"
HOROVODRUN = "horovodrun"
MPIRUN = "mpirun"
SLURM = "slurm"


@dataclass(frozen=True)
class _LauncherVars:
    """The variables one launcher sets; candidates are tried in order (first non-empty wins)."""

    name: str
    size: str
    rank: str
    local_rank: tuple[str, ...]
    local_size: tuple[str, ...]


#: first match (its size variable set) wins: torchrun inside a SLURM allocation is torchrun, and
#: MPI variables come before SLURM's because mpirun inside an allocation inherits SLURM_PROCID
_LAUNCHERS = (
    # torchrun / torch.distributed.run, and any env:// setup (RANK, WORLD_SIZE, MASTER_ADDR/PORT)
    _LauncherVars(TORCHRUN, "WORLD_SIZE", "RANK", ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",)),
    # horovodrun (gloo controller) and horovod.run
    _LauncherVars(HOROVODRUN, "HOROVOD_SIZE", "HOROVOD_RANK", ("HOROVOD_LOCAL_RANK",), ("HOROVOD_LOCAL_SIZE",)),
    # Open MPI's mpirun (also horovodrun with the MPI controller)
    _LauncherVars(
        MPIRUN,
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        ("OMPI_COMM_WORLD_LOCAL_RANK",),
        ("OMPI_COMM_WORLD_LOCAL_SIZE",),
    ),
    # PMI: MPICH / Intel MPI mpirun (and srun --mpi=pmi2, where only SLURM names the local rank)
    _LauncherVars(
        MPIRUN,
        "PMI_SIZE",
        "PMI_RANK",
        ("MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID"),
        ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"),
    ),
    # SLURM srun
    _LauncherVars(SLURM, "SLURM_NTASKS", "SLURM_PROCID", ("SLURM_LOCALID",), ("SLURM_NTASKS_PER_NODE",)),
)


@dataclass(frozen=True)
class Launched:
    """What the launcher's variables say about this process (`read_launcher`)."""

    launcher: str = NONE
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    #: where rank 0 listens (MASTER_ADDR/MASTER_PORT); for srun without them the job's first node
    #: (`nodelist`, expanded when joining) and a port derived from the job id
    master_addr: str | None = None
    master_port: int | None = None
    nodelist: str | None = None


def _int(environ: Mapping[str, str], var: str) -> int:
    try:
        return int(environ[var].split("(")[0])  # SLURM_NTASKS_PER_NODE may read "2(x3)"
    except ValueError:
        raise T4BenchError(f"{var}={environ[var]!r}: a launcher variable must be a whole number") from None


def _first(environ: Mapping[str, str], candidates: tuple[str, ...]) -> str | None:
    return next((var for var in candidates if environ.get(var)), None)


def read_launcher(environ: Mapping[str, str]) -> Launched:
    """Rank, world size and local rank/size from the variables of the launcher that started this
    process; `Launched()` (rank 0 of 1) when none did. The one place that reads them."""
    for spec in _LAUNCHERS:
        if not environ.get(spec.size) or environ.get(spec.rank) is None:
            continue
        world = _int(environ, spec.size)
        if spec.name == SLURM and world <= 1:
            return Launched()  # a one-task job step (sbatch running the command once): no launcher
        local_rank_var, local_size_var = _first(environ, spec.local_rank), _first(environ, spec.local_size)
        master_port = environ.get("MASTER_PORT")
        nodelist = None
        if spec.name == SLURM and not environ.get("MASTER_ADDR"):
            nodelist = environ.get("SLURM_JOB_NODELIST", "127.0.0.1")
            # a port every task of the job computes alike, away from the usual 29500
            master_port = master_port or str(20000 + int(environ.get("SLURM_JOB_ID", "0") or 0) % 20000)
        return Launched(
            launcher=spec.name,
            rank=_int(environ, spec.rank),
            world_size=world,
            local_rank=_int(environ, local_rank_var) if local_rank_var else 0,
            local_world_size=_int(environ, local_size_var) if local_size_var else world,
            master_addr=environ.get("MASTER_ADDR") or None,
            master_port=int(master_port) if master_port else None,
            nodelist=nodelist,
        )
    return Launched()


@dataclass(frozen=True)
class RunEnvironment:
    """Everything about where and how this run trains that is not the benchmark's config."""

    #: who started (or, with `spawn`, will start) the ranks: one of the names above
    launcher: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    #: hw.count as composed (1 under an outer launcher unless the user gave it)
    requested_count: int
    #: this process must start `world_size` local ranks itself (hw.count=N, no outer launcher)
    spawn: bool
    #: the hardware profile trained on: conf/hw/<name>.yaml, `hw=auto` resolved (then
    #: `requested: auto`), count = world_size; its node read-only
    hw: HwSpec
    #: "cuda" or "cpu" (a GPU profile on a host without CUDA runs on the CPU only with hw.strict=false)
    device_kind: str
    #: CPU threads per rank to set; None keeps the framework's default
    threads: int | None
    #: dist.backend: "ddp" or "horovod"
    dist_backend: str
    #: torch.distributed backend for ddp: "nccl" or "gloo"
    process_group: str
    #: rendezvous of an outer launcher that is not torch's own (see `Launched`)
    master_addr: str | None = None
    master_port: int | None = None
    nodelist: str | None = None
    #: what was asked and found (t4bench.hw_requested/_detected/_mismatch, device note)
    tags: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def outer_launcher(self) -> bool:
        """Ranks started by a launcher outside t4bench (each rank ran Hydra itself)."""
        return self.launcher not in (NONE, ELASTIC_LAUNCH, HOROVOD_RUN)

    def for_spawned_rank(self, environ: Mapping[str, str]) -> RunEnvironment:
        """This environment as seen by one of the ranks this process started: its rank and local
        rank from the variables the elastic launcher / horovod.run set."""
        launched = read_launcher(environ)
        if launched.world_size != self.world_size:
            raise T4BenchError(f"a started rank sees {launched.world_size} ranks, {self.world_size} were started")
        return dataclasses.replace(self, rank=launched.rank, local_rank=launched.local_rank, spawn=False)


def resolve(
    spec: RunSpec,
    environ: Mapping[str, str] | None = None,
    found: hardware.Found | None = None,
) -> RunEnvironment:
    """The run environment of `spec` in this process; raises one-line `T4BenchError`s for a rank
    count that disagrees with the launcher or hardware that is not here (unless hw.strict=false).
    `found` is the hardware detection (detected when None)."""
    environ = os.environ if environ is None else environ
    launched = read_launcher(environ)
    found = found or hardware.detect()
    requested = spec.hw.count
    outer = launched.world_size > 1
    nodes = int(spec.hw.get("nodes", 1))
    multi_node = slurm.nodes_error(nodes, requested, launched.world_size, environ)
    if multi_node:
        raise T4BenchError(multi_node)
    if outer and requested not in (1, launched.world_size) and requested * nodes != launched.world_size:
        raise T4BenchError(
            f"hw.count={requested} but the launcher started {launched.world_size} ranks "
            "(leave hw.count out under torchrun/horovodrun/srun, or make them agree)"
        )
    world = launched.world_size if outer else requested
    local_world = launched.local_world_size if outer else world
    spawn = not outer and requested > 1
    backend = spec.dist.backend
    launcher = launched.launcher
    if spawn:
        launcher = HOROVOD_RUN if backend == "horovod" else ELASTIC_LAUNCH
    hw = hardware.resolve_profile(spec.hw, found, count=world)
    checked = hardware.check(hw, found, local_world)
    device_kind = "cpu" if hw.name == "cpu" or checked.cpu_fallback else "cuda"
    tags = checked.tags()
    if checked.cpu_fallback:
        tags[names.DEVICE] = "cpu (no CUDA here; hw.strict=false)"
    threads = hardware.threads_per_rank(hw, max(local_world, 1), environ)
    return RunEnvironment(
        launcher=launcher,
        rank=launched.rank,
        world_size=world,
        local_rank=launched.local_rank,
        local_world_size=local_world,
        requested_count=requested,
        spawn=spawn,
        hw=hw,
        device_kind=device_kind,
        threads=threads,
        dist_backend=backend,
        process_group=_process_group(spec.dist, device_kind),
        master_addr=launched.master_addr,
        master_port=launched.master_port,
        nodelist=launched.nodelist,
        tags=tags,
    )


def _process_group(dist: DistSpec, device_kind: str) -> str:
    chosen = dist.process_group
    if chosen == "auto":
        return "nccl" if device_kind == "cuda" else "gloo"
    return chosen


def launched_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's global rank under an outer launcher (0 when run directly), before Hydra runs."""
    return read_launcher(os.environ if environ is None else environ).rank
