"""facetlake's lexical metrics against the peers' deterministic (non-LLM) scorers (issue 14).

The same 5,000 (output, reference) pairs go through:

- facetlake: ``metric_ops`` metric classes (``score_batch`` in batches of 256);
- Ragas (PyPI ``ragas``): its non-LLM metrics (``BleuScore``, ``RougeScore``,
  ``ChrfScore``, ``ExactMatch``, ``NonLLMStringSimilarity``) scored one sample at a time
  with ``single_turn_score`` (what ``evaluate()`` runs per row), and once through
  ``evaluate()`` for the whole set;
- DeepEval (PyPI ``deepeval``): ``deepeval.scorer.Scorer``'s static scorers
  (``sentence_bleu_score``, ``rouge_score``, ``exact_match_score``);
- lm-evaluation-harness (``lm_eval``): its metric functions (TruthfulQA's T5-style
  ``bleu`` and ``rouge``, ``chrf`` aggregation on one pair, ``exact_match_hf_evaluate``).

Each peer runs in its own process (Ragas and DeepEval from ``--peer-python``, a separate
virtual environment: their dependency pins would change this project's; lm-eval from
this one; ragas 0.4.3 imports ``langchain_community.chat_models.vertexai``, gone from
langchain-community 0.4, and needs sacrebleu / rouge-score / rapidfuzz for its non-LLM
metrics without declaring them). Time per pair excludes imports and the first call (model-free scorers only).
Values are put on one scale (0-100 for BLEU, chrF, ROUGE and exact match x 100) and the
max abs difference from facetlake's value is printed, with why they differ.

    python -m venv .venv-peers && .venv-peers/bin/pip install ragas==0.4.3 deepeval==4.3.1 \
        "langchain-community<0.4" sacrebleu rouge-score rapidfuzz
    python benchmarks/bench_peers.py --pairs 5000 --peer-python .venv-peers/bin/python

The pairs: the 1,181 SF-RES (system output, reference) pairs of data/unieval, then
word-shuffled and truncated variants of them (seeded) up to ``--pairs``; every tenth
output is its reference verbatim, so exact match is not all zero.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

METRICS = ("bleu", "rouge_l", "chrf", "exact_match", "token_f1")

# why a peer's value differs from facetlake's (printed under the table)
WHY = {
    ("ragas", "bleu"): "ragas BleuScore: splits output and reference at '. ' and scores them as a corpus of sentences (sacrebleu "
                       "corpus_bleu, no effective order: 0 without a 4-gram match); facetlake: sentence BLEU, effective order",
    ("ragas", "rouge_l"): "ragas RougeScore(rougeL, fmeasure): rouge-score with use_stemmer=True (facetlake: no stemmer); it "
                          "builds a RougeScorer (and its Porter stemmer) on every call, which is its time",
    ("ragas", "chrf"): "ragas ChrfScore: sacrebleu corpus_chrf on the one pair (= sentence chrF), 0-1 scale",
    ("ragas", "exact_match"): "ragas ExactMatch: raw string equality; facetlake's exact_match normalises case, punctuation, articles (SQuAD rule)",
    ("ragas", "token_f1"): "no token F1 in ragas; its NonLLMStringSimilarity (Levenshtein) is a different quantity, timed only",
    ("deepeval", "bleu"): "deepeval sentence_bleu_score: NLTK sentence_bleu over nltk word_tokenize, which needs NLTK's punkt "
                          "data (a network download, nltk.download('punkt_tab')): not available offline",
    ("deepeval", "rouge_l"): "deepeval rouge_score('rougeL'): rouge-score with use_stemmer=True (facetlake: no stemmer)",
    ("deepeval", "chrf"): "no chrF in deepeval's Scorer",
    ("deepeval", "exact_match"): "deepeval exact_match_score: strip() then equality; facetlake normalises (SQuAD rule)",
    ("deepeval", "token_f1"): "no token F1 in deepeval's Scorer",
    ("lm-eval", "bleu"): "lm-eval TruthfulQA bleu: sacrebleu with tokenize='intl' and exp smoothing (facetlake: 13a, exp)",
    ("lm-eval", "rouge_l"): "lm-eval TruthfulQA rouge: rougeLsum (sentences split at ' . ') through a BootstrapAggregator, x100",
    ("lm-eval", "chrf"): "lm-eval chrf aggregation: sacrebleu corpus_chrf; on one pair = sentence chrF",
    ("lm-eval", "exact_match"): "lm-eval exact_match_hf_evaluate: raw equality (options off); facetlake normalises",
    ("lm-eval", "token_f1"): "lm-eval's f1 is scikit-learn F1 over labels, not token F1: no equivalent",
}


def make_pairs(n: int) -> list[dict]:
    data = json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text())
    rng = random.Random(0)
    pairs = []
    for i in range(n):
        d = data[i % len(data)]
        ref, out = d["reference"], d["system_output"]
        if i >= len(data):
            words = out.split()
            if (i // len(data)) % 2:
                rng.shuffle(words)
            else:
                words = words[: max(1, len(words) - rng.randint(0, 4))]
            out = " ".join(words)
        if i % 10 == 0:
            out = ref
        pairs.append({"id": str(i), "output": out, "reference": ref})
    return pairs


# --------------------------------------------------------------------------- the sides, each in its own process
FACETLAKE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
from metric_ops import Sample, get_metric
pairs = json.load(open(sys.argv[1]))
samples = [Sample(p["id"], "", (p["reference"],)) for p in pairs]
outs = [p["output"] for p in pairs]
res = {}
for name, key, scale in (("bleu", "bleu", 1), ("rouge_l", "rouge_l_f", 100), ("chrf", "chrf", 1),
                         ("exact_match", "exact_match", 100), ("token_f1", "token_f1", 100)):
    m = get_metric(name)
    m.score_batch(samples[:1], outs[:1])
    best = None
    for _ in range(2):  # best of two: the cheapest side is the most sensitive to a busy machine
        t0 = time.perf_counter()
        vals = []
        for i in range(0, len(samples), 256):
            vals += [r[key].value * scale for r in m.score_batch(samples[i:i + 256], outs[i:i + 256])]
        best = min(best or 1e9, time.perf_counter() - t0)
    res[name] = {"s": best, "values": vals, "n": len(vals)}
json.dump(res, open(sys.argv[2], "w"))
"""

