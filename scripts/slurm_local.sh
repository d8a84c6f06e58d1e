#!/usr/bin/env bash
# A single-host Slurm (munged, MariaDB, slurmdbd, slurmctld, slurmd) to try t4bench's Slurm
# launcher on one machine: the cluster the tests use (tests/slurm_cluster.py), every file under
# one directory, nothing in /etc/slurm. Needs root and scripts/setup.sh --all (docs/cluster.md).
#   scripts/slurm_local.sh up [--root DIR]       start it; prints `export SLURM_CONF=...`
#   eval "$(scripts/slurm_local.sh up)"          ... and sets SLURM_CONF in this shell
#   scripts/slurm_local.sh status [--root DIR]   its daemons, sinfo and squeue
#   scripts/slurm_local.sh down [--root DIR]     stop it and remove DIR
# DIR defaults to $T4BENCH_SLURM_DIR or /tmp/t4bench-slurm.
set -euo pipefail
exec python "$(dirname "$0")/../tests/slurm_cluster.py" "$@"
