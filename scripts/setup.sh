#!/usr/bin/env bash
# Install t4bench and everything its runs and tests need on a fresh Debian machine, then write the
# mini datasets under ./data (or $T4BENCH_DATA_DIR). Idempotent: re-running skips what is done.
#   scripts/setup.sh          run-time install (PyTorch only) + datasets: `pip install .`, a regular
#                             install of the package (its conf/ and sweeps/ inside it), as a user's
#   scripts/setup.sh --all    for developers and CI: an editable install of this checkout instead, plus
#                             the test tools (ruff, mypy, pytest), the TensorFlow backend, the
#                             PostgreSQL server, Slurm (+ munge, slurmdbd, MariaDB) and the Horovod build
set -euo pipefail
cd "$(dirname "$0")/.."

all=false
[[ "${1:-}" == "--all" ]] && all=true

debian_packages=(dataset-fashion-mnist trans-de-en)
$all && debian_packages+=(openmpi-bin libopenmpi-dev postgresql cmake)
$all && debian_packages+=(chromium)  # tests/test_mlflow_ui.py loads the MLflow UI headless
# tests/slurm_cluster.py: a single-host Slurm with accounting (slurmdbd on a private MariaDB);
# nothing is started or enabled here, the tests start their own daemons under a tmp dir
$all && debian_packages+=(slurm-wlm slurmdbd munge mariadb-server)
missing=()
for package in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# pyproject.toml extras: test (CI tools, psycopg2 for the PostgreSQL tests), tensorflow (Keras ResNet-50)
if $all; then
  # editable, so that edits to src/, conf/ and sweeps/ take effect without reinstalling; compat mode
  # puts src/ on sys.path, which Hydra's plugin discovery (hydra_plugins.*) needs
  python -m pip install -q --disable-pip-version-check -e ".[test,tensorflow]" --config-settings editable_mode=compat
else
  # setuptools builds in ./build and would ship again a file since deleted from src/, conf/ or sweeps/
  rm -rf build
  python -m pip install -q --disable-pip-version-check .
fi

python -m t4bench.data.prepare

if $all && [[ -x scripts/build_horovod.sh ]]; then
  scripts/build_horovod.sh
fi
