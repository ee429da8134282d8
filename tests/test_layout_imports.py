"""Import layout (issue 19): the cycles this step removed stay removed. The import graph is
read with ``ast`` (function-level imports included: a lazy import is still an edge)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("metric_ops", "resources", "assets", "pipelines")


def _imports(path: Path, modules: set[str]) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            names.update(subs)
            if not subs <= modules:  # `from resources import pii_lexicon` names the module, not the package
                names.add(node.module)
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (``from resources import outbound`` counts as
    resources.privacy.outbound; a package's ``__init__`` is the package name)."""
    modules = {}
    for package in PACKAGES:
        for p in (ROOT / package).glob("*.py"):
            modules[package if p.stem == "__init__" else f"{package}.{p.stem}"] = p
    return {m: {n for n in _imports(p, set(modules)) if n in modules and n != m} for m, p in modules.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_anonymiser_imports_no_transport():
    graph = import_graph()
    family = sorted(m for m in graph if m.startswith("resources.privacy.anonymise"))
    assert len(family) >= 6  # one module per recogniser family, the shared types and the anonymiser
    for module in family:
        assert "resources.privacy.outbound" not in reachable(graph, module), f"{module} reaches resources.privacy.outbound"
        assert "resources.privacy.policy" not in reachable(graph, module), f"{module} reaches resources.privacy.policy"


def test_anonymise_modules_stay_small():
    for path in (ROOT / "resources").glob("anonymise*.py"):
        assert len(path.read_text().splitlines()) <= 500, path.name


def test_reachable_follows_lazy_imports():
    graph = import_graph()
    # privacy imports outbound inside a function: still an edge of the graph
    assert "resources.privacy.outbound" in graph["resources.privacy.policy"]
    assert reachable({"a": {"b"}, "b": {"c"}, "c": set()}, "a") == {"b", "c"}


def test_backends_are_listed_by_name_not_registered_by_import():
    graph = import_graph()
    builtins = {"resources.backends.hf", "resources.backends.api", "resources.backends.vllm", "resources.backends.heuristic",
                "resources.lm_eval.bridge"}
    assert not builtins & reachable(graph, "resources.backends")  # no bottom-of-file imports, so no cycle
    for module in builtins:
        assert "BACKENDS[" not in (ROOT / "resources" / f"{module.split('.')[1]}.py").read_text(), module


def test_backend_registry_imports_a_backend_on_first_use():
    import subprocess
    import sys

    code = ("import sys\nfrom resources.backends import BACKENDS\n"
            "assert 'heuristic' in BACKENDS and 'resources.backends.heuristic' not in sys.modules\n"
            "cls = BACKENDS['heuristic']\n"
            "assert cls.__name__ == 'HeuristicBackend' and 'resources.backends.heuristic' in sys.modules\n"
            "assert sorted(BACKENDS) == ['api', 'heuristic', 'hf', 'lm_eval', 'precomputed', 'vllm']\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr


def test_backend_registry_refuses_a_non_backend():
    import pytest

    from metric_ops.plugins import Registry
    from resources.backends import ModelBackend, PrecomputedBackend

    registry = Registry("backend", base=ModelBackend)
    registry.register("precomputed", PrecomputedBackend)
    with pytest.raises(TypeError, match="backend 'x'.*is not a subclass of resources.backends.ModelBackend"):
        registry["x"] = dict
    registry["copy"] = PrecomputedBackend
    assert registry["copy"] is PrecomputedBackend and "copy" in registry
