#!/usr/bin/env bash
# Fetch, here (where PyPI is reachable), the wheels an offline GPU host lacks, into .whl/ (ignored by
# git), for scripts/gpu/run.sh to install there. That machine has Python 3.12 with CUDA torch,
# numpy, pandas, scipy, sacrebleu, sentencepiece, nvidia-ml-py, ... but no mlflow, hydra, optuna,
# pycocotools or mlperf-logging, and no package index. Wheels of packages it already has are
# dropped, so the carried folder stays small (~29 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.whl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# hydra-core needs antlr4-python3-runtime 4.9.*, published as an sdist only: build its wheel first
python3 -m pip wheel -q --no-deps "antlr4-python3-runtime==4.9.3" -w "$work"
platforms=()
for tag in manylinux1 manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34; do
  platforms+=(--platform "${tag}_x86_64")
done
python3 -m pip download -q --disable-pip-version-check --find-links "$work" --only-binary=:all: \
  --python-version 3.12 --implementation cp "${platforms[@]}" -d "$work" \
  mlflow==3.17.2 optuna==5.0.0 hydra-core==1.3.8 mlperf-logging==4.1.68 pycocotools==2.0.11 cmaes==0.13.1 \
  hydra-joblib-launcher==1.2.0 hydra-submitit-launcher==1.2.0 submitit==1.5.4 psutil==7.2.2
# already on the GPU image (its package list in the device notes): keep its versions
on_image=" aiohappyeyeballs aiohttp aiosignal annotated_doc anyio attrs certifi charset_normalizer click
 cloudpickle contourpy cycler fonttools frozenlist h11 idna jinja2 joblib kiwisolver markupsafe matplotlib
 multidict narwhals numpy packaging pandas pillow propcache protobuf pyarrow pyparsing python_dateutil
 pyyaml requests scikit_learn scipy six threadpoolctl tqdm typing_extensions urllib3 werkzeug yarl zipp "
on_image=" $(echo $on_image) "  # one line, single spaces
rm -rf "$dest" && mkdir -p "$dest"
for wheel in "$work"/*.whl; do
  name=$(basename "$wheel" | cut -d- -f1 | tr 'A-Z' 'a-z')
  [[ "$on_image" == *" $name "* ]] || cp "$wheel" "$dest/"
done
# the GPU machine serves no MLflow UI: its 7.5 MB of JavaScript is left out of the carried mlflow
# wheel (and out of the wheel's RECORD), which keeps wheels + the mini data under a call's 64 MiB
python3 - "$dest"/mlflow-[0-9]*.whl <<'PY'
import sys, zipfile
from pathlib import Path

wheel = Path(sys.argv[1])
slim = wheel.with_suffix(".slim")
ui = "mlflow/server/js/"
with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as out:
    for item in src.infolist():
        if item.filename.startswith(ui):
            continue
        data = src.read(item)
        if item.filename.endswith(".dist-info/RECORD"):
            data = b"".join(line for line in data.splitlines(True) if not line.startswith(ui.encode()))
        out.writestr(item, data)
slim.replace(wheel)
PY
echo "gpu_wheels: $(ls "$dest" | wc -l) wheels, $(du -sh "$dest" | cut -f1) in $dest"
