"""pyproject.toml declares what the code imports: src/ imports only run-time dependencies (the
TensorFlow backend its extra), tests/perf/scripts also the test extra; the default install
stays PyTorch-only and carries no test tools."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
#: first-party packages, and the local helper modules perf/ and tests/ import by name
FIRST_PARTY = {"t4bench", "hydra_plugins", "conftest", "tests"}
#: imported but not installable from pyproject.toml: Horovod is built by scripts/build_horovod.sh
BUILT_SEPARATELY = {"horovod"}
TEST_ONLY = {"pytest", "ruff", "mypy", "psycopg2-binary"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    names = set()
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        assert match, requirement
        names.add(normalized(match.group()))
    return names


RUNTIME = requirement_names(PYPROJECT["dependencies"])
EXTRAS = {extra: requirement_names(reqs) for extra, reqs in PYPROJECT["optional-dependencies"].items()}


def third_party_imports(folder: Path) -> dict[str, set[str]]:
    """top-level imported name -> the files that import it (anywhere in them), for every name
    that is neither the standard library, first-party, nor a module next to the importer."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in (n.split(".")[0] for n in names):
                local = (path.parent / f"{name}.py").exists() or (path.parent / name).is_dir()
                if name not in sys.stdlib_module_names and name not in FIRST_PARTY and not local:
                    found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def undeclared(folder: Path, declared: set[str]) -> dict[str, list[str]]:
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for name, files in third_party_imports(folder).items():
        if name in BUILT_SEPARATELY:
            continue
        provided_by = {normalized(dist) for dist in distributions.get(name, [name])}
        if not provided_by & declared:
            missing[f"{name} (from {', '.join(sorted(provided_by))})"] = sorted(files)[:3]
    return missing


def test_src_imports_only_declared_runtime_packages() -> None:
    assert not undeclared(REPO / "src", RUNTIME | EXTRAS["tensorflow"]), "declare these in [project] dependencies"


@pytest.mark.parametrize("folder", ["tests", "perf", "scripts"])
def test_tools_import_only_declared_packages(folder: str) -> None:
    declared = RUNTIME.union(*EXTRAS.values())  # a tool may need any declared extra
    assert not undeclared(REPO / folder, declared), "declare these in dependencies or the test extra"


def test_default_install_is_pytorch_only_without_test_tools() -> None:
    assert {"torch", "torchvision"} <= RUNTIME
    assert not RUNTIME & {"tensorflow", "tensorflow-cpu", "keras"}
    assert not RUNTIME & TEST_ONLY, "test-only packages belong in the test extra"
    assert EXTRAS["test"] >= TEST_ONLY


def test_torch_is_a_range_not_a_pin() -> None:
    # an exact pin would make pip replace a machine's CUDA build of torch
    for requirement in PYPROJECT["dependencies"]:
        if normalized(re.split(r"[<>=!~ ;\[]", requirement)[0]) in ("torch", "torchvision"):
            assert "==" not in requirement and ">=" in requirement and "<" in requirement, requirement