LM_EVAL = r"""
import json, sys, time
def loop(fn, items, budget=float(sys.argv[4])):
    t0 = time.perf_counter()
    vals = []
    for item in items:
        vals.append(fn(item))
        if time.perf_counter() - t0 > budget:
            break
    return {"s": time.perf_counter() - t0, "values": vals, "n": len(vals)}
pairs = json.load(open(sys.argv[1]))
from lm_eval.tasks.truthfulqa.utils import bleu, rouge
from lm_eval.api.metrics import chrf, exact_match_hf_evaluate
fns = {
    "bleu": lambda o, r: bleu([[r]], [o]),
    "rouge_l": lambda o, r: rouge([r], [o])["rougeLsum"],
    "chrf": lambda o, r: chrf([(r, o)]),
    "exact_match": lambda o, r: 100.0 * exact_match_hf_evaluate([o], [r])["exact_match"],
}
res = {}
for name, fn in fns.items():
    fn(pairs[0]["output"], pairs[0]["reference"])
    res[name] = loop(lambda p: fn(p["output"], p["reference"]), pairs)
res["token_f1"] = {"missing": "no token F1"}
json.dump(res, open(sys.argv[2], "w"))
"""

DEEPEVAL = r"""
import json, os, sys, time
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
def loop(fn, items, budget=float(sys.argv[4])):
    t0 = time.perf_counter()
    vals = []
    for item in items:
        vals.append(fn(item))
        if time.perf_counter() - t0 > budget:
            break
    return {"s": time.perf_counter() - t0, "values": vals, "n": len(vals)}
pairs = json.load(open(sys.argv[1]))
from deepeval.scorer import Scorer
res = {}
fns = {
    "bleu": lambda o, r: 100.0 * Scorer.sentence_bleu_score([r], o, bleu_type="bleu4"),
    "rouge_l": lambda o, r: 100.0 * Scorer.rouge_score(r, o, "rougeL"),
    "exact_match": lambda o, r: 100.0 * Scorer.exact_match_score(r, o),
}
for name, fn in fns.items():
    try:
        fn(pairs[0]["output"], pairs[0]["reference"])
    except Exception as exc:
        first = [line for line in str(exc).splitlines() if any(c.isalpha() for c in line)][:1] or [""]
        res[name] = {"missing": f"{type(exc).__name__}: {first[0].strip()[:100]}"}
        continue
    res[name] = loop(lambda p: fn(p["output"], p["reference"]), pairs)
res["chrf"] = {"missing": "no chrF scorer"}
res["token_f1"] = {"missing": "no token F1 scorer"}
json.dump(res, open(sys.argv[2], "w"))
"""

