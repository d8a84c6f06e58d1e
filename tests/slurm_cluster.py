"""A real single-host Slurm: munged, a private MariaDB, slurmdbd, slurmctld and slurmd, started as
root without systemd, every file (keys, configs, state, logs, sockets) under one directory and
every port picked free, so it neither needs nor touches /etc/slurm.

The tests start one per pytest run (the `slurm_cluster` fixture of tests/test_slurm.py); a user
who wants to try t4bench's Slurm launcher starts the same one from the command line
(scripts/slurm_local.sh, docs/cluster.md):

    python tests/slurm_cluster.py up [--root DIR]      start it; prints `export SLURM_CONF=...`
    python tests/slurm_cluster.py status [--root DIR]  its daemons, node and queue
    python tests/slurm_cluster.py down [--root DIR]    stop it and remove DIR

Debian's `slurm-wlm`, `slurmdbd`, `munge` and `mariadb-server` (scripts/setup.sh --all). Without
root or the packages, `missing()` says why in one line (the fixture skips with it). The settings
that make Slurm run in a container-like host: proctrack/linuxproc and task/none (the cgroup
plugins fail to load here, and srun would still exit 0), slurmdbd so that `sacct` answers
(submitit reads a dead job's state from it; without it a job that dies before writing its result
hangs the sweep).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SBIN = Path("/usr/sbin")
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")
DB_USER, DB_PASS = "slurm", "t4bench-test"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(what: str, ready: object, timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(ready) and ready():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} did not come up in {timeout:.0f} s\n{tail}")


@dataclass
class SlurmCluster:
    """A started cluster: `env` has SLURM_CONF (and PATH) for sbatch/squeue/sacct and submitit."""

    root: Path
    env: dict[str, str]
    partition: str = "debug"
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, env=self.env, text=True, capture_output=True, check=check, timeout=60)

    def stop(self) -> None:
        """Stop the daemons, newest first (slurmd before slurmctld before slurmdbd before the DB),
        after the jobs still in it (their slurmstepd would outlive slurmd)."""
        if len(self.procs) == len(DAEMONS) and all(proc.poll() is None for proc in self.procs):
            cancel_jobs(self.env)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()


def cancel_jobs(env: dict[str, str]) -> None:
    """scancel every job of the cluster `env` points at, and give them a moment to end."""
    try:
        listed = subprocess.run(["squeue", "-h", "-o", "%A"], env=env, text=True, capture_output=True, timeout=60)
        jobs = listed.stdout.split() if listed.returncode == 0 else []
        if jobs:
            subprocess.run(["scancel", *jobs], env=env, capture_output=True, timeout=60, check=False)
            time.sleep(2)
    except subprocess.TimeoutExpired:  # a controller that does not answer: the daemons are stopped anyway
        pass


def missing() -> str | None:
    """Why a Slurm cannot be started here (None: it can)."""
    if os.geteuid() != 0:
        return "the Slurm fixture starts munged/slurmctld/slurmd as root: not root here"
    absent = [name for name in DAEMONS if not (SBIN / name).exists()]
    absent += [name for name in ("sbatch", "sacct", "mariadb-install-db") if shutil.which(name) is None]
    if absent:
        return f"Slurm not installed ({', '.join(absent)} missing): scripts/setup.sh --all"
    return None


def start(root: Path) -> SlurmCluster:
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)  # munged refuses group/world-writable directories
    ports = {name: _free_port() for name in ("db", "dbd", "ctld", "slurmd")}
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    cluster = SlurmCluster(root, env)
    try:
        _munge(cluster)
        _mariadb(cluster, ports["db"])
        _write_confs(cluster, ports)
        _daemon(cluster, "slurmdbd", [str(SBIN / "slurmdbd"), "-D"])
        _wait("slurmdbd", lambda: _port_open(ports["dbd"]), 30, root / "slurmdbd.log")
        _daemon(cluster, "slurmctld", [str(SBIN / "slurmctld"), "-D", "-i"])
        _wait("slurmctld", lambda: cluster.run("scontrol", "ping", check=False).returncode == 0, 30, root / "ctld.log")
        _daemon(cluster, "slurmd", [str(SBIN / "slurmd"), "-D"])
        _wait("slurmd", lambda: _node_idle(cluster), 30, root / "slurmd.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _node_idle(cluster: SlurmCluster) -> bool:
    out = cluster.run("sinfo", "-h", "-o", "%t", check=False).stdout.strip()
    return out in ("idle", "mix", "alloc")


def _daemon(cluster: SlurmCluster, name: str, cmd: list[str]) -> None:
    log = open(cluster.root / f"{name}.out", "wb")  # noqa: SIM115  # owned by the process
    # a process group of its own (setsid): a Ctrl-C or hang-up in the terminal that ran `up` does not reach it
    proc = subprocess.Popen(cmd, env=cluster.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster.procs.append(proc)


def _munge(cluster: SlurmCluster) -> None:
    root = cluster.root
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = root / "munge.socket"
    cmd = [str(SBIN / "munged"), "-F", "--force", f"--key-file={key}", f"--socket={sock}"]
    cmd += [f"--pid-file={root / 'munged.pid'}", f"--log-file={root / 'munged.log'}"]
    cmd += [f"--seed-file={root / 'munged.seed'}"]
    _daemon(cluster, "munged", cmd)
    _wait("munged", sock.exists, 15, root / "munged.log")


def _mariadb(cluster: SlurmCluster, port: int) -> None:
    root = cluster.root
    data, sock = root / "mysql", root / "mysql.sock"
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root", "--skip-test-db"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    cmd = [str(SBIN / "mariadbd"), "--no-defaults", f"--datadir={data}", f"--socket={sock}", "--user=root"]
    cmd += [f"--port={port}", "--bind-address=127.0.0.1", f"--pid-file={root / 'mysql.pid'}"]
    cmd += ["--innodb-buffer-pool-size=16M", "--skip-log-bin", f"--log-error={root / 'mysql.log'}"]
    _daemon(cluster, "mariadbd", cmd)
    _wait("mariadbd", lambda: _port_open(port), 60, root / "mysql.log")
    sql = (
        f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASS}';"
        f"GRANT ALL ON *.* TO '{DB_USER}'@'127.0.0.1'; FLUSH PRIVILEGES;"
    )
    subprocess.run(["mariadb", f"--socket={sock}", "-uroot", "-e", sql], check=True, capture_output=True, timeout=30)


def _write_confs(cluster: SlurmCluster, ports: dict[str, int]) -> None:
    root = cluster.root
    node = subprocess.run([str(SBIN / "slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
    node_line = next(line for line in node.splitlines() if line.startswith("NodeName="))
    host = node_line.split()[0].split("=", 1)[1]
    auth = f"AuthType=auth/munge\nAuthInfo=socket={root / 'munge.socket'}\n"
    (root / "state").mkdir(exist_ok=True)
    (root / "spool").mkdir(exist_ok=True)
    conf = f"""ClusterName=t4bench
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ports["ctld"]}
SlurmdPort={ports["slurmd"]}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "ctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "ctld.log"}
SlurmdLogFile={root / "slurmd.log"}
{auth}CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports["dbd"]}
AccountingStoragePass={root / "munge.socket"}
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=2
InactiveLimit=0
{node_line.replace("NodeName=", "NodeName=", 1)} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName={cluster.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    (root / "slurm.conf").write_text(conf)
    dbd = f"""{auth}DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports["dbd"]}
SlurmUser=root
PidFile={root / "slurmdbd.pid"}
LogFile={root / "slurmdbd.log"}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports["db"]}
StorageUser={DB_USER}
StoragePass={DB_PASS}
StorageLoc=slurm_acct_db
"""
    (root / "slurmdbd.conf").write_text(dbd)
    os.chmod(root / "slurmdbd.conf", 0o600)


# --- the command line: a cluster that outlives the command that started it ---------------------

#: where `up` puts the cluster unless --root says otherwise
DEFAULT_ROOT = Path(os.environ.get("T4BENCH_SLURM_DIR", "/tmp/t4bench-slurm"))
#: `name pid` lines of the daemons `up` started, oldest first: what `down` and `status` read
PIDS = "daemons.pid"


def _alive_and_ours(pid: int, root: Path) -> bool:
    """Whether `pid` is a daemon of the cluster in `root` (started with its SLURM_CONF), not a
    process that took a stale pid since."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and f"SLURM_CONF={root / 'slurm.conf'}".encode() in environ


def _daemons(root: Path) -> list[tuple[str, int]]:
    path = root / PIDS
    if not path.exists():
        return []
    return [(name, int(pid)) for name, pid in (line.split() for line in path.read_text().splitlines() if line)]


def up(root: Path) -> int:
    conf = root / "slurm.conf"
    daemons = _daemons(root)
    if daemons and all(_alive_and_ours(pid, root) for _, pid in daemons):
        print(f"Slurm already up in {root}", file=sys.stderr)
    elif daemons:
        print(f"error: a cluster in {root} is partly down: run `down --root {root}` first", file=sys.stderr)
        return 1
    elif root.exists() and any(root.iterdir()):
        print(f"error: {root} exists and holds other files: give an empty or new --root", file=sys.stderr)
        return 1
    else:
        why = missing()
        if why:
            print(f"error: {why}", file=sys.stderr)
            return 1
        try:
            cluster = start(root)
        except (RuntimeError, subprocess.SubprocessError) as err:  # its daemons are stopped already
            print(f"error: Slurm did not start: {err}", file=sys.stderr)
            return 1
        (root / PIDS).write_text("".join(f"{n} {p.pid}\n" for n, p in zip(DAEMONS, cluster.procs, strict=True)))
        node = cluster.run("sinfo", "-h", "-N", "-o", "%N (%c CPUs, %m MB), partition %P").stdout.strip()
        print(f"Slurm up in {root}: node {node}; logs there (ctld.log, slurmd.log)", file=sys.stderr)
    print(f"export SLURM_CONF={conf}")  # the only line on stdout: `eval "$(... up)"` sets it
    return 0


def status(root: Path) -> int:
    daemons = _daemons(root)
    if not daemons:
        print(f"no Slurm started in {root} (run `up`)")
        return 1
    alive = {name: _alive_and_ours(pid, root) for name, pid in daemons}
    print("  ".join(f"{name} {'up' if ok else 'DOWN'}" for name, ok in alive.items()))
    if not all(alive.values()):
        return 1
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    for cmd in (["sinfo"], ["squeue"]):
        done = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=60, check=False)
        print(done.stdout.rstrip() or done.stderr.rstrip())
    print(f"export SLURM_CONF={root / 'slurm.conf'}")
    return 0


def down(root: Path) -> int:
    """The cluster's jobs cancelled, SIGTERM to each daemon, newest first, SIGKILL to one still
    there after 20 s; then the directory `up` made (its pid file says it did) is removed."""
    daemons = _daemons(root)
    if not daemons:
        print(f"no Slurm started in {root}: nothing to stop", file=sys.stderr)
        return 0
    if all(_alive_and_ours(pid, root) for _, pid in daemons):
        cancel_jobs({**os.environ, "SLURM_CONF": str(root / "slurm.conf")})
    for name, pid in reversed(daemons):
        if not _alive_and_ours(pid, root):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while _alive_and_ours(pid, root) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive_and_ours(pid, root):
            os.kill(pid, signal.SIGKILL)
        print(f"stopped {name} ({pid})", file=sys.stderr)
    shutil.rmtree(root)
    print(f"Slurm down; {root} removed (unset SLURM_CONF)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/slurm_local.sh", description="A single-host Slurm to try t4bench's Slurm launcher on."
    )
    parser.add_argument("command", choices=("up", "status", "down"))
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"its files (default: {DEFAULT_ROOT})")
    args = parser.parse_args(argv)
    commands = {"up": up, "status": status, "down": down}
    return commands[args.command](args.root.resolve())


if __name__ == "__main__":
    sys.exit(main())
