"""Inputs that never end are refused in one line (issue 26, fault 4): a dataset path that
is a symlink to /dev/zero was read until the kernel killed the process (17 GB after 60 s),
a FIFO blocked for ever, and a YAML alias bomb nested under `runtime:` grew without bound."""

from __future__ import annotations

import os
import signal

import pytest

from resources.backends import BackendError, PrecomputedBackend
from resources.catalog.spec import EvaluationSpec, SpecError
from resources.datasets import DatasetError, make_dataset


def _load(path):
    return make_dataset({"kind": "file", "path": str(path)}).load()


@pytest.fixture(autouse=True)
def alarm():
    """A hang fails the test after 20 s instead of blocking the suite (the FIFO case)."""
    def stop(*_):
        raise TimeoutError("the read blocked")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_symlink_to_dev_zero_is_refused_before_any_read(tmp_path):
    link = tmp_path / "data.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(DatasetError, match=r"data\.jsonl is a device, not a regular file"):
        _load(link)
    with pytest.raises(BackendError, match="not a regular file"):
        PrecomputedBackend(f"precomputed:{link}").check_file()


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match=r"pipe\.jsonl is a FIFO, not a regular file"):
        _load(fifo)


@pytest.mark.parametrize("case", ["directory", "loop"])
def test_directories_and_symlink_loops_name_the_path(tmp_path, case):
    path = tmp_path / "data.jsonl"
    if case == "directory":
        path.mkdir()
        match = "is a directory; name a file"
    else:
        path.symlink_to(path)
        match = "a symlink loop"
    with pytest.raises(DatasetError, match=match):
        _load(path)


def test_size_is_bounded_with_an_override(tmp_path, monkeypatch):
    path = tmp_path / "data.jsonl"
    path.write_text('{"id": "a", "input": "x"}\n' * 100)
    monkeypatch.setenv("FACETLAKE_MAX_INPUT_BYTES", "1000")
    with pytest.raises(DatasetError, match="over the 1,000-byte input limit; raise it with FACETLAKE_MAX_INPUT_BYTES"):
        _load(path)
    monkeypatch.setenv("FACETLAKE_MAX_INPUT_BYTES", "100000")
    assert len(_load(path)) == 100
    monkeypatch.setenv("FACETLAKE_MAX_INPUT_BYTES", "lots")
    with pytest.raises(DatasetError, match="not a positive number of bytes"):
        _load(path)


BOMB = """name: bomb
dataset: {kind: sfres}
models: {m: "precomputed:column=system_output"}
metrics: [bleu]
runtime:
  a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
"""


def test_a_yaml_alias_bomb_is_refused_wherever_it_is_nested(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    with pytest.raises(SpecError, match="expands to more than 1,000,000 values through its aliases"):
        EvaluationSpec.from_yaml(path)
    small = tmp_path / "fine.yaml"  # aliases that stay small are still YAML
    small.write_text(BOMB.split("  c:")[0])
    assert EvaluationSpec.from_yaml(small).runtime["b"][0] == ["x"] * 10


# ------------------------------------------------------------------ messages that name the file and line (fault 8)
@pytest.mark.parametrize("name,data,match", [
    ("deep.jsonl", b'{"id": "a", "input": "x"}\n{"id": "b", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
     r"deep\.jsonl:2: nested too deeply"),
    ("lone.jsonl", b'{"id": "a", "input": "ok"}\n{"id": "b", "input": "bad \\ud800 here"}\n', r"lone\.jsonl:2: holds a lone surrogate"),
    ("scalar.json", b"42\n", r"scalar\.json: the JSON document is a single int value \(42\), not rows"),
    ("dup.jsonl", b'{"id": "a", "input": "x", "input": "y"}\n', r"dup\.jsonl:1: the key 'input' appears twice"),
    ("sheet.csv", b"PK\x03\x04\x14\x00\x06\x00" + b"\x00" * 64, r"sheet\.csv: this is an \.xlsx/\.ods spreadsheet"),
    ("old.csv", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64, r"old\.csv: this is an Excel \.xls spreadsheet"),
    ("u16.jsonl", '{"id": "a", "input": "x"}\n'.encode("utf-16-le"), r"u16\.jsonl: looks like UTF-16 without a byte-order mark.*utf-16-le"),
])
def test_bad_files_are_named_with_their_line_and_fix(tmp_path, name, data, match):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DatasetError, match=match):
        _load(path)


def test_utf16_without_bom_loads_once_its_encoding_is_named(tmp_path):
    path = tmp_path / "u16.jsonl"
    path.write_bytes('{"id": "a", "input": "café"}\n'.encode("utf-16-le"))
    (sample,) = make_dataset({"kind": "file", "path": str(path), "encoding": "utf-16-le"}).load()
    assert sample.input == "café"


def test_a_spec_with_a_repeated_key_is_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nname: b\ndataset: {kind: sfres}\nmodels: {m: 'precomputed:column=system_output'}\nmetrics: [bleu]\n")
    with pytest.raises(SpecError, match="'name' appears twice"):
        EvaluationSpec.from_yaml(path)
