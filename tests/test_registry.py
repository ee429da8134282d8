"""The one plugin registry (metric_ops.plugins.Registry): base-class check, aliases,
"did you mean", built-ins listed lazily; and CONTRIBUTING.md's worked examples."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metric_ops.errors import FacetlakeError
from metric_ops.registry import REGISTRY, UnknownMetricError, get_metric
from metric_ops.plugins import Registry, RegistryError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]


class Base:
    pass


class Child(Base):
    pass


def test_unknown_name_says_did_you_mean():
    reg: Registry[type] = Registry("widget", base=Base)
    reg.register("sprocket", Child)
    with pytest.raises(UnknownNameError) as err:
        reg.get_entry("sprockett")
    assert str(err.value) == "unknown widget 'sprockett'; did you mean sprocket? (known: sprocket)"
    assert isinstance(err.value, KeyError) and isinstance(err.value, FacetlakeError)


def test_unknown_metric_says_did_you_mean_and_stays_a_key_error():
    with pytest.raises(UnknownMetricError, match=r"unknown metric 'bleuu'; did you mean bleu\b") as err:
        get_metric("bleuu")
    assert isinstance(err.value, KeyError)


def test_alias_resolves_to_the_canonical_entry():
    reg: Registry[type] = Registry("widget", base=Base)
    reg.register("sprocket", Child, aliases=("cog", "gear"))
    assert reg.resolve("gear") == "sprocket" and reg["cog"] is Child and reg["SPROCKET"] is Child
    assert "gear" in reg and "chain" not in reg
    assert REGISTRY.resolve("em") == "exact_match" and REGISTRY.get_class("rouge-l").name == "rouge_l"


def test_a_class_that_is_not_a_subclass_of_the_base_is_refused():
    reg: Registry[type] = Registry("widget", base=Base)
    with pytest.raises(RegistryError, match=r"widget 'stray'.*not a subclass of .*Base"):
        reg.register("stray", dict)
    assert "stray" not in reg
    with pytest.raises(RegistryError, match="not a subclass of metric_ops.base.Metric"):
        REGISTRY.register("not_a_metric", int)


def test_register_works_as_a_decorator_and_by_item_assignment():
    reg: Registry[type] = Registry("widget", base=Base)

    @reg.register("deco")
    class Deco(Base):
        pass

    reg["plain"] = Child
    assert reg.items() == [("deco", Deco), ("plain", Child)]
    reg.register("aliased", Child, aliases=("al",))
    assert reg.pop("aliased") is Child and "al" not in reg and reg.pop("gone", None) is None


def test_lazy_entries_are_listed_without_importing_and_imported_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "lazy_widget_mod.py").write_text("class Lazy(LookupError):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[type] = Registry("widget", base=LookupError, builtins={"lazy": "lazy_widget_mod:Lazy"})
    assert reg.names() == ["lazy"] and not reg.is_loaded("lazy") and "lazy_widget_mod" not in sys.modules
    cls = reg["lazy"]
    assert cls.__name__ == "Lazy" and "lazy_widget_mod" in sys.modules and reg.is_loaded("lazy")
    sys.modules.pop("lazy_widget_mod")


def test_a_lazy_entry_of_the_wrong_type_is_refused_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "lazy_wrong_mod.py").write_text("class NotAWidget:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[type] = Registry("widget", base=Base, builtins={"wrong": "lazy_wrong_mod:NotAWidget"})
    with pytest.raises(RegistryError):
        reg["wrong"]
    sys.modules.pop("lazy_wrong_mod", None)


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def test_listing_imports_no_plugin_module():
    """Names come from the tables: no metric family, dataset or backend module is imported."""
    out = _run("""
        import json, sys
        from metric_ops.registry import REGISTRY
        from resources.datasets import DATASETS
        names = REGISTRY.names(), DATASETS.names()
        families = {'metric_ops.lexical.squad', 'metric_ops.lexical.bleu', 'metric_ops.lexical.rouge', 'metric_ops.toolcalls', 'metric_ops.judged.geval_jury',
                    'metric_ops.neural.bertscore', 'metric_ops.agents.oracles', 'metric_ops.rag.checks', 'resources.datasets.bfcl',
                    'resources.agents.episodes', 'resources.lm_eval.bridge'}
        print(json.dumps([names[0], names[1], sorted(families & set(sys.modules))]))
    """)
    metrics, datasets, loaded = json.loads(out)
    assert {"bleu", "rouge_l", "tool_calls", "g_eval", "bertscore"} <= set(metrics)
    assert {"bfcl", "episodes", "lm_eval", "sfres", "file"} <= set(datasets)
    assert loaded == []


def test_the_builtin_table_names_every_builtin_metric_where_it_is_defined():
    """BUILTIN_METRICS matches the classes: each entry imports to a Metric of that name."""
    from metric_ops.registry import BUILTIN_METRICS
    from metric_ops.plugins import _load

    for name, target in BUILTIN_METRICS.items():
        assert _load(target).name == name, target


# ---------------------------------------------------------------------------- CONTRIBUTING.md
def _examples() -> dict[str, tuple[str, str]]:
    """``{kind: (module code, registry line)}`` from CONTRIBUTING.md's fenced blocks."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    out = {}
    for i, block in enumerate(blocks):
        match = re.match(r"# example: (\w+)\n", block)
        if match:
            out[match.group(1)] = (block, blocks[i + 1].strip())
    return out


