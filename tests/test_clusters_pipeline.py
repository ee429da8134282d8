"""A declared ``cluster:`` reaches the verdict (issue 28), end to end: a spec over real
SF-RES rows with two system outputs per meaning representation, clustered by it, runs
through Dagster; the stored comparisons use the clustered test, report clusters, ICC and
design effect, and the cluster-robust error equals the one computed from the stored scores."""

from __future__ import annotations

import json
from collections import defaultdict

import polars as pl
import pytest

from metric_ops import stats
from tests.conftest import DATA_DIR


def _grouped_rows(n_sources: int = 25):
    by_source = defaultdict(list)
    for d in json.loads((DATA_DIR / "unieval" / "sfres.json").read_text()):
        by_source[d["source"]].append(d)
    pairs = [rows for rows in by_source.values() if len(rows) == 2][:n_sources]
    return [(f"mr{j:02d}", d) for j, rows in enumerate(pairs) for d in rows]


def test_declared_cluster_drives_the_stored_comparison(tmp_path, instance):
    from pipelines.runs.runner import run_evaluation
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore

    rows = _grouped_rows()
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"id": f"r{i:03d}", "input": d["source"], "reference": d["reference"], "mr": mr}) + "\n"
        for i, (mr, d) in enumerate(rows)))
    v1 = {f"r{i:03d}": d["system_output"] for i, (_, d) in enumerate(rows)}
    # v2 answers whole meaning representations with their reference (every fifth one): gains come in clusters
    v2 = {f"r{i:03d}": (d["reference"] if int(mr[2:]) % 5 == 0 else d["system_output"]) for i, (mr, d) in enumerate(rows)}
    for name, outputs in (("v1", v1), ("v2", v2)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"sample_id": k, "output": v}) + "\n" for k, v in outputs.items()))
    spec = EvaluationSpec.from_mapping({
        "name": "sfres-clustered",
        "dataset": {"kind": "file", "path": str(tmp_path / "data.jsonl"), "mapping": {"references": "reference"}},
        "models": {"v1": f"precomputed:{tmp_path / 'v1.jsonl'}", "v2": f"precomputed:{tmp_path / 'v2.jsonl'}"},
        "metrics": ["token_f1"], "baseline": "v1", "cluster": "mr",
    })
    assert spec.to_mapping()["cluster"] == "mr"
    lake = LakeStore(root=str(tmp_path / "lake"))
    resolved = run_evaluation(spec, lake, instance)
    comp = lake.read("comparisons", where={"fingerprint": resolved.fingerprint})
    pw = comp.filter((pl.col("kind") == "pairwise") & (pl.col("metric") == "token_f1")).row(0, named=True)
    detail = json.loads(pw["detail"])
    assert pw["test"] == "clustered-permutation" and detail["n_clusters"] == 25
    scores = lake.read("scores", where={"fingerprint": resolved.fingerprint}).filter(pl.col("metric") == "token_f1")
    wide = scores.pivot(on="model", index="sample_id", values="value").sort("sample_id")
    labels = [dict((f"r{i:03d}", mr) for i, (mr, _) in enumerate(rows))[s] for s in wide["sample_id"]]
    diff = (wide["v2"] - wide["v1"]).to_numpy()
    assert detail["se_cluster"] == pytest.approx(stats.cluster_robust_se(diff, labels), abs=1e-12)
    assert detail["design_effect"] == pytest.approx(1 + (2 - 1) * detail["icc"], abs=1e-12)
    assert detail["delta_ci_method"] == "cluster-bootstrap-percentile" and detail["mde"] > 0
    groups = {r["model"]: json.loads(r["detail"])["tie_group"] for r in comp.filter(pl.col("kind") == "model_metric").iter_rows(named=True)}
    assert set(groups) == {"v1", "v2"} and min(groups.values()) == 1


@pytest.mark.parametrize("bad", ["", "  ", 3, ["mr"]])
def test_a_cluster_that_names_no_field_is_refused(bad):
    from resources.catalog.spec import EvaluationSpec, SpecError

    with pytest.raises(SpecError, match="cluster must name one sample field"):
        EvaluationSpec.from_mapping({"name": "x", "dataset": {"kind": "sfres"}, "models": {"m": "precomputed:column=system_output"},
                                     "metrics": ["token_f1"], "cluster": bad})


def test_squad_v2_declares_its_passage_as_default_cluster():
    from resources.datasets import default_cluster

    assert default_cluster("squad_v2") == "context" and default_cluster("sfres") is None and default_cluster("nope") is None
