"""Performance goals guarded by counting work, never by timing (issue 14).

- score_suite starts worker processes only when the work pays for them, and a worker
  imports only the metric families asked for (no NLTK without METEOR);
- score rows are built and written as columnar frames (no Python dict per row), with the
  same values as the row-by-row path;
- neural metrics pick CUDA when torch sees it (proved here on CPU by faking torch's
  answer), fp16 is refused on the CPU and recorded in the signature, and a sample's
  BERTScore / semantic similarity never depends on the other texts in its batch;
- the number of Delta commits of one run does not grow with the number of samples.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from metric_ops import Sample, get_metric
from metric_ops.scoring.frame import score_frame, score_rows

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- score_suite workers
def test_workers_start_only_when_the_work_pays_for_them(monkeypatch):
    from metric_ops.scoring import suite

    monkeypatch.setattr(suite.os, "cpu_count", lambda: 8)
    # the small run: 1,181 pairs x 5 lexical metrics stays in process
    assert suite.plan_workers(1181, 5, None, 250) == 1
    assert suite.plan_workers(suite.PARALLEL_MIN_SCORES - 1, 1, None, 250) == 1
    # enough work: one worker per PARALLEL_MIN_SCORES/2 scores, capped by cores and chunks
    assert suite.plan_workers(suite.PARALLEL_MIN_SCORES, 1, None, 250) == 2
    assert suite.plan_workers(100_000, 4, None, 250) == 8
    assert suite.plan_workers(100_000, 4, None, 50_000) == 2  # two chunks
    monkeypatch.setattr(suite.os, "cpu_count", lambda: 1)
    assert suite.plan_workers(100_000, 4, None, 250) == 1
    # an explicit count is obeyed, capped at the number of chunks
    assert suite.plan_workers(1000, 1, 4, 250) == 4
    assert suite.plan_workers(300, 1, 4, 250) == 2


def _worker_modules(specs: list[tuple[str, str, dict]]) -> list[str]:
    code = (
        "import sys\n"
        "from metric_ops.scoring.suite import _init_worker, _score_chunk\n"
        "from metric_ops import Sample\n"
        f"_init_worker({specs!r})\n"
        "start, out = _score_chunk((0, [Sample('1', 'q', ('the cat sat',))], ['the cat']))\n"
        f"assert sorted(out) == {sorted(k for k, _, _ in specs)!r}, out\n"
        "wn = sys.modules.get('nltk.corpus') and type(sys.modules['nltk.corpus'].wordnet).__name__\n"
        "print('nltk' in sys.modules, 'torch' in sys.modules, wn)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_a_worker_imports_only_the_metric_families_asked_for():
    """The worker initialiser, in a fresh interpreter as forkserver/spawn start it: BLEU,
    chrF, token F1 and unstemmed ROUGE-L import neither NLTK nor torch; stemmed ROUGE-L
    imports NLTK for its Porter stemmer, and WordNet (METEOR's) is never loaded."""
    assert _worker_modules([("b", "bleu", {}), ("c", "chrf", {}), ("t", "token_f1", {})]) == ["False", "False", "None"]
    assert _worker_modules([("b", "bleu", {}), ("r", "rouge_l", {})]) == ["False", "False", "None"]
    assert _worker_modules([("b", "bleu", {}), ("r", "rouge_l", {"use_stemmer": True})]) == ["True", "False", "LazyCorpusLoader"]


def test_score_suite_with_workers_equals_in_process():
    data = [("the cat sat on the mat", "a cat sat on a mat"), ("hello world", "hello there world"),
            ("one two three", "three two one"), ("x", "y")] * 30
    samples = [Sample(str(i), "q", (ref,)) for i, (ref, _) in enumerate(data)]
    outputs = [hyp for _, hyp in data]
    from metric_ops.scoring.suite import score_suite

    metrics = {"bleu": ("bleu", {}), "rouge_l": ("rouge_l", {})}
    alone = score_suite(metrics, samples, outputs, workers=1, chunk_size=25, progress=False)
    pooled = score_suite(metrics, samples, outputs, workers=2, chunk_size=25, progress=False)
    for key in metrics:
        assert [{k: s.value for k, s in r.items()} for r in pooled[key]] == [{k: s.value for k, s in r.items()} for r in alone[key]]


# --------------------------------------------------------------------------- columnar score rows
@pytest.mark.parametrize("name", ["bleu", "rouge_l", "token_f1", "corpus_bleu"])
def test_score_frame_equals_score_rows(name):
    samples = [Sample("a", "q", ("the cat sat on the mat",)), Sample("b", "q", ()), Sample("c", "q", ("a b c",)),
               Sample("d", "q", ("zz",))]
    outputs = ["the cat sat", "x", None, "zz"]
    frame = score_frame(get_metric(name), samples, outputs)
    assert isinstance(frame, pl.DataFrame)
    assert frame.to_dicts() == score_rows(get_metric(name), samples, outputs)


# --------------------------------------------------------------------------- devices
@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda as a machine with ``n`` devices would answer (set ``fake_cuda.n``)."""
    import torch

    class State:
        n = 0

    monkeypatch.setattr(torch.cuda, "is_available", lambda: State.n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: State.n)
    monkeypatch.delenv("FACETLAKE_DEVICE", raising=False)
    return State


def test_device_selection(fake_cuda, monkeypatch):
    from metric_ops.neural.devices import DeviceError, resolve_device, resolve_dtype

    fake_cuda.n = 0
    assert resolve_device("auto") == "cpu"
    assert resolve_device(None) == "cpu"
    with pytest.raises(DeviceError, match="no CUDA device; use device=auto or device=cpu"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="fp16 runs only on a CUDA device"):
        resolve_dtype(True, resolve_device("auto"))
    fake_cuda.n = 2
    assert resolve_device("auto") == "cuda"
    assert resolve_device("CUDA:1") == "cuda:1"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(DeviceError, match="sees 2 CUDA device"):
        resolve_device("cuda:2")
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        resolve_device("tpu")
    assert resolve_dtype(True, "cuda") == "float16" and resolve_dtype(False, "cuda") == "float32"
    monkeypatch.setenv("FACETLAKE_DEVICE", "cpu")
    assert resolve_device("auto") == "cpu"  # the environment overrides auto only
    assert resolve_device("cuda:0") == "cuda:0"


@pytest.mark.slow
def test_neural_metrics_use_the_selected_device_and_record_fp16(fake_cuda, monkeypatch):
    """Loading goes to the device resolve_device picks; fp16 is in the signature and an
    fp32 signature is what it was before (reuse of stored rows keeps working)."""
    from metric_ops.neural import embeddings
    from metric_ops.neural.embeddings import dtype_tag

    loads = []

    class FakeEncoder:
        def __init__(self, path, device, dtype="float32"):
            loads.append((device, dtype))
            self.path, self.device, self.dtype = path, device, dtype
            self.num_layers, self.max_length = 6, 512

    embeddings._cached_encoder.cache_clear()
    monkeypatch.setattr(embeddings, "Encoder", FakeEncoder)
    try:
        fake_cuda.n = 1
        fp16 = get_metric("bertscore", fp16=True)
        fp32 = get_metric("bertscore")
        sim16 = get_metric("semantic_similarity", fp16=True)
        assert loads == [("cuda", "float16"), ("cuda", "float32")]  # semantic similarity shares the fp16 encoder
        assert fp16.signature().endswith("|dtype:fp16") and sim16.signature().endswith("|dtype:fp16")
        assert "dtype" not in fp32.signature() and dtype_tag(fp32.encoder) == ""
        fake_cuda.n = 0
        assert get_metric("bertscore").encoder.device == "cpu"
        from metric_ops.neural.devices import DeviceError

        with pytest.raises(DeviceError):
            get_metric("semantic_similarity", fp16=True)
    finally:
        embeddings._cached_encoder.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bertscore", "semantic_similarity"])
def test_a_samples_neural_value_does_not_depend_on_its_batch(name):
    """Length-sorted batches with padding: each sample scored alone (no padding, batch of
    one) equals the same sample scored among others of very different lengths, in a
    shuffled order and another batch size, to 1e-6."""
    from metric_ops.neural.embeddings import get_encoder

    words = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex".split()
    rng = random.Random(0)
    samples, outputs = [], []
    for i in range(24):
        n_ref, n_out = rng.randint(1, 40), rng.randint(1, 40)
        samples.append(Sample(str(i), "q", (" ".join(rng.choice(words) for _ in range(n_ref)),)))
        outputs.append(" ".join(rng.choice(words) for _ in range(n_out)))
    encoder = get_encoder(None, "cpu")
    alone = []
    for s, o in zip(samples, outputs):
        encoder.clear_cache()
        alone.append(get_metric(name, device="cpu", batch_size=1).score_batch([s], [o])[0])
    order = list(range(len(samples)))
    rng.shuffle(order)
    encoder.clear_cache()
    together = get_metric(name, device="cpu", batch_size=7).score_batch([samples[i] for i in order], [outputs[i] for i in order])
    encoder.clear_cache()
    worst = 0.0
    for pos, i in enumerate(order):
        for score_name, score in alone[i].items():
            worst = max(worst, abs(score.value - together[pos][score_name].value))
    assert worst < 1e-6


# --------------------------------------------------------------------------- Delta commits per run
@pytest.mark.slow
def test_commits_and_writes_per_run_do_not_grow_with_samples(tmp_path, instance, monkeypatch):
    """Two runs of the same evaluation shape, 10 and 60 samples: the same number of Delta
    commits per table and the same number of writes, every scores write one polars frame."""
    from pipelines.runs.runner import run_evaluation
    from resources.lake.resource import LakeStore
    from tests.conftest import small_spec

    writes: list[tuple[str, str]] = []
    original = LakeStore.replace

    def counted(self, table, rows, where):
        writes.append((table, type(rows).__name__))
        return original(self, table, rows, where)

    monkeypatch.setattr(LakeStore, "replace", counted)
    commits = {}
    for n in (10, 60):
        writes.clear()
        lake = LakeStore(root=str(tmp_path / f"lake{n}"))
        spec = small_spec(name=f"commits-{n}", limit=n, metrics=("bleu", "rouge_l"))
        spec.models["copy-input"] = "heuristic:copy-input"
        run_evaluation(spec, lake, instance)
        commits[n] = ({t: lake.version(t) for t in lake.tables()}, sorted(writes))
        assert lake.read("scores", columns=["sample_id"])["sample_id"].n_unique() == n
    assert commits[10] == commits[60]
    assert ("scores", "DataFrame") in commits[60][1]
    assert ("scores", "list") not in commits[60][1]


# --------------------------------------------------------------------------- sample checks without GE on the clean path
def _cases():
    ok = [Sample("1", "a", ("x",), (), {}, {"r": 3.0}), Sample("2", "b", ("y",), (), {}, {"r": float("nan")})]
    return {
        "clean": ok,
        "blank input": ok + [Sample("3", "  ", ("z",))],
        "no references": ok + [Sample("3", "c", ())],
        "duplicate id": ok + [Sample("1", "c", ("z",))],
        "rating above range": ok + [Sample("3", "c", ("z",), (), {}, {"r": 7.0})],
        "rating below range": ok + [Sample("3", "c", ("z",), (), {}, {"r": 0.5})],
        "rating at the bounds": ok + [Sample("3", "c", ("z",), (), {}, {"r": 1.0}), Sample("4", "d", ("w",), (), {}, {"r": 6.0})],
    }


@pytest.mark.slow
def test_the_column_precheck_agrees_with_great_expectations():
    """_all_pass says True exactly when Great Expectations passes all three checks."""
    from assets import samples as sa
    from resources.datasets import DATASETS

    for name, samples in _cases().items():
        rows = sa._validation_rows(samples)
        frame = sa._validation_frame(rows)
        cls = DATASETS["sfres"]  # ratings 1-6, references required
        required = [f for f in cls.required_fields if f in frame.columns]
        validator = sa._Validator(frame)
        ge_ok = all(validator.validate("ExpectColumnValuesToNotBeNull", column=c)[0] for c in required)
        ge_ok &= validator.validate("ExpectColumnValuesToBeUnique", column="sample_id")[0]
        ge_ok &= all(validator.validate("ExpectColumnValuesToBeBetween", column=c, min_value=cls.rating_range[0],
                                        max_value=cls.rating_range[1])[0] for c in frame.columns if c.startswith("rating:"))
        assert sa._all_pass(rows, required, cls.rating_range) == ge_ok, name
        assert ge_ok == (name in ("clean", "rating at the bounds")), name
        checks = {c.check_name: c.passed for c in sa.validate_samples(samples, "sfres")}
        assert all(checks.values()) == ge_ok, (name, checks)


def test_clean_samples_are_checked_without_importing_great_expectations():
    code = (
        "import sys\n"
        "from assets.samples import validate_samples\n"
        "from metric_ops import Sample\n"
        "checks = validate_samples([Sample('1', 'a', ('x',)), Sample('2', 'b', ('y',))], 'sfres')\n"
        "assert all(c.passed for c in checks), checks\n"
        "print('great_expectations' in sys.modules, 'pandas' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["False", "False"]  # neither Great Expectations nor pandas loaded for clean data


# --------------------------------------------------------------------------- precomputed outputs parsed once per run
@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_a_run_parses_each_precomputed_file_once_and_a_changed_file_again(tmp_path, instance, monkeypatch):
    """`facetlake run` checks every outputs file before the run and the in-process run's
    generations take the parsed file instead of reading it again; a file changed in between
    is read again (its new content is what the run stores)."""
    import json

    from pipelines.cli.audit import spec_for_run
    from pipelines.runs.runner import run_evaluation
    from resources.backends import PrecomputedBackend
    from resources.lake.resource import LakeStore

    data = json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text())[:12]
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": str(i), "input": d["source"], "ref": d["reference"]}) + "\n" for i, d in enumerate(data)))
    outs = {m: tmp_path / f"{m}.jsonl" for m in ("a", "b")}
    for m, path in outs.items():
        path.write_text("".join(json.dumps({"sample_id": str(i), "output": f"{m} {d['system_output']}"}) + "\n" for i, d in enumerate(data)))
    config = tmp_path / "spec.yaml"
    config.write_text(f"name: parse-once\ndataset: {{kind: file, path: {dataset}, mapping: {{input: input, references: ref, sample_id: id}}}}\n"
                      f"models: {{a: 'precomputed:{outs['a']}', b: 'precomputed:{outs['b']}'}}\nmetrics: [bleu]\n")
    parsed: list[str] = []
    original = PrecomputedBackend._parse_file
    monkeypatch.setattr(PrecomputedBackend, "_parse_file", lambda self: parsed.append(self.path.name) or original(self))
    spec = spec_for_run(config, in_process=True)
    assert sorted(parsed) == ["a.jsonl", "b.jsonl"]
    outs["b"].write_text("".join(json.dumps({"sample_id": str(i), "output": "changed"}) + "\n" for i in range(len(data))))
    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(spec, lake, instance)
    assert sorted(parsed) == ["a.jsonl", "b.jsonl", "b.jsonl"]  # a: once; b: again, it changed after the check
    stored = lake.read("generations", columns=["model", "output"])
    assert set(stored.filter(pl.col("model") == "b")["output"]) == {"changed"}
    assert stored.filter(pl.col("model") == "a")["output"].str.starts_with("a ").all()


# --------------------------------------------------------------------------- the dataset loaded once per run
def test_a_run_loads_its_dataset_once_and_a_changed_dataset_is_still_refused(tmp_path, instance, monkeypatch):
    """Registration loads, normalises and hashes the dataset; the in-process samples asset
    takes those samples instead of loading again. A dataset file changed after the
    registration is loaded again by the asset and refused (its hash is not the registered one)."""
    import json

    import dagster as dg

    from pipelines.runs.runner import materialize_samples, run_evaluation
    from pipelines.runs.register import register
    from resources.datasets import Dataset
    from resources.catalog.spec import EvaluationSpec
    from resources.lake.resource import LakeStore

    data = json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text())[:15]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "input": d["source"], "ref": d["reference"], "out": d["system_output"]}) + "\n"
                            for i, d in enumerate(data)))
    spec = EvaluationSpec.from_mapping({
        "name": "load-once", "dataset": {"kind": "file", "path": str(path), "mapping": {"input": "input", "references": "ref", "sample_id": "id"}},
        "models": {"m": "precomputed:column=out"}, "metrics": ["bleu"]})
    loads: list[int] = []
    original = Dataset.load
    monkeypatch.setattr(Dataset, "load", lambda self: loads.append(1) or original(self))
    lake = LakeStore(root=str(tmp_path / "lake"))
    run_evaluation(spec, lake, instance)
    assert len(loads) == 1
    assert lake.read("samples")["sample_id"].n_unique() == 15
    # registered, then the file changes before the samples run: loaded again and refused
    loads.clear()
    other = LakeStore(root=str(tmp_path / "lake2"))
    resolved = register(spec, other, instance, in_process=True)
    path.write_text(path.read_text().replace(data[0]["source"], "changed text", 1))
    with pytest.raises(dg.Failure, match="changed since fingerprint"):
        materialize_samples(resolved.fingerprint, other, instance)
    assert len(loads) == 2
