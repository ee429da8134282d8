"""The CUDA paths of the transformers backend and of BERTScore, side by side with CPU on the
same inputs: a check for a machine with a GPU (the task's device machine), printing a table.

    python benchmarks/bench_gpu_paths.py [--samples 64] [--repeats 3]

No hub is needed: the causal LM is the tests' tiny model (tests/support/tiny_lm.py: a BPE
tokenizer trained on SF-RES text, a 2-layer Llama with seeded random weights) and the
encoder is a tiny BERT built the same way (a WordPiece tokenizer trained on SF-RES text, a
2-layer BERT, seeded). Inputs are the first ``--samples`` SF-RES rows (data/unieval).

- generation (``resources.backends.hf.HFBackend``, greedy, 12 new tokens, log-probabilities
  with 2 alternatives): the outputs on ``cuda`` must equal those on ``cpu``, and each token's
  log-probability within 1e-3 (float32 kernels differ between devices in the last bits);
  samples per second on each device.
- BERTScore (``metric_ops.neural.bertscore.BERTScore``, last layer, no idf): F1 on ``cuda``
  within 1e-5 of ``cpu`` in float32 and within 1e-2 with ``fp16``; a candidate identical to
  its reference scores exactly 1.0 on every device (issue 26, fault 14); pairs per second.

Exits 1 when a check fails. Where CUDA is absent it says so and exits 2. Where the
``dagster`` package is not installed (a bare GPU image), a stand-in module holding only
``ConfigurableResource`` (the base class of the ``ModelBackends`` resource, which this
check does not use) is registered first, and the table says so; everything measured is the
project's own code.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

LOGPROB_TOL = 1e-3
F1_TOL = {"float32": 1e-5, "fp16": 1e-2}


def _dagster_or_stand_in() -> str:
    """``installed`` when dagster imports, else registers the stand-in and says so."""
    try:
        import dagster  # noqa: F401

        return "installed"
    except ImportError:
        stand_in = types.ModuleType("dagster")

        class ConfigurableResource:  # the only name resources.backends takes from dagster
            pass

        stand_in.ConfigurableResource = ConfigurableResource  # type: ignore[attr-defined]
        sys.modules["dagster"] = stand_in
        return "stand-in (not installed here)"


def sfres_rows(n: int) -> list[dict]:
    """The first ``n`` SF-RES rows (source, reference, system output)."""
    return json.loads((ROOT / "data" / "unieval" / "sfres.json").read_text(encoding="utf-8"))[:n]


def build_tiny_bert() -> str:
    """A 2-layer BERT with a WordPiece tokenizer trained on SF-RES text, seeded; its folder."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    from tests.support.tiny_lm import corpus

    out = Path(tempfile.mkdtemp(prefix="facetlake-tiny-bert-"))
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus(), trainer=trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=128)
    fast.save_pretrained(out)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(fast), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=128, max_position_embeddings=128)).save_pretrained(out)
    return str(out)


def generation(lm: str, rows: list[dict], device: str, repeats: int) -> tuple[list, float]:
    """(results, best samples/s) of greedy generation with log-probabilities on ``device``."""
    from metric_ops.base import Sample
    from resources.backends import GenerationRequest
    from resources.backends.hf import HFBackend

    backend = HFBackend(f"hf:{lm}", {"device": device, "batch_size": 16})
    requests = [GenerationRequest(sample=Sample(sample_id=str(i), input=r["source"]), prompt=r["source"]) for i, r in enumerate(rows)]
    settings = {"temperature": 0.0, "max_tokens": 12, "seed": 0, "logprobs": True, "top_logprobs": 2}
    list(backend.generate(requests[:2], settings))  # load and warm up (not timed)
    best, results = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        results = list(backend.generate(requests, settings))
        best = min(best, time.perf_counter() - start)
    return results, len(rows) / best