def test_contributing_examples(tmp_path):
    """Each worked example, written to a temporary package and registered with its table
    line's target, works through the registry (in a fresh interpreter)."""
    examples = _examples()
    assert set(examples) == {"metric", "dataset", "adapter", "backend"}
    pkg = tmp_path / "contrib_examples"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    targets = {}
    for kind, (code, line) in examples.items():
        (pkg / f"{kind}.py").write_text(code)
        name, target = re.search(r'"(\w+)",? *:? *"([\w.]+:\w+)"', line).groups()
        targets[kind] = (name, "contrib_examples." + kind + ":" + target.split(":")[1])
    rows = tmp_path / "qa.jsonl"
    rows.write_text('{"id": 1, "question": "What is two plus two?", "answer": "four"}\n')
    out = _run(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from metric_ops.base import Sample
        from metric_ops.registry import REGISTRY, get_metric
        from metric_ops.plugins import Registry
        from resources.prompting.adapters import ADAPTERS, make_adapter
        from resources.datasets import DATASETS, make_dataset
        t = {targets!r}
        REGISTRY.register_lazy(t["metric"][0], t["metric"][1])      # the BUILTIN_METRICS line
        DATASETS.register_lazy(t["dataset"][0], t["dataset"][1])    # the DATASETS builtins line
        ADAPTERS.register_lazy(t["adapter"][0], t["adapter"][1])    # the ADAPTERS line
        backends = Registry("backend kind", base="resources.backends:ModelBackend")
        backends.register_lazy(t["backend"][0], t["backend"][1])   # the backend table line
        assert "contrib_examples.metric" not in sys.modules         # listed, not imported
        samples = make_dataset({{"kind": "qa_pairs", "path": {str(rows)!r}}}).load()
        request = make_adapter({{"kind": "question"}}, samples).request(samples[0])
        backend = backends["echo"]("echo:smoke")
        result = next(iter(backend.generate([request], {{}})))
        scores = get_metric("len_ratio").score_batch(samples + [Sample("2", "q")], ["four", "x"])
        print(json.dumps({{"prompt": request.prompt, "output": result.output, "identity": backend.identity(),
                          "ratio": scores[0]["length_ratio"].value, "unscored": scores[1]["length_ratio"].status,
                          "listed": "length_ratio" in REGISTRY.names()}}))
    """)
    got = json.loads(out)
    assert got == {"prompt": "Question: What is two plus two?\nAnswer:", "output": "Question: What is two plus two?\nAnswer:",
                   "identity": {"backend": "echo", "name": "smoke"}, "ratio": 1.0, "unscored": "unscored", "listed": True}


def test_every_metric_defined_in_metric_ops_is_in_the_builtin_table():
    """A metric class defined in a metric_ops module but missing from BUILTIN_METRICS would
    be unknown until something imported its module: import them all and compare."""
    out = _run("""
        import importlib, json, pkgutil
        import metric_ops
        from metric_ops.registry import BUILTIN_METRICS, REGISTRY
        for info in pkgutil.walk_packages(metric_ops.__path__, "metric_ops."):  # every module of every family
            importlib.import_module(info.name)
        defined = {cls.name: f"{cls.__module__}:{cls.__qualname__}" for cls in map(REGISTRY.registered, REGISTRY.names())
                   if cls is not None and cls.__module__.startswith("metric_ops.")}
        print(json.dumps(sorted(set(defined) - set(BUILTIN_METRICS))))
    """)
    assert json.loads(out) == []


# ---------------------------------------------------------------------------- one way to register (issue 27)
def test_flags_on_the_class_replace_side_lists():
    """Oracles, live backends and plugin kinds are declared on their classes."""
    from resources.backends import BACKENDS

    assert REGISTRY.oracles() == ["action_oracle", "episode_reward", "outputs_oracle", "policy_oracle"]
    assert {kind for kind in ("hf", "vllm", "api", "precomputed", "heuristic", "lm_eval") if BACKENDS[kind].live} == {"hf", "vllm", "api"}


def test_a_plugin_registers_itself_and_checks_its_keys():
    from resources.prompting.adapters import ADAPTERS, Adapter, AdapterError
    from resources.prompting.annotators import ANNOTATORS, Annotator

    class Echo(Adapter):
        kind = "echo_test"
        allowed = frozenset({"suffix"})

    try:
        assert ADAPTERS["echo_test"] is Echo and "echo_test" not in ANNOTATORS
        assert Echo.unknown_keys({"kind": "echo_test", "template": "{input}", "suffix": "!", "sufix": "?"}) == ["sufix"]
        with pytest.raises(AdapterError, match=r"unknown keys \['sufix'\]; allowed: \['suffix', 'template', 'version'\]"):
            Echo({"kind": "echo_test", "sufix": "?"})
    finally:
        ADAPTERS.pop("echo_test")
    assert Annotator.base_keys == {"name", "kind", "source"}


def test_a_taken_name_is_refused_when_unique():
    from metric_ops.plugins import Registry, RegistryError

    registry: Registry[type] = Registry("thing")

    class A:
        pass

    class B:
        pass

    registry.register("a", A, unique=True)
    registry.register("a", A, unique=True)  # the same class again (a module reloaded): fine
    with pytest.raises(RegistryError, match="thing name 'a' is already registered by .*A; choose another name"):
        registry.register("a", B, unique=True)
    assert registry.registered("a") is A and registry.registered("b") is None


def test_a_metric_request_is_resolved_once_and_crosses_dagster_typed(monkeypatch):
    """``--metric``/``--param`` become one typed request per metric (issue 27): aliases to
    canonical names (each once), KEY=VALUE for all, METRIC.KEY=VALUE for one, YAML types."""
    from assets.scores import ScoresConfig
    from metric_ops.registry import MetricRequest, metric_requests
    from pipelines.runs.runner import scores_run_config

    requests = metric_requests(["rougeL", "chrf", "ROUGE-L"], ["chrf.char_order=4", "n=5"])
    assert requests == [MetricRequest("rouge_l", {"n": 5}), MetricRequest("chrf", {"n": 5, "char_order": 4})]
    with pytest.raises(ValueError, match="--param names bleu, which is not among the metrics being scored"):
        metric_requests(["chrf"], ["bleu.tokenize=13a"])
    config = ScoresConfig(**scores_run_config(requests)["ops"]["scores"]["config"])
    assert [(m.name, m.params) for m in config.metrics] == [("rouge_l", {"n": 5}), ("chrf", {"n": 5, "char_order": 4})]
    assert scores_run_config(["chrf"])["ops"]["scores"]["config"]["metrics"] == [{"name": "chrf", "params": {}}]
    # parsed once per command, however many partitions and metrics it scores
    import metric_ops.registry as registry

    calls = []
    original = registry.parse_param_overrides
    monkeypatch.setattr(registry, "parse_param_overrides", lambda items: calls.append(items) or original(items))
    metric_requests(["chrf", "bleu"], ["chrf.char_order=4"])
    assert len(calls) == 1
