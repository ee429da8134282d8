"""Import layout of two families (issues 19, 27): the anonymisers reach no transport, and the
backends are listed by name, not imported by their registry. The import graph is
tests/test_layout.py's (function-level imports included: a lazy import is still an edge)."""

from __future__ import annotations

from pathlib import Path

from tests.test_layout import graph

ROOT = Path(__file__).resolve().parents[1]


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (every import, function level included; a
    package's ``__init__`` is the package name), from tests/test_layout.py's reading."""
    modules, edges = graph()
    out: dict[str, set[str]] = {m: set() for m in modules}
    for a, b, _, _ in edges:
        out[a].add(b)
    return out


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


def test_reachable_follows_lazy_imports():
    graph = import_graph()
    # facetlake run imports the lm-eval runs inside the command function: still an edge
    assert "pipelines.runs.lm_eval_run" in graph["pipelines.cli.run"]
    assert reachable({"a": {"b"}, "b": {"c"}, "c": set()}, "a") == {"b", "c"}


def test_backends_are_listed_by_name_not_registered_by_import():
    graph = import_graph()
    builtins = {"resources.backends.hf", "resources.backends.api", "resources.backends.vllm", "resources.backends.heuristic",
                "resources.lm_eval.bridge"}
    assert not builtins & reachable(graph, "resources.backends")  # no bottom-of-file imports, so no cycle
    for module in builtins:
        assert "BACKENDS[" not in (ROOT / Path(*module.split("."))).with_suffix(".py").read_text(), module


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
