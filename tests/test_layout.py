"""The source layout rules of the team standards, checked on the files themselves: imports among
the modules under src/ flow one way (no cycle, type-only imports included), no file there is over
400 lines, the package's top level is the framework-free core (torch only in the pytorch/ wing),
and every MLflow name the code writes is spelled once, in tracking/names.py."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"
MAX_LINES = 400
#: statements whose bodies run when the module is imported
RUN_WITH_THE_MODULE = (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.ClassDef)


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules(root: Path) -> dict[str, Path]:
    return {module_name(root, path): path for path in sorted(root.rglob("*.py"))}


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def executed_imports(
    body: list[ast.stmt], deferred: bool, type_only: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports of a module that run when it is imported: at its top level, in top-level blocks
    and class bodies; with `deferred` also those in functions (they run later, when called); with
    `type_only` also those under `if TYPE_CHECKING:` (they run for the type checker)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if type_only or not is_type_checking(node.test):
                yield from executed_imports(node.body, deferred, type_only)
            yield from executed_imports(node.orelse, deferred, type_only)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(handler.body for handler in node.handlers), node.orelse, node.finalbody):
                yield from executed_imports(block, deferred, type_only)
        elif isinstance(node, RUN_WITH_THE_MODULE):
            yield from executed_imports([*node.body, *getattr(node, "orelse", [])], deferred, type_only)
        elif deferred and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from executed_imports(node.body, deferred, type_only)


def imported_modules(
    name: str, path: Path, known: set[str], deferred: bool, type_only: bool = False
) -> Iterator[tuple[str, int]]:
    """(module under src/, line) for each import `executed_imports` finds in `name` that names one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in executed_imports(ast.parse(path.read_text(), str(path)).body, deferred, type_only):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: `from . import x`, `from ..y import z`
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import sub` imports the submodule pkg.sub when there is one
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            if target in known and target != name:
                yield target, node.lineno


def import_graph(
    root: Path = SRC, deferred: bool = False, type_only: bool = False
) -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    """module -> the modules under `root` it imports (when imported; with `deferred` also later,
    in its functions; with `type_only` also for the type checker); (module, target) -> the line
    of the import."""
    modules = source_modules(root)
    known = set(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lines: dict[tuple[str, str], int] = {}
    for name, path in modules.items():
        for target, line in imported_modules(name, path, known, deferred, type_only):
            graph[name].add(target)
            lines.setdefault((name, target), line)
    return graph, lines


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as a list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_sees_what_runs_at_import_time(tmp_path: Path) -> None:
    # guards the cycle check against passing because it misses edges
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "import pkg.b\nfrom pkg import c\nfrom .sub import d\n",
        "pkg/b.py": "try:\n    from pkg.c import name\nexcept ImportError:\n    pass\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
        "def later():\n    import pkg.a\n",
        "pkg/e.py": "class Now:\n    import pkg.c\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "from .. import a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph, lines = import_graph(tmp_path)
    assert graph["pkg.a"] == {"pkg.b", "pkg.c", "pkg.sub.d"}
    assert graph["pkg.b"] == {"pkg.c"} and lines["pkg.b", "pkg.c"] == 2
    assert graph["pkg.c"] == set()  # TYPE_CHECKING and function-level imports do not count
    assert graph["pkg.sub.d"] == {"pkg.a"}
    assert graph["pkg.e"] == {"pkg.c"}  # a class body runs with the module
    assert cycles(graph) == [["pkg.a", "pkg.sub.d"]]
    later, _ = import_graph(tmp_path, deferred=True)
    assert later["pkg.c"] == {"pkg.a"}  # the function's import; TYPE_CHECKING's still not
    typed, typed_lines = import_graph(tmp_path, deferred=True, type_only=True)
    assert typed["pkg.c"] == {"pkg.a"} and typed_lines["pkg.c", "pkg.a"] == 3  # now TYPE_CHECKING's
    assert cycles(typed) == [["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    # and the real sources do import each other
    real, _ = import_graph()
    assert sum(len(targets) for targets in real.values()) > len(real) / 2


def describe(graph: dict[str, set[str]], lines: dict[tuple[str, str], int]) -> str:
    return "\n".join(
        "; ".join(
            f"{name} -> {target} (line {lines[name, target]})"
            for name in component
            for target in sorted(graph[name] & set(component))
        )
        for component in cycles(graph)
    )


def test_no_import_cycle_at_import_time() -> None:
    graph, lines = import_graph()
    assert not cycles(graph), "import cycles among module-level imports:\n" + describe(graph, lines)


def test_imports_flow_one_way_even_counting_deferred_imports() -> None:
    # an import moved into a function (to keep start-up light) does not make a loop acceptable:
    # runner -> rank (in a function) with rank -> runner (at the top) was one (issue 12)
    graph, lines = import_graph(deferred=True)
    assert not cycles(graph), "import cycles, imports in functions included:\n" + describe(graph, lines)


def test_no_source_file_over_400_lines() -> None:
    sizes = {path.relative_to(REPO): len(path.read_text().splitlines()) for path in SRC.rglob("*.py")}
    assert sizes, f"no sources under {SRC}"
    too_long = {str(path): count for path, count in sorted(sizes.items()) if count > MAX_LINES}
    assert not too_long, f"files over {MAX_LINES} lines: {too_long}"


def test_imports_flow_one_way_even_counting_type_only_imports() -> None:
    # an import under `if TYPE_CHECKING:` is still an arrow a reader follows: sweep.holdout <->
    # sweep.study was one (issue 23)
    graph, lines = import_graph(deferred=True, type_only=True)
    assert not cycles(graph), "import cycles, TYPE_CHECKING imports included:\n" + describe(graph, lines)


#: the packages tracking/ never reaches, directly or through another module: it is the floor they
#: stand on (issue 51: MLflow in one package, no package-level two-way import)
ABOVE_TRACKING = ("t4bench.sweep", "t4bench.preflight", "t4bench.pytorch", "t4bench.tf", "t4bench.benchmarks")


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_tracking_is_a_low_floor() -> None:
    graph, lines = import_graph(deferred=True, type_only=True)
    tracking = {name for name in graph if in_package(name, "t4bench.tracking")}
    assert "t4bench.tracking.names" in tracking, sorted(tracking)
    reached: dict[str, str] = {}  # module outside tracking/ -> the import that reaches it
    todo = [(name, target) for name in sorted(tracking) for target in sorted(graph[name])]
    while todo:
        source, target = todo.pop()
        if target in tracking or target in reached:
            continue
        reached[target] = f"{source} -> {target} (line {lines[source, target]})"
        todo.extend((target, nxt) for nxt in sorted(graph[target]))
    above = [why for target, why in sorted(reached.items()) if target.startswith(ABOVE_TRACKING)]
    assert not above, "tracking/ reaches packages above it:\n" + "\n".join(above)
    back = [
        f"{why}, which imports {sorted(graph[target] & tracking)}"
        for target, why in sorted(reached.items())
        if graph[target] & tracking
    ]
    assert not back, "tracking/ imports a module that imports tracking/ back:\n" + "\n".join(back)


#: the framework-free core may have at most this many modules directly under src/t4bench/ (31 since
#: resources.py, where the package finds its conf/ and sweeps/, joined the core)
MAX_TOP_LEVEL = 31
#: frameworks: what no module of the core imports when it is imported
FRAMEWORK_MODULES = ("torch", "torchvision", "tensorflow", "keras")


def test_the_top_level_is_the_framework_free_core() -> None:
    top = sorted((SRC / "t4bench").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules directly under src/t4bench/: {[p.name for p in top]}"
    loaded = {}
    for path in top:
        for node in executed_imports(ast.parse(path.read_text(), str(path)).body, deferred=False):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            hits = [n for n in names if n.split(".")[0] in FRAMEWORK_MODULES]
            if hits:
                loaded[f"{path.name}:{node.lineno}"] = hits
    assert not loaded, f"framework imports at module level outside pytorch/ and tf/: {loaded}"


def test_no_loop_function_over_60_lines() -> None:
    # the MLPerf cadence and the two loops that adapt it stay readable at a glance
    too_long = {}
    for rel in ("t4bench/cadence.py", "t4bench/pytorch/loop.py", "t4bench/tf/loop.py"):
        tree = ast.parse((SRC / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    too_long[f"{rel}:{node.name}"] = length
    assert not too_long, f"functions over 60 lines: {too_long}"


#: where the MLflow names are spelled, relative to src/
NAMES = Path("t4bench/tracking/names.py")


def source_modules_and_attributes() -> set[str]:
    """Every module under src/ by dotted name, and `module.name` for its top-level definitions."""
    found = set()
    for name, path in source_modules(SRC).items():
        found.add(name)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add(f"{name}.{node.name}")
    return found


def string_literals(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(text, line) of each string literal and of each f-string's leading text; docstrings and
    other bare string statements excluded."""
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            bare.update(id(part) for part in node.values)
            yield str(node.values[0].value), node.lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            yield node.value, node.lineno


def mlflow_name_literals(root: Path, modules: set[str]) -> list[str]:
    """`file:line text` of each literal under `root` that spells a t4bench MLflow name: it starts
    with `t4bench.` and does not name a module or a module's function or class
    (`t4bench.pytorch.rank:join`, `-m t4bench.report`: a tag equal to a module's name, as
    `t4bench.report` is, passes unseen)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root) == NAMES:
            continue
        for text, line in sorted(string_literals(ast.parse(path.read_text(), str(path))), key=lambda hit: hit[1]):
            head = re.match(r"t4bench(\.\w+)+", text)
            module_path = head is not None and head.group(0) in modules and not text[head.end() :].startswith(".")
            if text.startswith("t4bench.") and not module_path:
                found.append(f"{path.relative_to(root)}:{line} {text!r}")
    return found


def test_mlflow_names_are_spelled_only_in_tracking_names(tmp_path: Path) -> None:
    modules = source_modules_and_attributes()
    found = mlflow_name_literals(SRC, modules)
    assert not found, "use the tracking.names constant:\n" + "\n".join(found)
    # and the check finds what it is for (a tag, an f-string prefix), but not module paths or docs
    (tmp_path / "probe.py").write_text(
        '"""t4bench.model in a docstring."""\n'
        'TAG = "t4bench.sweep_role"\n'
        'tags = {f"t4bench.perf.{key}": 1 for key in "ab"}\n'
        'ENTRY = "t4bench.pytorch.rank:join"\n'
        'cmd = ["-m", "t4bench.sweep.holdout"]\n'
    )
    found = mlflow_name_literals(tmp_path, modules)
    assert found == ["probe.py:2 't4bench.sweep_role'", "probe.py:3 't4bench.perf.'"], found


#: function signatures under src/ that may take a raw omegaconf DictConfig: the edge where the
#: composed config is read. 15 (issue 51): Hydra's own APIs (the @hydra.main task function and the
#: app, app_job.run starting a single run's job, the sweeper's setup, the packing and sweep-summary
#: callbacks' on_* methods), the spec's
#: builders (build_spec, section.build), and the command-line preflight (its composition's checks:
#: command_line's, config.validate, overrides.check_added_keys); below it functions take the run
#: spec (t4bench.spec) or plain values. Never raised
MAX_DICTCONFIG_SIGNATURES = 15


def dictconfig_signatures(root: Path) -> list[str]:
    """`file:line name` of each function under `root` with a parameter annotated with DictConfig."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args
            params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
            if any(
                p is not None and p.annotation is not None and "DictConfig" in ast.unparse(p.annotation) for p in params
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_only_the_edge_takes_a_raw_config(tmp_path: Path) -> None:
    found = dictconfig_signatures(SRC)
    assert len(found) <= MAX_DICTCONFIG_SIGNATURES, (
        f"{len(found)} functions take a raw DictConfig (at most {MAX_DICTCONFIG_SIGNATURES}): take the run spec "
        "(t4bench.spec) instead:\n" + "\n".join(found)
    )
    # and the count sees what it is for: a parameter, a quoted or optional annotation, a method
    (tmp_path / "probe.py").write_text(
        "def a(cfg: DictConfig) -> None: ...\n"
        "def b(x: int, cfg: 'DictConfig | None' = None) -> DictConfig: ...\n"
        "class C:\n    def m(self, *, node: omegaconf.DictConfig) -> None: ...\n"
        "def d(spec: RunSpec) -> DictConfig: ...\n"
    )
    assert dictconfig_signatures(tmp_path) == ["probe.py:1 a", "probe.py:2 b", "probe.py:4 m"]


#: pairs of packages under src/t4bench/ that still import each other: none (kept to name any pair
#: a change brings back, which the test refuses)
TWO_WAY_PACKAGES: set[tuple[str, str]] = set()


def two_way_packages(
    graph: dict[str, set[str]], lines: dict[tuple[str, str], int], packages: set[str]
) -> dict[tuple[str, str], str]:
    """(a, b) with a < b -> one import each way, for every two of `packages` that import each other
    (a module's package: the one of `packages` it is in; top-level modules are in none)."""

    def package(module: str) -> str | None:
        return next((name for name in packages if in_package(module, name)), None)

    edges: dict[tuple[str, str], str] = {}
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = package(name), package(target)
            if here and there and here != there:
                edges.setdefault((here, there), f"{name} -> {target} (line {lines[name, target]})")
    return {(a, b): f"{why}; {edges[b, a]}" for (a, b), why in edges.items() if a < b and (b, a) in edges}


def test_no_two_packages_import_each_other() -> None:
    graph, lines = import_graph(deferred=True, type_only=True)
    packages = {f"t4bench.{path.parent.name}" for path in (SRC / "t4bench").glob("*/__init__.py")}
    assert {"t4bench.benchmarks", "t4bench.data", "t4bench.pytorch"} <= packages, sorted(packages)
    found = two_way_packages(graph, lines, packages)
    new = "\n".join(why for pair, why in sorted(found.items()) if pair not in TWO_WAY_PACKAGES)
    assert not new, "packages importing each other:\n" + new
    assert set(found) == TWO_WAY_PACKAGES, f"untangled, drop from TWO_WAY_PACKAGES: {TWO_WAY_PACKAGES - set(found)}"
    # and the check sees what it is for: a module's import of another package's, either way round
    probe = {"t4bench.a.x": {"t4bench.b.y"}, "t4bench.b.y": set(), "t4bench.b.z": {"t4bench.a"}, "t4bench.a": set()}
    probe_lines = {("t4bench.a.x", "t4bench.b.y"): 3, ("t4bench.b.z", "t4bench.a"): 5}
    found = two_way_packages(probe, probe_lines, {"t4bench.a", "t4bench.b"})
    assert found == {
        ("t4bench.a", "t4bench.b"): "t4bench.a.x -> t4bench.b.y (line 3); t4bench.b.z -> t4bench.a (line 5)"
    }
    assert two_way_packages(probe, probe_lines, {"t4bench.a", "t4bench.b.y"}) == {}