RAGAS = r"""
import asyncio, json, os, sys, time, warnings
warnings.filterwarnings("ignore")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
def loop(fn, items, budget=float(sys.argv[4])):
    t0 = time.perf_counter()
    vals = []
    for item in items:
        vals.append(fn(item))
        if time.perf_counter() - t0 > budget:
            break
    return {"s": time.perf_counter() - t0, "values": vals, "n": len(vals)}
pairs = json.load(open(sys.argv[1]))
from ragas import evaluate, EvaluationDataset
from ragas.dataset_schema import SingleTurnSample
import ragas.metrics as rm
samples = [SingleTurnSample(response=p["output"], reference=p["reference"]) for p in pairs]
makers = {
    "bleu": lambda: rm.BleuScore(),
    "rouge_l": lambda: rm.RougeScore(rouge_type="rougeL", mode="fmeasure"),
    "chrf": lambda: rm.ChrfScore(),
    "exact_match": lambda: rm.ExactMatch(),
    "token_f1": lambda: rm.NonLLMStringSimilarity(),
}
res, built = {}, {}
for name, make in makers.items():
    try:
        m = make()
    except Exception as exc:
        res[name] = {"missing": f"{type(exc).__name__}: {exc}"[:160]}
        continue
    built[name] = m
    m.single_turn_score(samples[0])
    res[name] = loop(lambda s: 100.0 * m.single_turn_score(s), samples)
    if name == "token_f1":
        res[name]["other_quantity"] = "NonLLMStringSimilarity (Levenshtein)"
t0 = time.perf_counter()
evaluate(EvaluationDataset(samples=samples), metrics=list(built.values()), show_progress=False)
res["_evaluate"] = {"s": time.perf_counter() - t0, "metrics": list(built)}
json.dump(res, open(sys.argv[2], "w"))
"""


