"""The dataset registry on the shipped real data, generic files and bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from resources.datasets import DATASETS, DatasetError, content_hash, make_dataset


@pytest.mark.parametrize(
    "kind,n,first_id",
    [("sfres", 1181, "0"), ("qags", 235, "0"), ("selfaware", 3369, "1"), ("halueval", 4507, "1")],
)
def test_builtin_datasets_load_the_real_files(kind, n, first_id):
    samples = make_dataset({"kind": kind}).load()
    assert len(samples) == n
    assert samples[0].sample_id == first_id


def test_sfres_row_normalisation_keeps_output_reference_and_ratings():
    s = make_dataset({"kind": "sfres", "limit": 1}).load()[0]
    assert s.input == "confirm(area=dont_care)"
    assert s.references == ("Please confirm that you do not care what area the restaurant is located .",)
    assert s.metadata["system_output"] == "Do you not to restaurant restaurants that are ?"
    assert s.ratings == {"informativeness": 1.0, "naturalness": 1.0, "overall": 1.0}


def test_qags_ratings_given_as_python_repr_are_parsed():
    s = make_dataset({"kind": "qags", "limit": 1}).load()[0]
    assert s.ratings == {"consistency": 1.0}
    assert s.context and s.context[0].startswith("Vitamin and mineral supplements")


def test_selfaware_unanswerable_has_no_references():
    samples = make_dataset({"kind": "selfaware"}).load()
    unanswerable = [s for s in samples if not s.metadata["answerable"]]
    assert len(unanswerable) == 1032
    assert all(s.references == () for s in unanswerable)


def test_halueval_general_labels_and_empty_upstream_id():
    samples = make_dataset({"kind": "halueval"}).load()
    assert sum(s.ratings["hallucination"] for s in samples) == 815  # "yes" labels upstream
    assert samples[1974].sample_id == "row1975"  # the upstream row with an empty ID


def test_halueval_qa_format(tmp_path):
    path = tmp_path / "qa.json"
    path.write_text(
        json.dumps({"knowledge": "Paris is the capital of France.", "question": "Capital of France?",
                    "right_answer": "Paris", "hallucinated_answer": "Lyon"}) + "\n"
    )
    s = make_dataset({"kind": "halueval", "path": str(path)}).load()[0]
    assert s.references == ("Paris",) and s.context == ("Paris is the capital of France.",)
    assert s.metadata["hallucinated_answer"] == "Lyon"


def test_squad_v2_local_file(tmp_path):
    squad = {"data": [{"title": "T", "paragraphs": [{"context": "Denver won.", "qas": [
        {"id": "q1", "question": "Who won?", "answers": [{"text": "Denver", "answer_start": 0}]},
        {"id": "q2", "question": "Who lost?", "answers": [], "is_impossible": True},
    ]}]}]}
    path = tmp_path / "dev-v2.0.json"
    path.write_text(json.dumps(squad))
    samples = make_dataset({"kind": "squad_v2", "path": str(path)}).load()
    assert [s.references for s in samples] == [("Denver",), ("",)]


def test_generic_files_with_column_mapping_hash_identically(tmp_path):
    rows = [{"qid": "a", "question": "2+2?", "gold": "4", "score": 3}, {"qid": "b", "question": "3+3?", "gold": "6", "score": 5}]
    mapping = {"sample_id": "qid", "input": "question", "references": "gold", "ratings": ["score"]}
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "d.csv").write_text("qid,question,gold,score\na,2+2?,4,3\nb,3+3?,6,5\n")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    hashes = set()
    for suffix in ("jsonl", "csv", "parquet"):
        samples = make_dataset({"kind": "file", "path": str(tmp_path / f"d.{suffix}"), "mapping": mapping, "name": suffix}).load()
        assert [s.references for s in samples] == [("4",), ("6",)]
        assert samples[1].ratings == {"score": 5.0}
        hashes.add(content_hash(samples))
    assert len(hashes) == 1  # content, not name or format, defines the hash


def test_missing_column_names_the_column_and_the_columns_found(tmp_path):
    (tmp_path / "d.csv").write_text("id,prompt\n1,hello\n")
    with pytest.raises(DatasetError) as exc:
        make_dataset({"kind": "file", "path": str(tmp_path / "d.csv"), "mapping": {"input": "question"}}).load()
    message = str(exc.value)
    assert "'question' not found" in message and "id, prompt" in message


def test_invalid_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": "ok"}\n{"input": "broken"\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:2: not valid JSON"):
        make_dataset({"kind": "file", "path": str(path)}).load()
    path = tmp_path / "bad.json"
    path.write_text('[{"input": "ok"},\n {"input": }]')
    with pytest.raises(DatasetError, match=r"bad\.json:2: not valid JSON"):
        make_dataset({"kind": "file", "path": str(path)}).load()


def test_invalid_csv_names_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("input,gold\nfine,1\ntoo,many,cells\n")
    with pytest.raises(DatasetError, match=r"bad\.csv:3:"):
        make_dataset({"kind": "file", "path": str(path), "mapping": {"references": "gold"}}).load()


def test_unknown_kind_lists_known_kinds():
    with pytest.raises(DatasetError, match=r"unknown dataset kind .nope. \(known: .*sfres"):
        make_dataset({"kind": "nope"})
    assert {"sfres", "qags", "selfaware", "halueval", "squad_v2", "file"} <= set(DATASETS)


def test_content_hash_changes_with_content():
    a = make_dataset({"kind": "sfres", "limit": 10}).load()
    b = make_dataset({"kind": "sfres", "limit": 11}).load()
    assert content_hash(a) != content_hash(b)
    assert len(content_hash(a)) == 64
