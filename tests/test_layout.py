"""The code layout (DESIGN.md, Layout): imports point metric_ops <- resources <- assets <-
pipelines, no import cycle, and no module over 500 lines in those packages.

The import graph is read with :mod:`ast` (nothing is imported). Every ``import`` counts
for direction, including imports inside functions and ``TYPE_CHECKING`` blocks (a lazy
import is still a dependency); cycles are looked for among module-level imports, the
ones that run when a module is imported.

The whole-tree assertions are strict: issue 19's layout step split the last files over
500 lines, and ``KNOWN_*`` (the offenders on the day this test was written) are empty.
``test_no_new_offenders`` keeps refusing additions to those lists.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("metric_ops", "resources", "assets", "pipelines")  # each may import only those before it
MAX_LINES = 500

# offenders when this test was written (issue 19's layout step is split across branches)
KNOWN_LONG: set[str] = set()
KNOWN_BACKWARD: set[tuple[str, str]] = set()


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT, packages: tuple[str, ...] = LAYERS) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file under ``packages``."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
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


def imports(path: Path, module: str, known: set[str]) -> list[tuple[str, bool, int]]:
    """``(imported project module, at module level?, line)`` for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body}
    # module level: statements in the body, and inside top-level if/try blocks (not TYPE_CHECKING)
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
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for name in names:
            target = _target(name, known)
            if target is not None and target != module:
                out.append((target, id(node) in top_level, node.lineno))
    return out


def graph(root: Path = ROOT, packages: tuple[str, ...] = LAYERS) -> tuple[dict[str, Path], list[tuple[str, str, bool, int]]]:
    modules = project_modules(root, packages)
    known = set(modules)
    edges = [(m, t, top, line) for m, p in modules.items() for t, top, line in imports(p, m, known)]
    return modules, edges


def backward_imports(edges, packages: tuple[str, ...] = LAYERS) -> set[tuple[str, str]]:
    rank = {p: i for i, p in enumerate(packages)}
    return {(a, b) for a, b, _, _ in edges if rank[a.split(".")[0]] < rank[b.split(".")[0]]}


def cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module among module-level imports (Tarjan)."""
    succ: dict[str, set[str]] = {}
    for a, b, top, _ in edges:
        if top:
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


def long_files(root: Path = ROOT, packages: tuple[str, ...] = LAYERS) -> set[str]:
    return {str(p.relative_to(root)) for p in project_modules(root, packages).values()
            if len(p.read_text(encoding="utf-8").splitlines()) > MAX_LINES}


# ---------------------------------------------------------------------------- the checker can fail
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_checker_finds_backward_imports_cycles_and_long_files(tmp_path):
    root = _tree(tmp_path, {
        "metric_ops/__init__.py": "",
        "metric_ops/a.py": "from resources.b import X\n",  # backward
        "metric_ops/c.py": "import metric_ops.d\n",  # c <-> d: a cycle
        "metric_ops/d.py": "from metric_ops import c\n" + "x = 1\n" * 501,  # and long
        "metric_ops/e.py": "def f():\n    from . import c\n",  # relative, lazy: direction only
        "resources/__init__.py": "",
        "resources/b.py": "from metric_ops.a import Y\nX = 1\n",  # allowed direction, but a -> b -> a
    })
    packages = ("metric_ops", "resources")
    _, edges = graph(root, packages)
    assert backward_imports(edges, packages) == {("metric_ops.a", "resources.b")}
    assert cycles(edges) == [["metric_ops.a", "resources.b"], ["metric_ops.c", "metric_ops.d"]]
    assert ("metric_ops.e", "metric_ops.c", False, 2) in edges
    assert long_files(root, packages) == {"metric_ops/d.py"}


def test_a_function_level_import_is_no_cycle(tmp_path):
    root = _tree(tmp_path, {
        "metric_ops/__init__.py": "",
        "metric_ops/a.py": "import metric_ops.b\n",
        "metric_ops/b.py": "def f():\n    import metric_ops.a\n",
    })
    _, edges = graph(root, ("metric_ops",))
    assert cycles(edges) == []


# ---------------------------------------------------------------------------- the tree
_, EDGES = graph()


def test_no_new_offenders():
    """Strict: no file, backward import or cycle beyond the ones listed when this test was written."""
    assert long_files() - KNOWN_LONG == set()
    assert backward_imports(EDGES) - KNOWN_BACKWARD == set()
    in_cycles = {m for comp in cycles(EDGES) for m in comp}
    assert in_cycles - KNOWN_IN_CYCLES == set(), cycles(EDGES)


KNOWN_IN_CYCLES: set[str] = set()


def test_no_file_over_500_lines():
    assert long_files() == set()


def test_imports_point_metric_ops_resources_assets_pipelines():
    assert backward_imports(EDGES) == set()


def test_no_import_cycles():
    assert cycles(EDGES) == []


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
    code = ("import sys, metric_ops; from metric_ops.registry import REGISTRY; names = REGISTRY.names(); "
            "loaded = sorted(m for m in sys.modules if m in {'metric_ops.toolcalls', 'metric_ops.judged.geval_jury', "
            "'metric_ops.neural.bertscore', 'metric_ops.lexical.rouge', 'metric_ops.agents.oracles', 'metric_ops.rag.checks'}); "
            "print(len(names), loaded)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split(None, 1)
    assert int(out[0]) >= 40 and out[1].strip() == "[]"
