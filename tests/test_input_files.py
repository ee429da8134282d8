"""Bad input files (issue 16, items 1-4 and the --offline refusal): byte-order marks,
encodings, files without rows, CSV quoting and cell counts, for dataset files, precomputed
outputs and inbox files. Every refusal is one line naming the file and line, before any
Dagster run."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import warnings
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from resources.backends import BackendError, PrecomputedBackend
from resources.datasets import DatasetError, DatasetWarning, content_hash, make_dataset
from support.cli import run_main


def load(path: Path, **extra):
    return make_dataset({"kind": "file", "path": str(path), **extra}).load()


# ------------------------------------------------------------------ 1. byte-order marks
@pytest.mark.parametrize("name,data", [
    ("bom.csv", b"\xef\xbb\xbfid,input\ns1,caf\xc3\xa9\ns2,b\n"),
    ("bom.jsonl", b'\xef\xbb\xbf{"id": "s1", "input": "caf\xc3\xa9"}\n{"id": "s2", "input": "b"}\n'),
    ("bom.json", b'\xef\xbb\xbf[{"id": "s1", "input": "caf\xc3\xa9"}, {"id": "s2", "input": "b"}]'),
    ("utf16.csv", "id,input\ns1,café\ns2,b\n".encode("utf-16")),  # UTF-16 with its BOM
    ("utf16be.jsonl", b"\xfe\xff" + '{"id": "s1", "input": "café"}\n{"id": "s2", "input": "b"}\n'.encode("utf-16-be")),
    ("crlf-bom.csv", b"\xef\xbb\xbfid,input\r\ns1,caf\xc3\xa9\r\ns2,b\r\n"),
])
def test_byte_order_marks_are_dropped(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    samples = load(path)
    assert [(s.sample_id, s.input) for s in samples] == [("s1", "café"), ("s2", "b")]
    assert "\ufeff" not in json.dumps([s.metadata for s in samples])
    plain = tmp_path / ("plain" + path.suffix)
    plain.write_text(data.decode("utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"), encoding="utf-8")
    assert content_hash(load(plain)) == content_hash(samples)  # the mark never reaches the fingerprint
    # an explicit encoding: utf-8 drops a UTF-8 mark too
    if data.startswith(b"\xef\xbb\xbf"):
        assert load(path, encoding="utf-8")[0].sample_id == "s1"


# ------------------------------------------------------------------ 2. encodings
@pytest.mark.parametrize("name,data,line,column,fixed", [
    ("latin.csv", b"id,input\ns1,caf\xe9\n", 2, 7, "café"),
    ("latin.jsonl", b'{"id": "s1", "input": "ok"}\n{"id": "s2", "input": "na\xefve"}\n', 2, 26, "naïve"),
    ("latin.json", b'[\n {"id": "s1", "input": "\xc5ngstr\xf6m"}\n]', 2, 25, "Ångström"),
    ("cp1252.csv", b"id,input\ns1,ok\ns2,\x93quoted\x94\n", 3, 4, "\u201cquoted\u201d"),
])
def test_non_utf8_file_names_file_line_problem_and_fix(tmp_path, name, data, line, column, fixed):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DatasetError) as exc:
        load(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:{line}: not valid UTF-8: byte 0x")
    assert f"at column {column}" in message and "encoding: cp1252" in message and "\n" not in message
    # the fix works: the named encoding loads the file
    assert load(path, encoding="cp1252")[-1].input == fixed


def test_encoding_key_is_honoured_for_every_format_and_kind(tmp_path):
    rows = [{"id": "s1", "input": "Zürich"}, {"id": "s2", "input": "señor"}]
    (tmp_path / "d.csv").write_bytes("id,input\ns1,Zürich\ns2,señor\n".encode("latin-1"))
    (tmp_path / "d.jsonl").write_bytes("\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode("latin-1"))
    (tmp_path / "d.json").write_bytes(json.dumps(rows, ensure_ascii=False).encode("cp1252"))
    (tmp_path / "d16.csv").write_bytes("id,input\ns1,Zürich\ns2,señor\n".encode("utf-16-le"))  # no BOM: must be named
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    got = {name: [s.input for s in load(tmp_path / name, encoding=enc)]
           for name, enc in [("d.csv", "latin-1"), ("d.jsonl", "latin-1"), ("d.json", "cp1252"), ("d16.csv", "utf-16-le"),
                             ("d.parquet", None)]}
    assert all(v == ["Zürich", "señor"] for v in got.values()), got
    # a built-in kind (SelfAware's JSON) with an encoding
    selfaware = {"example": [{"question_id": 1, "question": "Où est Zürich ?", "answer": ["Suisse"], "answerable": True}]}
    (tmp_path / "sa.json").write_bytes(json.dumps(selfaware, ensure_ascii=False).encode("latin-1"))
    with pytest.raises(DatasetError, match="sa.json:1: not valid UTF-8"):
        make_dataset({"kind": "selfaware", "path": str(tmp_path / "sa.json")}).load()
    assert make_dataset({"kind": "selfaware", "path": str(tmp_path / "sa.json"), "encoding": "latin-1"}).load()[0].input == "Où est Zürich ?"
    with pytest.raises(DatasetError, match="unknown encoding 'klingon'"):
        load(tmp_path / "d.csv", encoding="klingon")


# ------------------------------------------------------------------ 3. no rows
@pytest.mark.parametrize("name,data,detail", [
    ("empty.csv", b"", "it is empty"),
    ("header.csv", b"id,input\n", "only a header: id, input"),
    ("header-bom.csv", b"\xef\xbb\xbfid,input\r\n\r\n", "only a header: id, input"),
    ("blank.jsonl", b"\n  \n", "it is empty"),
    ("empty.json", b"[]", "it is empty"),
    ("empty-rows.json", b'{"rows": []}', "it is empty"),
    ("whitespace.json", b"  \n", "it is empty"),
])
def test_file_without_rows_is_refused_in_one_line(tmp_path, name, data, detail):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DatasetError) as exc:
        load(path)
    assert str(exc.value) == f"{path}: the file has no rows ({detail}); add rows or point path: at the right file"


def test_empty_parquet_and_zero_limit_are_refused(tmp_path):
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "input": pa.array([], pa.string())}), tmp_path / "e.parquet")
    with pytest.raises(DatasetError, match="the file has no rows"):
        load(tmp_path / "e.parquet")
    (tmp_path / "ok.csv").write_text("id,input\ns1,a\n")
    with pytest.raises(DatasetError, match="limit: 0 selects no rows"):
        load(tmp_path / "ok.csv", limit=0)


# ------------------------------------------------------------------ 4. CSV quoting and row counts
@pytest.mark.parametrize("text,line,words", [
    ('id,input,reference\ns1,q,"unterminated\ns2,q,r\n', 2, "unexpected end of data"),  # the file
    ('id,input,reference\ns0,q,r\ns1,q,"unterminated\ns2,q,r\ns3,q,"closed"\n', 3, "expected after"),
    ('id,input,reference\ns1,"q"x,r\ns2,q,r\n', 2, "expected after"),
    ('id,input,reference\ns1,q,r\ns2,q\ns3,q,r\n', 3, "row has 2 cells but the header has 3 columns"),
    ('id,input,reference\ns1,q,r,extra\n', 2, "row has 4 cells"),
    ('id,input,input\ns1,q,r\n', 1, "repeats column(s) 'input'"),
    ('id,,reference\ns1,q,r\n', 1, "empty column name"),
])
def test_csv_quoting_and_cell_count_errors_name_the_line(tmp_path, text, line, words):
    path = tmp_path / "ragged.csv"
    path.write_text(text)
    with pytest.raises(DatasetError) as exc:
        load(path, mapping={"references": "reference"} if "reference" in text.splitlines()[0] else None)
    assert str(exc.value).startswith(f"{path}:{line}: ") and words in str(exc.value), str(exc.value)


def test_quoted_line_breaks_load_and_the_difference_is_reported(tmp_path):
    path = tmp_path / "multi.csv"
    path.write_text('id,input\ns1,"Dear Bob,\nthanks, see you"\ns2,plain\n')
    with pytest.warns(DatasetWarning, match=r"2 rows read from 3 lines after the header: 1 row\(s\) hold line breaks .*lines 2-3\)$"):
        samples = load(path)
    assert [s.input for s in samples] == ["Dear Bob,\nthanks, see you", "plain"]
    # a quote closed only at a later line's end: the swallowed line looks like a row and is named
    sneaky = tmp_path / "sneaky.csv"
    sneaky.write_text('id,input,reference\ns1,q,"abc\ns2,q,r"\ns3,q,r\n')
    with pytest.warns(DatasetWarning, match="2 rows read from 3 lines.*cell opened on line 2 contains lines that look like rows"):
        assert len(load(sneaky)) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one row per line: nothing to report
        (tmp_path / "plain.csv").write_text("id,input\ns1,a\n\ns2,b\n")
        assert len(load(tmp_path / "plain.csv")) == 2


@pytest.mark.parametrize("seed", range(6))
def test_rows_read_equal_rows_written_for_awkward_valid_csv(tmp_path, seed):
    rng = random.Random(seed)
    pieces = ["plain", "a,b", 'say "hi"', "line\nbreak", "  spaced  ", "", "ünï", "\r\nwin", ",", '"']
    rows = [{"id": f"s{i}", "input": "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) or "x",
             "note": rng.choice(pieces)} for i in range(rng.randint(5, 40))]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["id", "input", "note"], lineterminator=rng.choice(["\n", "\r\n"]))
    writer.writeheader()
    writer.writerows(rows)
    path = tmp_path / "awkward.csv"
    path.write_bytes((b"\xef\xbb\xbf" if seed % 2 else b"") + buffer.getvalue().encode("utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        samples = load(path)
    assert [(s.sample_id, s.input, s.metadata["note"]) for s in samples] == [(r["id"], r["input"], r["note"]) for r in rows]


def test_json_lines_bad_line_and_non_object_are_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "input": "x"}\n\n{"id": "b", "input": }\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: not valid JSON"):
        load(path)
    path.write_text('{"id": "a", "input": "x"}\n\n["not", "an", "object"]\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: row 2 is list, expected an object"):
        load(path)
    path.write_text('{"id": "a", "input": "x"}\n\n{"id": "b", "prompt": "y"}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: row 2: dataset column 'input' not found"):
        load(path)


# ------------------------------------------------------------------ precomputed outputs and inbox
@pytest.mark.parametrize("name,data,match", [
    ("out.csv", b"\xef\xbb\xbfsample_id,output\n0,fine\n", None),
    ("out.jsonl", b'\xef\xbb\xbf{"sample_id": "0", "output": "fine"}\n', None),
    ("latin.csv", b"sample_id,output\n0,caf\xe9\n", r"latin\.csv:2: not valid UTF-8: byte 0xE9 at column 6 .*re-save the outputs file as UTF-8"),
    ("header.csv", b"sample_id,output\n", r"has no rows \(only a header: sample_id, output\)"),
    ("empty.jsonl", b"", "has no rows"),
    ("dup.jsonl", b'{"sample_id": "0", "output": "a"}\n\n{"sample_id": "0", "output": "b"}\n', r"dup\.jsonl:3: sample_id '0' repeats the row at line 1"),
    ("badline.jsonl", b'{"sample_id": "0", "output": "a"}\n{"sample_id": "1", "output": \n', r"badline\.jsonl:2: not valid JSON"),
    ("ragged.csv", b'sample_id,output\n0,"open\n1,b\n', r"ragged\.csv:2: not valid CSV"),
    ("nocol.jsonl", b'{"sample_id": "0", "text": "a"}\n', r"nocol\.jsonl:1: column 'output' not found"),
])
def test_precomputed_outputs_reader_takes_the_same_care(tmp_path, name, data, match):
    path = tmp_path / name
    path.write_bytes(data)
    backend = PrecomputedBackend(f"precomputed:{path}")
    if match is None:
        assert backend.check_file() == 1 and backend._outputs == {"0": "fine"}
        return
    with pytest.raises(BackendError, match=match) as exc:
        backend.check_file()
    assert "\n" not in str(exc.value)


def test_inbox_sensor_skips_a_bad_file_once_and_keeps_the_good_one(lake_copy, instance, tmp_path):
    from pipelines.sensors import InboxConfig, inbox_sensor

    lake, resolved = lake_copy
    folder = tmp_path / "inbox" / "sfres-small"
    folder.mkdir(parents=True)
    (folder / "broken.csv").write_bytes(b"sample_id,output\n0,caf\xe9\n")
    resources = {"lake": lake, "inbox": InboxConfig(path=str(folder.parent))}
    context = dg.build_sensor_context(instance=instance, resources=resources)
    result = inbox_sensor(context)
    assert not result.run_requests and "unreadable, see the log: broken.csv" in result.skip_reason.skip_message
    assert result.cursor and "broken.csv" in result.cursor  # not retried until the file changes
    (folder / "good.jsonl").write_text("\n".join(json.dumps({"sample_id": str(i), "output": "x"}) for i in range(40)))
    again = inbox_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=result.cursor))
    assert isinstance(again, dg.SensorResult) and [r.partition_key.rsplit(":", 1)[1] for r in again.run_requests] == ["good"]


# ------------------------------------------------------------------ the CLI: one line, before any run


def _spec(tmp_path: Path, dataset: str, model: str = "precomputed:column=system_output") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: bad-input-{abs(hash((dataset, model))) % 10**8}\ndataset: {{kind: file, path: {dataset}}}\n"
                    f"models:\n  m: \"{model}\"\nmetrics: [exact_match]\n")
    return path


@pytest.mark.parametrize("dataset,model,words", [
    ("header.csv", "precomputed:column=x", "header.csv: the file has no rows (only a header: id, input)"),
    ("empty.csv", "precomputed:column=x", "empty.csv: the file has no rows (it is empty)"),
    ("latin.csv", "precomputed:column=x", "latin.csv:2: not valid UTF-8"),
    ("ragged.csv", "precomputed:column=x", "ragged.csv:2: not valid CSV"),
    ("ok.csv", "precomputed:outs.csv", "model m: "),
    ("ok.csv", "api:gpt-4o-mini@http://127.0.0.1:9/v1", "offline mode is on: model m (api:gpt-4o-mini) would call an external service"),
])
def test_cli_refuses_bad_input_in_one_line_before_any_run(tmp_path, monkeypatch, capsys, instance, dataset, model, words):
    (tmp_path / "header.csv").write_text("id,input\n")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "latin.csv").write_bytes(b"id,input\ns1,caf\xe9\n")
    (tmp_path / "ragged.csv").write_text('id,input\ns1,"open\ns2,q\n')
    (tmp_path / "ok.csv").write_text("id,input\ns1,q\n")
    (tmp_path / "outs.csv").write_text("sample_id,output\n")
    monkeypatch.setenv("FACETLAKE_OFFLINE", "")  # restored (unset) after the test, whatever the command sets
    runs_before = instance.get_runs_count()
    argv = ["run", str(_spec(tmp_path, dataset, model)), "--lake", str(tmp_path / "lake")]
    code, err = run_main(monkeypatch, capsys, [*argv, *(["--offline"] if model.startswith("api:") else [])])
    assert code == 1
    flat = " ".join(err.split())
    assert words in flat, err
    assert "Traceback" not in err and "STEP_FAILURE" not in err and "dagster" not in err.lower()
    assert sum(1 for line in err.splitlines() if line.startswith("error:")) == 1
    assert instance.get_runs_count() == runs_before  # refused before any Dagster run
    assert os.environ.get("FACETLAKE_OFFLINE") == ""  # a refusal does not switch this process offline


def test_evaluation_spec_file_bytes_are_checked_too(tmp_path):
    from resources.catalog.spec import EvaluationSpec, SpecError

    spec = "# café\nname: cafe\ndataset: {kind: sfres, limit: 3}\nmodels: {m: 'precomputed:column=system_output'}\nmetrics: [bleu]\n"
    (tmp_path / "latin.yaml").write_bytes(spec.encode("latin-1"))
    with pytest.raises(SpecError) as exc:
        EvaluationSpec.from_yaml(tmp_path / "latin.yaml")
    assert str(exc.value) == (f"{tmp_path / 'latin.yaml'}:1: not valid UTF-8: byte 0xE9 at column 6 cannot be decoded "
                              "(invalid continuation byte); re-save the spec as UTF-8 (it looks like cp1252)")
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbf" + spec.encode("utf-8"))
    assert EvaluationSpec.from_yaml(tmp_path / "bom.yaml").name == "cafe"


def test_inbox_file_waits_until_its_evaluation_has_samples(instance, tmp_path):
    """A file dropped for an evaluation whose samples are not stored yet (its first run may be
    writing them) starts no pair run, which would fail: it waits, unseen, and becomes a run
    request on the first tick after the samples are stored."""
    from conftest import small_spec
    from pipelines.runs.runner import materialize_samples
    from pipelines.runs.register import register
    from pipelines.sensors import InboxConfig, inbox_sensor
    from resources.lake.resource import LakeStore

    lake = LakeStore(root=str(tmp_path / "lake"))
    resolved = register(small_spec("inbox-wait", limit=5), lake, instance)
    folder = tmp_path / "inbox" / "inbox-wait"
    folder.mkdir(parents=True)
    (folder / "late-model.jsonl").write_text("\n".join(json.dumps({"sample_id": str(i), "output": "x"}) for i in range(5)))
    resources = {"lake": lake, "inbox": InboxConfig(path=str(folder.parent))}
    first = inbox_sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert not first.run_requests and "waiting for the samples of ['inbox-wait']" in first.skip_reason.skip_message
    assert "late-model" not in (first.cursor or "")  # not consumed: seen again next tick
    materialize_samples(resolved.fingerprint, lake, instance)
    second = inbox_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor))
    assert [r.partition_key.rsplit(":", 1)[1] for r in second.run_requests] == ["late-model"]


# ------------------------------------------------------------------ JSON Lines split at "\n" only (issue 26, fault 7)
@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"])
def test_json_lines_split_at_newline_only(tmp_path, sep):
    """JSON allows U+2028, U+2029 and U+0085 raw inside a string; str.splitlines split there
    and reported "Unterminated string"."""
    path = tmp_path / "seps.jsonl"
    rows = [{"id": "s1", "input": f"first{sep}second"}, {"id": "s2", "input": "plain"}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), encoding="utf-8")
    assert sep in path.read_text(encoding="utf-8")  # written raw, not escaped
    samples = load(path)
    assert [(s.sample_id, s.input) for s in samples] == [("s1", f"first{sep}second"), ("s2", "plain")]
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"sample_id": "s1", "output": f"a{sep}b"}, ensure_ascii=False) + "\n", encoding="utf-8")
    backend = PrecomputedBackend(f"precomputed:{out}")
    assert backend.check_file() == 1 and backend._outputs == {"s1": f"a{sep}b"}
