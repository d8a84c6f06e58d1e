#!/usr/bin/env bash
# Build and install Horovod 0.28.1 (PyTorch, gloo + MPI; no TensorFlow/MXNet) from the PyPI sdist,
# against the torch already installed. Idempotent: exits at once when `import horovod.torch` works.
#
# Why a script: horovod 0.28.1 as released does not build against torch 2.x >= 2.6 because its
# CMake files pin C++14 (torch's headers need C++17, torch 2.14's need C++20). The minimal fix,
# applied below with checks that each edit really happened:
#   CMakeLists.txt                 CMAKE_CXX_STANDARD 14 -> 17   (root project: common/, MPI, gloo ops)
#   horovod/torch/CMakeLists.txt   CMAKE_CXX_STANDARD 14 -> 20   (the torch extension)
#   third_party/gloo/CMakeLists.txt  -std=c++11 -> -std=c++17    (gloo's own flag overrides the standard)
# and `pip install --no-build-isolation` so the build sees the installed torch (an isolated build
# would pull some other torch from PyPI). Takes ~5-6 min on 2 cores.
#
#   scripts/build_horovod.sh              build + install into the current python
#   PYTHON=/path/python scripts/build_horovod.sh
#   HOROVOD_BUILD_DIR=/tmp/x scripts/build_horovod.sh   where the sdist is unpacked (default: a temp dir)
set -euo pipefail

VERSION=0.28.1
PYTHON=${PYTHON:-python}

if "$PYTHON" -c "import horovod.torch" 2>/dev/null; then
  echo "build_horovod: horovod.torch already importable ($("$PYTHON" -c 'import horovod; print(horovod.__version__)')), nothing to do"
  exit 0
fi

for tool in cmake mpicxx mpirun; do
  command -v "$tool" >/dev/null || {
    echo "build_horovod: '$tool' not found (apt-get install cmake openmpi-bin libopenmpi-dev)" >&2
    exit 1
  }
done
"$PYTHON" -c "import torch" || { echo "build_horovod: install torch first" >&2; exit 1; }

work=${HOROVOD_BUILD_DIR:-$(mktemp -d -t horovod-build.XXXXXX)}
mkdir -p "$work"
cd "$work"
if [[ ! -f horovod-$VERSION.tar.gz ]]; then
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "horovod==$VERSION" -d .
fi
rm -rf "horovod-$VERSION"
tar xzf "horovod-$VERSION.tar.gz"
src=$work/horovod-$VERSION

# replace exactly one occurrence of $2 by $3 in file $1, or fail loudly (a different sdist)
patch_one() {
  local file=$1 from=$2 to=$3
  local count
  count=$(grep -cF -- "$from" "$file" || true)
  if [[ "$count" != 1 ]]; then
    echo "build_horovod: expected one '$from' in $file, found $count" >&2
    exit 1
  fi
  FROM=$from TO=$to "$PYTHON" - "$file" <<'EOF'
import os, sys
path = sys.argv[1]
text = open(path).read()
open(path, "w").write(text.replace(os.environ["FROM"], os.environ["TO"], 1))
EOF
}
patch_one "$src/CMakeLists.txt" "set(CMAKE_CXX_STANDARD 14)" "set(CMAKE_CXX_STANDARD 17)"
patch_one "$src/horovod/torch/CMakeLists.txt" "set(CMAKE_CXX_STANDARD 14)" "set(CMAKE_CXX_STANDARD 20)"
patch_one "$src/third_party/gloo/CMakeLists.txt" '-std=c++11 -fPIC' '-std=c++17 -fPIC'

# torch's CMake config looks for the CUDA toolkit when torch is a CUDA build; point it at one if
# this machine has it (the build still makes CPU/gloo/MPI ops only: no HOROVOD_GPU_OPERATIONS)
if [[ -z "${CUDA_HOME:-}" ]]; then
  for candidate in /usr/local/cuda /opt/cuda; do
    [[ -x $candidate/bin/nvcc ]] && { export CUDA_HOME=$candidate; break; }
  done
fi
if [[ -n "${CUDA_HOME:-}" ]]; then
  # horovod's CMake takes the compiler from HOROVOD_CUDA_HOME; CMake's FindCUDAToolkit otherwise
  # derives the toolkit root from the first nvcc on PATH (a wrapper in /usr/local/bin has no headers)
  export HOROVOD_CUDA_HOME=${HOROVOD_CUDA_HOME:-$CUDA_HOME} CUDAToolkit_ROOT=${CUDAToolkit_ROOT:-$CUDA_HOME}
  echo "build_horovod: CUDA_HOME=$CUDA_HOME"
fi

export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
export HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1
export MAKEFLAGS="-j${HOROVOD_BUILD_JOBS:-$(nproc)}"
export CMAKE_BUILD_PARALLEL_LEVEL=${HOROVOD_BUILD_JOBS:-$(nproc)}

echo "build_horovod: building horovod $VERSION in $src (this takes several minutes)"
"$PYTHON" -m pip install --disable-pip-version-check --no-build-isolation --no-cache-dir -v "$src" \
  >"$work/build.log" 2>&1 || {
  echo "build_horovod: build failed; last lines of $work/build.log:" >&2
  tail -40 "$work/build.log" >&2
  exit 1
}

"$PYTHON" -c "import horovod.torch as hvd; print('build_horovod: installed horovod', __import__('horovod').__version__)"
horovodrun --check-build | sed 's/^/build_horovod: /'
