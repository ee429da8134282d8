"""Precision and recall of each anonymisation strategy on made-up texts with planted PII.

    python benchmarks/bench_pii.py [--model NAME@BASE_URL]

Labelled set: benchmarks/pii_texts.py (30 texts, every entity type, names and places in
several forms, two texts with no PII). Per strategy it prints:

- precision / recall (typed): a predicted span counts when it overlaps a gold span of the
  same type; precision = matched predictions / predictions, recall = matched gold / gold;
- masked recall: share of gold entities whose every character ends up inside some
  replaced span, whatever its type: what a reader of the sent text can no longer see;
- per-type recall, and milliseconds per text.

The ``model`` strategy is measured only when ``--model`` names a served LLM (e.g. vLLM
serve on 127.0.0.1); none can be downloaded on the project's build machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pii_texts import labelled  # noqa: E402

from resources.anonymise import ENTITY_TYPES, build_anonymiser  # noqa: E402


def evaluate(anonymiser, data) -> dict:
    """Counts and rates of one anonymiser over the labelled data."""
    tp_pred = n_pred = tp_gold = n_gold = masked = 0
    per_type = {t: [0, 0] for t in ENTITY_TYPES}
    t0 = time.perf_counter()
    for text, gold in data:
        found = anonymiser.find(text)
        n_pred += len(found)
        n_gold += len(gold)
        for e in found:
            if any(k == e.type and e.start < b and a < e.end for k, a, b in gold):
                tp_pred += 1
        for kind, a, b in gold:
            per_type[kind][1] += 1
            if any(e.type == kind and e.start < b and a < e.end for e in found):
                tp_gold += 1
                per_type[kind][0] += 1
            covered = set()
            for e in found:
                covered.update(range(max(a, e.start), min(b, e.end)))
            if len(covered) == b - a:
                masked += 1
    elapsed = time.perf_counter() - t0
    return {
        "precision": tp_pred / n_pred if n_pred else float("nan"),
        "recall": tp_gold / n_gold if n_gold else float("nan"),
        "masked_recall": masked / n_gold if n_gold else float("nan"),
        "n_pred": n_pred, "n_gold": n_gold,
        "per_type": {k: (v[0] / v[1] if v[1] else float("nan")) for k, v in per_type.items()},
        "ms_per_text": 1000 * elapsed / len(data),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="MODEL@BASE_URL of a served LLM for the model strategy")
    args = parser.parse_args()
    data = labelled()
    strategies: list[tuple[str, list[str], dict]] = [
        ("deterministic only", [], {}),
        ("rule_based", ["rule_based"], {}),
        ("presidio (blank spaCy)", ["presidio"], {}),
        ("rule_based+presidio", ["rule_based", "presidio"], {}),
    ]
    if args.model:
        name, url = args.model.split("@", 1)
        strategies.append(("model", ["model"], {"model": {"model": name, "base_url": url}}))
    results = []
    for label, names, options in strategies:
        try:
            anonymiser = build_anonymiser(names, options=options)
            anonymiser.find("warm-up text for Maria Schmidt in Berlin")  # engine load is not per-text cost
            results.append((label, evaluate(anonymiser, data)))
        except Exception as exc:  # noqa: BLE001 - a missing optional engine is reported, not fatal
            print(f"{label}: not measured ({type(exc).__name__}: {exc})")
    gold = results[0][1]["n_gold"] if results else 0
    print(f"\n{len(data)} texts, {gold} planted entities\n")
    header = f"{'strategy':<26} {'precision':>9} {'recall':>7} {'masked':>7} {'pred':>5} {'ms/text':>8}"
    print(header)
    print("-" * len(header))
    for label, r in results:
        print(f"{label:<26} {r['precision']:>9.3f} {r['recall']:>7.3f} {r['masked_recall']:>7.3f} {r['n_pred']:>5d} {r['ms_per_text']:>8.2f}")
    print("\nrecall per entity type")
    print(f"{'strategy':<26} " + " ".join(f"{t[:11]:>11}" for t in ENTITY_TYPES))
    for label, r in results:
        print(f"{label:<26} " + " ".join(f"{r['per_type'][t]:>11.2f}" for t in ENTITY_TYPES))


if __name__ == "__main__":
    main()
