"""The structured metric identity (``scores.params``) and the one signature parser
(metric_ops/identity.py): the parser inverts every registered metric's signature, with
default and non-default parameters; score rows carry the column; an older scores table
without it keeps working (read filled, appended and replaced through the product)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from metric_ops.base import Sample
from metric_ops.identity import (
    SignatureParseError,
    identity_json,
    metric_identity,
    metric_params_json,
    parse_signature,
    signature_params_json,
)
from metric_ops.judged.replies import JudgeReply
from metric_ops.registry import REGISTRY, get_metric


class _Judge:
    """A judge double: a fixed identity, never called here."""

    def __init__(self, identity: str = "scripted:judge") -> None:
        self.identity = identity
        self.locality = "local"

    def complete(self, messages, *, purpose, sample_id=None, **decoding):  # pragma: no cover - not called
        return JudgeReply('{"reasoning": "r", "score": 3}')


# parameters without which a metric cannot be built (a judge), per registry name
_REQUIRED = {
    "answer_relevance": lambda: {"judge": _Judge()},
    "context_relevance": lambda: {"judge": _Judge()},
    "faithfulness": lambda: {"judge": _Judge()},
    "g_eval": lambda: {"judge": _Judge()},
    "jury": lambda: {"judges": [_Judge("j:one"), _Judge("j:two")]},
}

# non-default parameters: (registry name, parameters)
_NON_DEFAULT = [
    ("bleu", {"tokenize": "intl", "lowercase": True}),
    ("bleu", {"tokenize": "char", "smooth_method": "floor"}),
    ("corpus_bleu", {"tokenize": "zh", "lowercase": "yes"}),
    ("chrf", {"char_order": 4, "beta": 3, "whitespace": True}),
    ("corpus_chrf_pp", {"lowercase": True}),
    ("nltk_bleu", {"max_order": 2, "smoothing": 4}),
    ("rouge_1", {"use_stemmer": True}),
    ("rouge_l", {"use_stemmer": "true"}),
    ("rouge_lsum", {"use_stemmer": True}),
    ("rouge_w", {"weight": 1.5}),
    ("rouge_s", {"max_skip": 2}),
    ("meteor", {"alpha": 0.8, "gamma": 0.4, "tokenizer": "whitespace"}),
    ("bertscore", {"idf": True}),
    ("bertscore", {"baseline": [0.8, 0.8, 0.8], "num_layers": 4}),
    ("g_eval", {"judge": _Judge("api:m@http://x"), "criteria": ["fluency", "coherence"], "scale": [1, 10]}),
    ("g_eval", {"judge": _Judge(), "criteria": [{"name": "coverage", "description": "Does the answer cover every point "
                                                 "the question asks about, in the order asked?"}]}),
    ("jury", {"judges": [_Judge("j:a"), _Judge("j:b"), _Judge("j:c")], "consensus": "mean", "weights": [1, 2, 1]}),
    ("faithfulness", {"judge": _Judge(), "knowledge": "judge", "max_attempts": 3, "temperature": 0.5}),
]


def _accepted(name: str, params: dict) -> dict:
    """``params`` limited to what the metric takes (a listed variant may not exist in every version)."""
    import inspect

    cls = REGISTRY.get_class(name)
    sig = inspect.signature(cls.__init__)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return params
    return {k: v for k, v in params.items() if k in sig.parameters}


@pytest.mark.parametrize("name", REGISTRY.names())
def test_parser_inverts_every_registered_metric_with_default_params(name):
    metric = get_metric(name, **_REQUIRED.get(name, dict)())
    identity = metric_identity(metric)
    assert identity["metric"] == name and identity["version"] == str(type(metric).version)
    assert parse_signature(metric.signature()) == identity
    assert json.loads(metric_params_json(metric)) == identity  # JSON-serialisable as stored


@pytest.mark.parametrize("name,params", _NON_DEFAULT, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_NON_DEFAULT)])
def test_parser_inverts_signatures_with_non_default_params(name, params):
    params = _accepted(name, params)
    default = get_metric(name, **_REQUIRED.get(name, dict)())
    metric = get_metric(name, **params)
    identity = metric_identity(metric)
    assert parse_signature(metric.signature()) == identity
    changed = {k for k in params if k not in ("judge", "judges")}
    if changed and metric.signature() != default.signature():  # a setting that changes the number shows in params
        assert identity["params"] != metric_identity(default)["params"]


def test_sacrebleu_own_signature_is_not_read_as_parameters():
    metric = get_metric("bleu", tokenize="intl")
    assert "|case:" in metric.signature()  # sacrebleu's signature, nested after ours
    params = parse_signature(metric.signature())["params"]
    assert params == {"lowercase": "no", "smooth_method": "exp", "tokenize": "intl"}
    assert "case" not in params and "sacrebleu" not in params


def test_judged_identity_keeps_judge_out_of_params_and_jury_lists_its_judges():
    jury = get_metric("jury", judges=[_Judge("j:a"), _Judge("j:b")])
    assert jury.signature().split("|")[2] == "judges:j:a,j:b"
    parsed = parse_signature(jury.signature())
    assert parsed["metric"] == "jury" and "judges" not in parsed["params"] and "judge" not in parsed["params"]
    assert parsed["params"]["consensus"] == jury.param_fields()["consensus"]


def test_unregistered_names_keep_every_field_as_a_parameter():
    from resources.lm_eval.common import score_identity, score_signature

    assert parse_signature("human:overall|source:dataset") == {"metric": "human:overall", "version": None,
                                                               "params": {"source": "dataset"}}
    args = ("exact_match", "strict-match", "gsm8k", "3.0", "0.4.13", "ab" * 32, "mean", 5)
    assert parse_signature(score_signature(*args)) == score_identity(*args)
    assert parse_signature("retired_metric|v:3|k:x") == {"metric": "retired_metric", "version": "3", "params": {"k": "x"}}


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_an_empty_signature_is_refused_naming_the_fix(bad):
    with pytest.raises(SignatureParseError, match="facetlake score --force"):
        parse_signature(bad)


def test_score_rows_and_frames_carry_the_identity():
    from metric_ops.scoring.rows import frame_of_rows, human_rating_rows
    from metric_ops.scoring.frame import score_frame, score_rows

    samples = [Sample("1", "q", ("the cat sat",), ratings={"overall": 4.0}), Sample("2", "q", ("a dog",))]
    metric = get_metric("rouge_1", use_stemmer=True)
    expected = metric_params_json(metric)
    assert {r["params"] for r in score_rows(metric, samples, ["the cat", "dog"])} == {expected}
    frame = score_frame(metric, samples, ["the cat", "dog"])
    assert frame["params"].unique().to_list() == [expected] and frame.height == 6  # f, p, r per sample
    corpus = score_rows(get_metric("corpus_bleu"), samples, ["the cat sat", "a dog"])
    assert {json.loads(r["params"])["metric"] for r in corpus} == {"corpus_bleu"}
    human = human_rating_rows(samples)
    assert [json.loads(r["params"]) for r in human] == [parse_signature(r["signature"]) for r in human]
    # a row from an older producer, without params, gets them from its signature
    legacy = {k: v for k, v in score_rows(metric, samples[:1], ["the cat"])[0].items() if k != "params"}
    assert frame_of_rows([legacy])["params"].to_list() == [signature_params_json(legacy["signature"])] == [expected]


# ------------------------------------------------------------------ older lakes

_OLD_SCORES = pa.schema([(n, t) for n, t in [
    ("model", pa.string()), ("fingerprint", pa.string()), ("dataset", pa.string()), ("sample_id", pa.string()),
    ("metric", pa.string()), ("value", pa.float64()), ("direction", pa.string()), ("dimension", pa.string()),
    ("locality", pa.string()), ("status", pa.string()), ("detail", pa.string()), ("signature", pa.string()),
    ("run_id", pa.string()), ("created_at", pa.timestamp("us", tz="UTC"))]])
FP = "ab" * 32


def _rows(metric, model: str, ids, run: str) -> list[dict]:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return [{"model": model, "fingerprint": FP, "dataset": "d", "sample_id": i, "metric": metric.name, "value": 0.5,
             "direction": "maximize", "dimension": "baseline_grounding", "locality": "local", "status": "scored",
             "detail": "{}", "signature": metric.signature(), "run_id": run, "created_at": now} for i in ids]


@pytest.fixture
def old_lake(tmp_path):
    """A lake whose scores table was written, with deltalake directly, before the params column."""
    from deltalake import write_deltalake

    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    old = pa.Table.from_pylist(_rows(get_metric("bleu", tokenize="intl"), "m1", ["1", "2"], "old-run"), schema=_OLD_SCORES)
    write_deltalake(lake.uri("scores"), old, partition_by=["fingerprint", "model"])
    assert "params" not in lake.delta("scores").schema().to_arrow().names
    return lake


def test_an_old_scores_table_reads_with_params_from_the_signature(old_lake):
    expected = metric_params_json(get_metric("bleu", tokenize="intl"))
    assert old_lake.read("scores")["params"].to_list() == [expected, expected]
    assert old_lake.read("scores", columns=["metric", "params"]).columns == ["metric", "params"]
    assert old_lake.read("scores", where={"model": "m1"}, columns=["params"])["params"].to_list() == [expected] * 2
    assert "params" not in old_lake.read("scores", columns=["metric"]).columns
    assert "params" not in old_lake.delta("scores").schema().to_arrow().names  # reading changes nothing


def test_appending_and_replacing_on_an_old_table_adds_the_column(old_lake):
    from pipelines.runs.runner import scoring_outcome

    rouge = get_metric("rouge_l", use_stemmer=True)
    new = [{**r, "params": metric_params_json(rouge)} for r in _rows(rouge, "m1", ["1", "2", "3"], "new-run")]
    version_before = old_lake.version("scores")
    old_lake.append("scores", new)
    assert "params" in old_lake.delta("scores").schema().to_arrow().names
    stored = old_lake.read("scores").sort("metric", "sample_id")
    assert stored.height == 5 and old_lake.version("scores") > version_before
    by_metric = {r["metric"]: json.loads(r["params"]) for r in stored.iter_rows(named=True)}
    assert by_metric["bleu"] == metric_identity(get_metric("bleu", tokenize="intl"))  # old rows: from the signature
    assert by_metric["rouge_l"] == metric_identity(rouge)
    # a partition replace on the evolved table, with rows that bring no params (an older caller)
    old_lake.replace("scores", _rows(get_metric("bleu"), "m1", ["1"], "again"), {"fingerprint": FP, "model": "m1", "metric": "bleu"})
    bleu = old_lake.read("scores", where={"metric": "bleu"})
    assert bleu.height == 1 and json.loads(bleu["params"][0]) == metric_identity(get_metric("bleu"))
    raw = old_lake.delta("scores").to_pyarrow_table().to_pylist()
    assert all(r["params"] for r in raw if r["run_id"] in ("new-run", "again"))  # written, not only filled on read
    outcome = scoring_outcome(old_lake, [{"model": "m1", "fingerprint": FP, "scored": ["rouge_l", "bleu"]}])
    assert {(r["metric"], r["scored"]) for r in outcome.iter_rows(named=True)} == {("rouge_l", 3), ("bleu", 1)}


def test_identity_json_is_compact_and_sorted():
    assert identity_json({"params": {"b": "1", "a": "2"}, "metric": "x", "version": "1"}) == \
        '{"metric":"x","params":{"a":"2","b":"1"},"version":"1"}'


@pytest.mark.parametrize("name", ["exact_match", "bleu", "meteor"])
def test_a_metric_scoring_an_annotation_keeps_it_in_its_identity(name):
    from resources.scoring.metric_inputs import build_metric

    metric, annotation = build_metric(name, {"use_annotation": "answer"})
    assert annotation == "answer" and metric.signature().endswith("|annotation:answer")
    identity = metric_identity(metric)
    assert identity["params"]["use_annotation"] == "answer"
    assert parse_signature(metric.signature()) == identity


def test_scoring_outcome_counts_statuses_and_shows_the_first_error_of_the_metric(old_lake):
    """`facetlake score`'s table: per (model, metric) the status counts and the first error
    message of that metric only (another metric's error in the same partition is not shown)."""
    from pipelines.runs.runner import scoring_outcome

    rouge = get_metric("rouge_l")
    rows = _rows(rouge, "m1", ["1", "2", "3"], "r")
    rows[1] = {**rows[1], "status": "error", "value": None, "detail": json.dumps({"error": "ValueError: boom"})}
    rows[2] = {**rows[2], "status": "unscored", "value": None, "detail": json.dumps({"reason": "no reference"})}
    other = {**_rows(get_metric("chrf"), "m1", ["1"], "r")[0], "status": "error", "value": None,
             "detail": json.dumps({"error": "not this one"})}
    old_lake.append("scores", [*rows, other])
    outcome = scoring_outcome(old_lake, [{"model": "m1", "fingerprint": FP, "scored": ["rouge_l", "bleu"]}]).sort("metric")
    assert outcome.select("metric", "scored", "error", "unscored", "first_error").rows() == [
        ("bleu", 2, 0, 0, ""), ("rouge_l", 1, 1, 1, "ValueError: boom")]


def test_catalog_tables_are_read_once_per_commit(tmp_path, monkeypatch):
    """issue 26, "Fixed cost of a run": a run read the ``evaluations`` table some 30 times
    between two commits; a local catalog table is now read once per commit (the stamp of
    its newest commit file), and a new commit is read again, so no reader sees a stale row."""
    from resources.catalog import evaluation_row, register_evaluation
    from resources.catalog import reads
    from resources.catalog.spec import resolve
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    lake = LakeStore(root=str(tmp_path / "lake"))
    first = resolve(small_spec(name="cached-a", limit=3))
    register_evaluation(lake, first)
    loads: list[str] = []
    original = LakeStore.read
    monkeypatch.setattr(LakeStore, "read", lambda self, table, *a, **k: loads.append(table) or original(self, table, *a, **k))
    for _ in range(5):
        assert evaluation_row(lake, "cached-a")["fingerprint"] == first.fingerprint
    assert loads.count("evaluations") <= 1
    stamp = lake.commit_stamp("evaluations")
    second = resolve(small_spec(name="cached-b", limit=4))
    register_evaluation(lake, second)  # a new commit: a new stamp, read again
    assert lake.commit_stamp("evaluations") != stamp
    assert evaluation_row(lake, "cached-b")["fingerprint"] == second.fingerprint
    assert LakeStore(root=str(tmp_path / "elsewhere")).commit_stamp("evaluations") is None  # no table, nothing cached
    assert len(reads._FRAMES) <= reads._FRAMES.size
