"""t4bench as a user installs it: the wheel built from this checkout, installed into a virtual
environment outside it, run from a folder outside it. The wheel must carry every conf/ and sweeps/
YAML (t4bench.resources finds them inside the package), and the installed `t4bench` must answer
`--help`, compose every config file, train the default NCF mini to its target and run a 2-seed
sweep (one epoch a seed), all with the checkout out of the way.

How the environment is made (measured 2026-12-06 on a 2-core host like CI's, Python 3.11, pip 23.2).
A fully fresh venv (`python -m venv` + `pip install <wheel>`, every dependency from the local wheel
index, nothing downloaded) took 8 min 57 s with the host busy (load ~11) and holds 6.3 GB (torch
and the CUDA libraries): too long for CI's ~30 min. It was made once by hand and ran the default
NCF run from a folder outside the checkout to its target (converged, 4 epochs). The venv made
here is `python -m venv --system-site-packages --without-pip` (0.4 s), and only the wheel goes
into it (`pip install --no-deps --no-index`, 4.4 s; `pip check` 5.0 s): its dependencies come
from the environment the tests run in, and `pip check` in the venv proves that every requirement
of the wheel resolves there. `--without-pip`: ensurepip would put setuptools 65 into the venv,
shadowing the environment's and breaking torch's requirement on it; the environment's pip
installs into the venv (`pip --python`). All six tests take ~1.5 min on an idle host.

The wheel is built from a copy of what the build reads (pyproject.toml, README.md, src/, conf/,
sweeps/, links kept as links) so that the build's own build/ folder stays out of the checkout,
with `--no-build-isolation` (the environment's setuptools; nothing downloaded). The checkout's
editable install stays on the environment's path behind the venv's site-packages (its .pth is
read through --system-site-packages): one test asserts that t4bench, its Hydra plugins and its
YAML are the venv's, and every command runs the venv's own `t4bench` with no PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DATA_ROOT, REPO, all_runs

pytestmark = pytest.mark.slow

#: what the wheel is built from: what pyproject.toml's build reads
BUILD_INPUTS = ("pyproject.toml", "README.md", "src", "conf", "sweeps")


@dataclass(frozen=True)
class Installed:
    """The venv with the built wheel installed, and a folder outside the checkout to run in."""

    wheel: Path
    root: Path
    python: Path
    site_packages: Path

    def env(self, cwd: Path) -> dict[str, str]:
        """The environment of a user of this venv working in `cwd`: its bin/ first, no PYTHONPATH
        (the suite's runs put the checkout's src/ there), an MLflow store in `cwd`, the
        checkout's mini data."""
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env.update(
            PATH=f"{self.python.parent}{os.pathsep}{env.get('PATH', '')}",
            VIRTUAL_ENV=str(self.root),
            MLFLOW_TRACKING_URI=f"sqlite:///{cwd / 'mlflow.db'}",
            T4BENCH_DATA_DIR=str(DATA_ROOT),
            OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
        )
        return env

    def run(self, cwd: Path, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`command` (its first word from the venv's bin/) in `cwd`, a folder outside the
        checkout; fails with its output unless it exits 0."""
        assert REPO not in cwd.resolve().parents
        proc = subprocess.run(
            [str(self.python.parent / command[0]), *command[1:]],
            cwd=cwd,
            env=self.env(cwd),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, (
            f"{' '.join(command)} -> {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
        return proc


def _ignore_build_leftovers(folder: str, names: list[str]) -> set[str]:
    return {name for name in names if name in ("__pycache__", "build") or name.endswith(".egg-info")}


def build_wheel(out: Path) -> Path:
    source = out / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, symlinks=True, ignore=_ignore_build_leftovers)
        else:
            shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = out.glob("t4bench-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert REPO not in base.parents
    wheel = build_wheel(base)
    root = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True)
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    return Installed(wheel, root, python, site_packages)


def _yaml_files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*.yaml")}


def test_the_wheel_carries_every_config_and_sweep(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    shipped_conf = {n.removeprefix("t4bench/conf/") for n in names if n.startswith("t4bench/conf/")}
    shipped_sweeps = {
        n.removeprefix("t4bench/search_root/sweeps/") for n in names if n.startswith("t4bench/search_root/sweeps/")
    }
    assert shipped_conf == _yaml_files(REPO / "conf") and len(shipped_conf) > 50
    assert shipped_sweeps == _yaml_files(REPO / "sweeps") and shipped_sweeps
    # Hydra finds the plugins (Optuna sweeper, sweeps search path, Slurm launcher) by this namespace
    assert {"hydra_plugins/t4bench_sweeper/searchpath.py", "hydra_plugins/t4bench_slurm/launcher.py"} <= set(names)


WHERE = """
import json, importlib.metadata, hydra_plugins.t4bench_sweeper, t4bench
from t4bench import resources
print(json.dumps({
    "t4bench": t4bench.__file__,
    "plugin": hydra_plugins.t4bench_sweeper.__file__,
    "dist": str(importlib.metadata.distribution("t4bench").locate_file("t4bench")),
    "conf": str(resources.conf_dir()),
    "sweeps": str(resources.sweeps_dir()),
}))
"""


def test_t4bench_and_its_yaml_come_from_the_venv(installed: Installed, tmp_path: Path) -> None:
    where = json.loads(installed.run(tmp_path, "python", "-c", WHERE).stdout)
    for name, path in where.items():
        resolved = Path(path).resolve()
        assert installed.site_packages.resolve() in resolved.parents, (name, path)
        assert REPO not in resolved.parents, (name, path)
    assert _yaml_files(Path(where["conf"])) == _yaml_files(REPO / "conf")
    assert _yaml_files(Path(where["sweeps"])) == _yaml_files(REPO / "sweeps")
    # every requirement of the installed wheel is met by what the venv sees
    check = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(installed.python), "check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_help_lists_the_choices_of_the_shipped_conf(installed: Installed, tmp_path: Path) -> None:
    out = installed.run(tmp_path, "t4bench", "--help").stdout
    lines = {line.split("=", 1)[0].strip(): line for line in out.splitlines() if "=" in line}
    for group in ("model", "hw"):
        for name in sorted(p.stem for p in (REPO / "conf" / group).glob("*.yaml")):
            assert name in lines[group], (group, name, lines[group])
    presets = next(
        line for line in installed.run(tmp_path, "t4bench", "sweep", "--help").stdout.splitlines() if "presets:" in line
    )
    assert presets.split(":", 1)[1].strip().split(", ") == sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))


#: run in the venv: every YAML file of the installed conf/ selected through the group it is in
#: (`group=name` where the defaults list has the group, `+group=name` where it has not; a nested
#: group with the option that brings it in) and composed as the app composes, search-path
#: plugins included; prints {file: the choice Hydra recorded for its group}
COMPOSE_EVERY_FILE = """
import json
from hydra import compose, initialize_config_dir
from t4bench import resources

# groups that exist only under another choice: the Optuna sweeper's pruner and sampler
CONTEXT = {"hydra/sweeper/pruner": ["hydra/sweeper=optuna"], "hydra/sweeper/sampler": ["hydra/sweeper=optuna"]}
conf = resources.conf_dir()
files = {f"conf/{p.relative_to(conf).as_posix()}": p.relative_to(conf) for p in conf.rglob("*/*.yaml")}
files |= {f"sweeps/{p.name}": p.relative_to(resources.sweeps_root()) for p in resources.sweeps_dir().glob("*.yaml")}
chosen = {}
with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
    defaults = compose(config_name="config", return_hydra_config=True).hydra.runtime.choices
    keys = {key.split("@")[0]: key for key in defaults}
    for file, path in sorted(files.items()):
        group, name = path.parent.as_posix(), path.stem
        context = CONTEXT.get(group, [])
        key = keys.get(group, group)
        override = f"{key}={name}" if group in keys or context else f"+{group}={name}"
        cfg = compose(config_name="config", overrides=[*context, override], return_hydra_config=True)
        chosen[file] = cfg.hydra.runtime.choices.get(key)
print(json.dumps(chosen))
"""


def test_every_config_file_composes(installed: Installed, tmp_path: Path) -> None:
    chosen = json.loads(installed.run(tmp_path, "python", "-c", COMPOSE_EVERY_FILE).stdout)
    # every file but the primary config.yaml (which every compose loads) is in a group
    expected = {f"conf/{file}": Path(file).stem for file in _yaml_files(REPO / "conf") if file != "config.yaml"}
    expected |= {f"sweeps/{file}": Path(file).stem for file in _yaml_files(REPO / "sweeps")}
    assert chosen == expected
    # and through the installed command itself: the app's own config path and the sweeps plugin
    job = installed.run(tmp_path, "t4bench", "run", "model=resnet50", "hw=h100", "--cfg", "job").stdout
    assert "name: resnet50" in job and "name: h100" in job
    hydra = installed.run(tmp_path, "t4bench", "run", "+sweeps=ncf_tuned", "--cfg", "hydra").stdout
    assert "hydra/sweeper: optuna" in hydra


def test_default_run_reaches_its_target(installed: Installed, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    installed.run(tmp_path, "t4bench", "run", "progress=off", timeout=1200)
    (run,) = all_runs(MlflowClient(installed.env(tmp_path)["MLFLOW_TRACKING_URI"]), "t4bench-ncf")
    assert run.info.status == "FINISHED"
    assert run.data.tags["t4bench.outcome"] == "converged" and run.data.metrics["converged"] == 1.0
    assert run.data.params["model.name"] == "ncf" and run.data.tags["t4bench.scale"] == "mini"


def test_two_seed_sweep(installed: Installed, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    sweep_dir = tmp_path / "sweep"
    installed.run(
        tmp_path,
        "t4bench",
        "sweep",
        "seed=range(0,2)",
        "max_epochs=1",
        "progress=off",
        f"hydra.sweep.dir={sweep_dir}",
        timeout=900,
    )
    runs = all_runs(MlflowClient(installed.env(tmp_path)["MLFLOW_TRACKING_URI"]), "t4bench-ncf")
    (parent,) = [r for r in runs if r.data.tags.get("t4bench.sweep_role") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["t4bench.seed"] for r in children) == ["0", "1"]
    assert {r.info.status for r in [parent, *children]} == {"FINISHED"}
    assert (sweep_dir / "summary.json").exists()
