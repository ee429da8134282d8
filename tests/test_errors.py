"""One FacetlakeError base (issue 19): every exception class facetlake defines derives from
it and keeps its standard base, so ``except ValueError`` callers keep working."""

from __future__ import annotations

import importlib

import pytest

from metric_ops.errors import FacetlakeError
from tests.test_layout import project_modules

NOT_YET: set[str] = set()  # every exception class is on the base now

OWNED = [
    ("metric_ops.stats", "StatsError", ValueError), ("metric_ops.agents.oracles", "TrajectoryError", ValueError),
    ("metric_ops.scoring.corpus", "CorpusStatisticsError", ValueError), ("metric_ops.lexical.meteor", "WordNetMissingError", RuntimeError),
    ("metric_ops.registry", "MetricParamError", ValueError), ("metric_ops.registry", "UnknownMetricError", KeyError),
    ("resources.prompting.adapters", "AdapterError", ValueError), ("resources.prompting.annotators", "AnnotatorError", ValueError),
    ("resources.catalog", "CatalogError", LookupError), ("resources.catalog", "CatalogCollisionError", ValueError),
    ("resources.catalog", "HistoryPartitionError", LookupError), ("resources.catalog.spec", "SpecError", ValueError),
    ("resources.agents.environments", "EnvironmentLoadError", RuntimeError), ("resources.privacy.keys", "MissingKeyError", RuntimeError),
    ("resources.lm_eval.bridge", "LmEvalError", ValueError), ("resources.lm_eval.models", "LmEvalPrivacyError", ValueError),
    ("resources.scoring.metric_inputs", "MetricInputError", ValueError), ("resources.catalog.migrations", "MigrationError", RuntimeError),
    ("resources.catalog.profiles", "ProfileError", ValueError), ("resources.sql", "SQLRefusedError", ValueError),
    ("resources.sql", "SQLLimitError", RuntimeError), ("pipelines.runs.launch", "LaunchError", RuntimeError),
    ("pipelines.report.lineage", "LineageError", LookupError),
]


@pytest.mark.parametrize(("module", "name", "base"), OWNED, ids=[f"{m}.{n}" for m, n, _ in OWNED])
def test_exception_is_a_facetlake_error_and_keeps_its_base(module, name, base):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, FacetlakeError) and issubclass(cls, base)
    with pytest.raises(base):
        raise cls("x")


def _exception_classes() -> list[str]:
    import ast

    found = []
    for module, path in project_modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any("Error" in ast.unparse(b) or "Exception" in ast.unparse(b) for b in node.bases):
                found.append(f"{module}.{node.name}")
    return found


def test_no_new_exception_outside_the_base():
    """Strict: every exception class defined from now on derives from FacetlakeError."""
    missing = []
    for qualified in _exception_classes():
        module, name = qualified.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        if not issubclass(cls, FacetlakeError) and qualified not in NOT_YET:
            missing.append(qualified)
    assert missing == []


def test_every_exception_is_a_facetlake_error():
    missing = [q for q in _exception_classes()
               if not issubclass(getattr(importlib.import_module(q.rsplit(".", 1)[0]), q.rsplit(".", 1)[1]), FacetlakeError)]
    assert missing == []