def run_side(python: str, code: str, pairs_file: str, out: str, budget: float) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([python, "-c", code, pairs_file, out, str(ROOT), str(budget)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if proc.returncode != 0:
        return {"_error": proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else f"exit {proc.returncode}"}
    result = json.loads(Path(out).read_text())
    result["_wall_s"] = time.perf_counter() - t0
    return result


RAGAS_EVALUATE = r"""
import json, os, sys, warnings
warnings.filterwarnings("ignore")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
pairs = json.load(open(sys.argv[1]))
from ragas import evaluate, EvaluationDataset
from ragas.dataset_schema import SingleTurnSample
import ragas.metrics as rm
metrics = [rm.BleuScore(), rm.RougeScore(rouge_type="rougeL", mode="fmeasure"), rm.ChrfScore(), rm.ExactMatch(),
           rm.NonLLMStringSimilarity()]
ds = EvaluationDataset(samples=[SingleTurnSample(response=p["output"], reference=p["reference"]) for p in pairs])
result = evaluate(ds, metrics=metrics, show_progress=False)
print(len(result.to_pandas()))
"""

SFRES_SPEC = """name: sfres-small-run
dataset: {kind: sfres}
models:
  sfres-system: "precomputed:column=system_output"
metrics: [bleu, rouge_l, chrf, exact_match, token_f1]
"""


def small_run(peer_python: str, rounds: int) -> None:
    """``facetlake run`` on the 1,181 SF-RES pairs with 5 lexical metrics against ragas
    ``evaluate()`` on the same pairs with its 5 non-LLM metrics: whole-process wall time
    (imports included), rounds interleaved, medians."""
    import statistics

    data = json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text())
    pairs = [{"id": str(i), "output": d["system_output"], "reference": d["reference"]} for i, d in enumerate(data)]
    times: dict[str, list[float]] = {"facetlake run": [], "ragas evaluate()": []}
    with tempfile.TemporaryDirectory() as tmp:
        pf = os.path.join(tmp, "pairs.json")
        Path(pf).write_text(json.dumps(pairs))
        spec = Path(tmp) / "sfres.yaml"
        spec.write_text(SFRES_SPEC)
        for r in range(rounds):
            env = {**os.environ, "DAGSTER_HOME": os.path.join(tmp, f"home{r}"), "FACETLAKE_LAKE": os.path.join(tmp, f"lake{r}")}
            os.makedirs(env["DAGSTER_HOME"])
            shutil.copy(ROOT / "dagster.yaml", env["DAGSTER_HOME"])  # the project's instance settings (telemetry off), as a user's project has
            t0 = time.perf_counter()
            subprocess.run([str(Path(sys.executable).parent / "facetlake"), "run", str(spec)], cwd=ROOT, env=env, check=True,
                           capture_output=True)
            times["facetlake run"].append(time.perf_counter() - t0)
            if Path(peer_python).exists():
                t0 = time.perf_counter()
                subprocess.run([peer_python, "-c", RAGAS_EVALUATE, pf], cwd=ROOT, check=True, capture_output=True)
                times["ragas evaluate()"].append(time.perf_counter() - t0)
    for name, ts in times.items():
        if ts:
            print(f"{name}: median {statistics.median(ts):.1f} s over {len(ts)} rounds ({', '.join(f'{t:.1f}' for t in ts)}), "
                  f"{len(pairs):,} pairs, 5 lexical metrics, whole process")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--peer-python", default=str(ROOT / ".venv-peers" / "bin" / "python"),
                        help="interpreter of a virtual environment with ragas and deepeval")
    parser.add_argument("--budget-s", type=float, default=60.0,
                        help="a peer metric slower than this over all pairs is timed on the pairs done by then")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--small-run", type=int, metavar="ROUNDS",
                        help="instead: facetlake run on the 1,181 SF-RES pairs against ragas evaluate(), ROUNDS interleaved rounds")
    args = parser.parse_args()
    if args.small_run:
        small_run(args.peer_python, args.small_run)
        return
    from rich.console import Console
    from rich.table import Table

    pairs = make_pairs(args.pairs)
    with tempfile.TemporaryDirectory() as tmp:
        pf = os.path.join(tmp, "pairs.json")
        Path(pf).write_text(json.dumps(pairs))
        sides = {"facetlake": run_side(sys.executable, FACETLAKE, pf, os.path.join(tmp, "f.json"), args.budget_s),
                 "lm-eval": run_side(sys.executable, LM_EVAL, pf, os.path.join(tmp, "l.json"), args.budget_s)}
        if Path(args.peer_python).exists():
            sides["deepeval"] = run_side(args.peer_python, DEEPEVAL, pf, os.path.join(tmp, "d.json"), args.budget_s)
            sides["ragas"] = run_side(args.peer_python, RAGAS, pf, os.path.join(tmp, "r.json"), args.budget_s)
        else:
            sides["deepeval"] = sides["ragas"] = {"_error": f"no --peer-python at {args.peer_python}"}
    if args.json:
        Path(args.json).write_text(json.dumps(sides))
    ours = sides["facetlake"]
    table = Table(title=f"lexical metrics on the same {len(pairs):,} pairs: ms per pair (x facetlake's time) and max |diff| "
                        "from facetlake's value on a 0-100 scale, on how many pairs it exceeds 1e-6")
    table.add_column("metric")
    for side in sides:
        table.add_column(side, justify="right")
    notes = []
    for metric in METRICS:
        row = [metric]
        base = ours.get(metric, {})
        for side, res in sides.items():
            entry = res.get(metric) if "_error" not in res else {"missing": res["_error"]}
            if entry is None or "missing" in entry:
                row.append("n/a")
                reason = WHY.get((side, metric)) or (entry or {}).get("missing", "")
                if (side, metric) in WHY and "Error" in (entry or {}).get("missing", ""):
                    reason = f"{entry['missing']}; {reason}"
                notes.append(f"{side} / {metric}: not available: {reason}")
                continue
            n = entry.get("n", len(pairs))
            ms = 1000 * entry["s"] / n
            if side == "facetlake":
                row.append(f"{ms:.3f}")
                continue
            ratio = ms / (1000 * base["s"] / base["n"]) if base.get("s") else float("nan")
            if n < len(pairs):
                notes.append(f"{side} / {metric}: over the budget; timed and compared on the first {n:,} pairs")
            if "other_quantity" in entry:
                row.append(f"{ms:.3f} ({ratio:.1f}x), other quantity")
            else:
                diff = max(abs(a - b) for a, b in zip(entry["values"], base["values"]))
                n_diff = sum(abs(a - b) > 1e-6 for a, b in zip(entry["values"], base["values"]))
                row.append(f"{ms:.3f} ({ratio:.1f}x) |d|<={diff:.3g} on {n_diff}")
            if (side, metric) in WHY:
                notes.append(f"{side} / {metric}: {WHY[(side, metric)]}")
        table.add_row(*row)
    console = Console(width=220)
    console.print(table)
    for side, res in sides.items():
        if "_error" in res:
            print(f"{side}: not run: {res['_error']}")
        else:
            print(f"{side}: process wall {res['_wall_s']:.1f} s (imports included)")
    if "_evaluate" in sides.get("ragas", {}):
        ev = sides["ragas"]["_evaluate"]
        print(f"ragas evaluate() over all pairs with {', '.join(ev['metrics'])}: {ev['s']:.2f} s "
              f"({1000 * ev['s'] / len(pairs):.3f} ms per pair)")
    total = sum(ours[m]["s"] for m in METRICS if m in ours)
    print(f"facetlake, all five metrics: {total:.2f} s ({1000 * total / len(pairs):.3f} ms per pair)")
    print("why values differ:")
    for note in dict.fromkeys(notes):
        print(f"  - {note}")
    load = os.getloadavg()
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