def bertscore(encoder: str, rows: list[dict], device: str, fp16: bool, repeats: int) -> tuple[list[float], float, float]:
    """(F1 per pair, best pairs/s, F1 of a candidate equal to its reference) on ``device``."""
    from metric_ops.base import Sample
    from metric_ops.neural.bertscore import BERTScore

    metric = BERTScore(model=encoder, device=device, fp16=fp16)
    samples = [Sample(sample_id=str(i), input=r["source"], references=(r["reference"],)) for i, r in enumerate(rows)]
    outputs = [r["system_output"] for r in rows]
    best, scores = float("inf"), []
    for _ in range(repeats):
        metric.encoder._cache.clear()  # time the encoder, not its token-embedding cache
        start = time.perf_counter()
        scores = metric.score_batch(samples, outputs)
        best = min(best, time.perf_counter() - start)
    same = metric.score_batch(samples[:1], [rows[0]["reference"]])[0]["bertscore_f1"].value
    return [s["bertscore_f1"].value for s in scores], len(rows) / best, same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda", help="the device compared with cpu (cpu itself: a dry run of this script)")
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device visible: this check needs a GPU machine (torch.cuda.is_available() is False)")
        return 2
    dagster_state = _dagster_or_stand_in()
    from tests.support.tiny_lm import build_tiny_lm

    rows = sfres_rows(args.samples)
    lm, encoder = build_tiny_lm(), build_tiny_bert()
    lines, failed = [], []

    cpu_gen, cpu_rate = generation(lm, rows, "cpu", args.repeats)
    gpu_gen, gpu_rate = generation(lm, rows, args.device, args.repeats)
    same_out = [a.output == b.output for a, b in zip(cpu_gen, gpu_gen)]
    diffs = [abs(x["logprob"] - y["logprob"]) for a, b in zip(cpu_gen, gpu_gen) if a.output == b.output
             for x, y in zip(a.extra["token_logprobs"], b.extra["token_logprobs"])]
    max_lp = max(diffs) if diffs else float("nan")
    lines.append(("generation, greedy outputs equal cpu/cuda", f"{sum(same_out)} of {len(same_out)}", "all"))
    lines.append(("generation, token log-prob max |cpu - cuda|", f"{max_lp:.2e}", f"<= {LOGPROB_TOL:g}"))
    lines.append(("generation samples/s cpu | cuda", f"{cpu_rate:.1f} | {gpu_rate:.1f}", ""))
    if not all(same_out):
        failed.append("greedy outputs differ between cpu and cuda")
    if not max_lp <= LOGPROB_TOL:
        failed.append(f"log-probabilities differ by {max_lp:.2e}")

    cpu_f1, cpu_bs, cpu_same = bertscore(encoder, rows, "cpu", False, args.repeats)
    for label, fp16 in (("float32", False), ("fp16", True)):
        if fp16 and not args.device.startswith("cuda"):
            continue  # half precision is a GPU setting
        gpu_f1, gpu_bs, gpu_same = bertscore(encoder, rows, args.device, fp16, args.repeats)
        worst = max(abs(a - b) for a, b in zip(cpu_f1, gpu_f1))
        lines.append((f"BERTScore F1 max |cpu - cuda {label}|", f"{worst:.2e}", f"<= {F1_TOL[label]:g}"))
        lines.append((f"BERTScore identical candidate, cuda {label}", repr(gpu_same), "1.0 exactly"))
        lines.append((f"BERTScore pairs/s cpu | cuda {label}", f"{cpu_bs:.1f} | {gpu_bs:.1f}", ""))
        if not worst <= F1_TOL[label]:
            failed.append(f"BERTScore F1 differs by {worst:.2e} ({label})")
        if gpu_same != 1.0:
            failed.append(f"identical candidate scored {gpu_same!r} on cuda ({label})")
    lines.append(("BERTScore identical candidate, cpu", repr(cpu_same), "1.0 exactly"))
    if cpu_same != 1.0:
        failed.append(f"identical candidate scored {cpu_same!r} on cpu")

    width = max(len(a) for a, _, _ in lines)
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"{args.device} (dry run)"
    print(f"GPU paths: {name}, torch {torch.__version__}, {len(rows)} SF-RES samples, "
          f"best of {args.repeats}; dagster: {dagster_state}")
    print(f"{'check':<{width}}  {'measured':<22}  expected")
    for check, value, expected in lines:
        print(f"{check:<{width}}  {value:<22}  {expected}")
    print("FAILED: " + "; ".join(failed) if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
