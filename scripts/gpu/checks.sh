#!/usr/bin/env bash
# GPU checks (hardware profiles, telemetry) on a CUDA host, from the repo root (PYTHONPATH with src/ and the
# dependencies, or `pip install -e .`): hw=auto, hw=t4 fails fast, mini NCF with telemetry,
# telemetry on vs off on synthetic NCF; a figures table last. Options and environment
# (HW, REPS, STEPS, OUT, PYTHON): see scripts/gpu/checks.py --help.
#   OUT=/path bash scripts/gpu/checks.sh [--hw h200] [--reps 3] [--steps 500]
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" scripts/gpu/checks.py "$@"
