"""Is a Slurm controller there to take the sweep's jobs? Asked before the sweep's MLflow parent run
and folder exist, for `hydra/launcher=submitit_slurm` (t4bench's launcher or the plugin's own): without
it, sbatch fails only once the sweep has started, after its parent run and folder were made.

`scontrol ping` answers in milliseconds from the controller (or at once, from the client, when no
slurm.conf can be found); `sbatch --version` alone would pass with the controller down. The
client's own words go into the one line, shortened (its "** RESTORE ... **" banner dropped).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from t4bench.errors import T4BenchError
from t4bench.spec import RunSpec

#: scontrol waits MessageTimeout (10 s by default) per controller; a backup doubles it
PING_TIMEOUT_S = 30
#: the clients' prefixes, dropped from their words ("sbatch: error: ", "scontrol: fatal: ")
_PREFIXES = ("sbatch: ", "scontrol: ", "error: ", "fatal: ")


def uses_slurm(spec: RunSpec) -> bool:
    """The sweep's launcher submits to Slurm (t4bench's SlurmLauncher or the plugin's)."""
    return spec.sweep.target("launcher").endswith("SlurmLauncher")


def shorten(words: str) -> str:
    """A Slurm client's output in one line: its last meaningful lines, without the tool's prefix
    and banners (`scontrol: fatal: Could not establish a configuration source`)."""
    kept = []
    for line in words.splitlines():
        line = line.strip()
        for prefix in _PREFIXES:
            line = line.removeprefix(prefix)
        if line and not line.startswith("*"):  # scontrol's "** RESTORE SLURMCTLD ... **" banner
            kept.append(line)
    return "; ".join(dict.fromkeys(kept[-2:])) or "no answer"


def controller_problem() -> str | None:
    """Why sbatch could not submit here now (None: the controller answers)."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH (Slurm's client commands submit the sweep's jobs)"
    conf = os.environ.get("SLURM_CONF")
    if conf is not None and not Path(conf).is_file():  # the clients would retry stat() for 60 s
        return f"SLURM_CONF={conf} is not a file (the clients read the cluster's slurm.conf there)"
    if shutil.which("scontrol") is None:
        return None  # nothing to ask without it: sbatch will say
    try:
        done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=PING_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"`scontrol ping` had no answer in {PING_TIMEOUT_S} s"
    words = f"{done.stdout}\n{done.stderr}"
    if done.returncode != 0 or " is DOWN" in words:
        return f"no Slurm controller answers (scontrol ping: {shorten(words)})"
    return None


def check(spec: RunSpec) -> None:
    """One line when the sweep (the spec of one of its jobs' compositions, Hydra's node included)
    would submit to a Slurm that is not there."""
    if not uses_slurm(spec):
        return
    problem = controller_problem()
    if problem:
        raise T4BenchError(
            f"hydra/launcher=submitit_slurm: {problem}; nothing was submitted "
            "(SLURM_CONF names the cluster; docs/cluster.md)"
        )
