"""Cross-validation of ROUGE-W/S/SU (and ROUGE-1/2/L) against the ROUGE-1.5.5 Perl script
and hand-worked examples (issue 15, kind 8).

Two checks, both rows of the ``facetlake crossval`` report (:mod:`pipelines.crossval.harness`):

- :func:`known_answer_rows`: facetlake against the values ROUGE-1.5.5 printed on 412 pairs
  (300 SF-RES system outputs vs references, 100 QAGS-CNNDM summaries vs articles, 12
  hand-made pairs; ROUGE-W/S/SU also on 42 two-reference pairs, pooled as ``-f A``, and 2
  multi-line cases), stored in ``pipelines/crossval/rouge155_known_answers.json`` (the Perl script
  is not shipped; ``scripts/rouge155_known_answers.py`` regenerates the file). Script
  options ``-a -n 2 -w 1.2 -2 4 -U -f A -d -z SPL``: no stemming (no ``-m``), stopwords
  kept (no ``-s``), each text on one line. facetlake runs with its defaults
  (``tokenizer=default``, ``use_stemmer=False``, ``variant=rouge155``), whose tokens are
  the script's (lower-cased, ``[a-z0-9]`` runs). Values are compared as the script prints
  them: P and R rounded to 5 decimals (``%7.5f``) and F computed from the rounded P and R,
  then rounded. Where facetlake is ``unscored`` (nothing to measure) the pair is left out,
  counted, and the script's value there must be 0.
- :func:`worked_example_rows`: closed-form values from Lin (2004) for ``variant=lin2004``
  and from the 1.5.5 formulas for ``variant=rouge155``.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, Sequence

from metric_ops.base import Sample

KNOWN_ANSWERS = Path(__file__).resolve().with_name("rouge155_known_answers.json")
PRINTED_TOLERANCE = 5e-6
WORKED_TOLERANCE = 1e-9
# 1.5.5's printed name -> (facetlake metric, parameters)
PERL_METRICS: dict[str, tuple[str, dict[str, Any]]] = {
    "ROUGE-1": ("rouge_1", {}),
    "ROUGE-2": ("rouge_2", {}),
    "ROUGE-L": ("rouge_l", {}),
    "ROUGE-W-1.2": ("rouge_w", {"weight": 1.2}),
    "ROUGE-S4": ("rouge_s", {"max_skip": 4}),
    "ROUGE-SU4": ("rouge_su", {"max_skip": 4}),
}
PARTS = ("precision", "recall", "f")
# metrics whose multi-reference rule is 1.5.5's -f A pooling (ROUGE-1/2/L keep rouge-score's best F)
POOLED = ("rouge_w", "rouge_s", "rouge_su")


def load_known_answers(path: str | Path | None = None) -> dict[str, Any]:
    """The known-answer file: ``{"options", "source", "data", "pairs": [{id, candidate,
    reference, rouge155: {"ROUGE-1": [P, R, F], ...}}]}``. Raises ``FileNotFoundError``
    with the regeneration hint when it is missing (e.g. in an installed wheel)."""
    p = Path(path) if path else KNOWN_ANSWERS
    if not p.exists():
        raise FileNotFoundError(f"ROUGE-1.5.5 known answers not found at {p}: run from a source checkout or regenerate with scripts/rouge155_known_answers.py")
    return json.loads(p.read_text())


def as_printed(precision: float, recall: float) -> tuple[float, float, float]:
    """(P, R, F) as ROUGE-1.5.5 prints them: P, R rounded with ``%7.5f``; F = 2PR/(P+R)
    of the rounded P and R (alpha 0.5), rounded again."""
    p, r = float(f"{precision:7.5f}"), float(f"{recall:7.5f}")
    f = float(f"{p * r / (0.5 * p + 0.5 * r):7.5f}") if p + r > 0 else 0.0
    return p, r, f


def known_answer_comparison(known: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per 1.5.5 metric: ``{"metric", "compared", "left_out", "left_out_reasons",
    "max_abs_error" (printed precision), "max_raw_error" (unrounded facetlake vs printed),
    "worst_case", "nonzero_left_out" (left-out pairs where the script printed a non-zero
    value; must be empty)}``. All pairs are scored in one ``score_batch`` per metric."""
    from metric_ops.registry import get_metric

    known = known or load_known_answers()
    result: dict[str, dict[str, Any]] = {}
    for perl_name, (metric, params) in PERL_METRICS.items():
        pairs = known["pairs"] + (known.get("multi_reference_pairs", []) if metric in POOLED else [])
        samples = [Sample(sample_id=p["id"], input="", references=tuple(p.get("references") or [p["reference"]])) for p in pairs]
        rows = get_metric(metric, **params).score_batch(samples, [p["candidate"] for p in pairs])
        worst = raw = 0.0
        worst_case = None
        compared = 0
        reasons: collections.Counter = collections.Counter()
        nonzero_left_out = []
        for pair, row in zip(pairs, rows):
            expected = pair["rouge155"][perl_name]
            scores = [row[f"{metric}_{part}"] for part in PARTS]
            if any(s.status != "scored" for s in scores):
                reasons[str(scores[0].detail.get("reason", scores[0].status))] += 1
                if any(v != 0 for v in expected):
                    nonzero_left_out.append(pair["id"])
                continue
            compared += 1
            got = as_printed(scores[0].value, scores[1].value)
            err = max(abs(a - b) for a, b in zip(got, expected))
            raw = max(raw, *(abs(s.value - b) for s, b in zip(scores, expected)))
            if worst_case is None or err > worst:
                worst, worst_case = err, pair["id"]
        result[perl_name] = {
            "metric": metric,
            "pairs": len(pairs),
            "real_pairs": sum(not p["id"].startswith("edge") for p in pairs),
            "params": params,
            "compared": compared,
            "left_out": sum(reasons.values()),
            "left_out_reasons": dict(reasons),
            "max_abs_error": worst,
            "max_raw_error": raw,
            "worst_case": worst_case,
            "nonzero_left_out": nonzero_left_out,
        }
    return result


def known_answer_rows(known: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Report rows (the shape of :func:`pipelines.crossval.harness.compare`'s) for the ROUGE-1.5.5
    known answers, one per metric, with ``known_answers`` details for the report section."""
    known = known or load_known_answers()
    sources = collections.Counter(p["id"].split("-")[0] for p in known["pairs"])
    multi = len(known.get("multi_reference_pairs", []))
    rows = []
    for perl_name, c in known_answer_comparison(known).items():
        passed = c["max_abs_error"] <= PRINTED_TOLERANCE and not c["nonzero_left_out"]
        rows.append(
            {
                "variant": f"{c['metric']} vs ROUGE-1.5.5 {perl_name}",
                "metric": c["metric"],
                "cases": c["pairs"],
                "real_cases": c["real_pairs"],
                "sources": ", ".join(f"{k} {v}" for k, v in sorted(sources.items())),
                "max_abs_error": c["max_abs_error"],
                "max_scaled_error": c["max_abs_error"],
                "worst_case": c["worst_case"],
                "tolerance": PRINTED_TOLERANCE,
                "passed": passed,
                "reference": f"ROUGE-1.5.5.pl {known['options']}, values as printed (5 decimals)",
                "reference_version": "ROUGE-1.5.5 (known answers)",
                "compared": c["compared"],
                "left_out": c["left_out"],
                "left_out_reasons": {f"facetlake unscored: {k}": v for k, v in c["left_out_reasons"].items()},
                "note": f"{c['compared']} compared, {c['left_out']} unscored left out"
                + (f", incl. {multi} two-reference or multi-line pairs" if c["metric"] in POOLED else ""),
                "known_answers": {"perl_metric": perl_name, **c},
            }
        )
    return rows


def known_answer_section(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown lines of the ROUGE-1.5.5 section (empty when no known-answer rows)."""
    rows = [r for r in rows if "known_answers" in r]
    if not rows:
        return []
    lines = [
        "## ROUGE-1.5.5 known answers",
        "",
        "ROUGE-W, ROUGE-S and ROUGE-SU have no Python reference library. facetlake's default",
        "(`variant=rouge155`) is checked against the ROUGE-1.5.5 Perl script's printed values on",
        f"{rows[0]['cases']} pairs ({rows[0]['sources']}: SF-RES system outputs vs references, QAGS-CNNDM",
        "summaries vs articles, hand-made pairs), stored in `pipelines/crossval/rouge155_known_answers.json`",
        "(the script is not shipped; `scripts/rouge155_known_answers.py` regenerates the file).",
        "ROUGE-W/S/SU also run on 42 two-reference pairs (40 SF-RES outputs with their reference and the next",
        "row's), where `variant=rouge155` pools the references as the script's `-f A` does, and on 2 multi-line",
        "cases (the script reads lines as sentences); ROUGE-1/2/L keep rouge-score's best-F reference and are",
        "compared on one-line, one-reference pairs only.",
        f"Script options: `{rows[0]['reference'].split(' ', 1)[1].split(',')[0]}`: no stemming, stopwords kept, one line",
        "per text. facetlake runs with its defaults (`tokenizer=default`, `use_stemmer=false`): the same",
        "tokens (lower-cased `[a-z0-9]` runs). Values are compared as the script prints them (P, R rounded",
        "to 5 decimals, F from the rounded P and R). Pairs facetlake reports `unscored` are left out and",
        "counted; the script printed 0 on each of them. The unrounded column compares facetlake's full-precision",
        "values with the printed ones: above 5e-6 only because the script's F comes from the rounded P and R.",
        "",
        "| 1.5.5 metric | facetlake | pairs | compared | left out (unscored) | max abs diff (printed precision) | max abs diff (unrounded) | pass |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for r in rows:
        k = r["known_answers"]
        why = "; ".join(f"{n}: {reason}" for reason, n in k["left_out_reasons"].items())
        lines.append(
            f"| {k['perl_metric']} | {k['metric']} | {k['pairs']} | {k['compared']} | {k['left_out']}{f' ({why})' if why else ''} | "
            f"{k['max_abs_error']:.3g} | {k['max_raw_error']:.3g} | {'yes' if r['passed'] else 'NO'} |"
        )
    lines.append("")
    return lines


# --------------------------------------------------------------------------- worked examples


def _f(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def worked_examples() -> list[dict[str, Any]]:
    """Hand-worked ROUGE-W/S/SU cases: ``{metric, params, candidate, reference, expected:
    (P, R, F) or None for unscored, source}``."""
    w = 1.2
    f = lambda k: k**w  # noqa: E731
    finv = lambda x: x ** (1 / w)  # noqa: E731
    lin = {"variant": "lin2004"}
    # Lin (2004) Section 3.2: X = A B C D E F G; Y1 = A B C D H I K (one run of 4);
    # Y2 = A H B K C I D (four runs of 1). Both have LCS 4; WLCS(Y1) = f(4), WLCS(Y2) = 4 f(1).
    x, y1, y2 = "a b c d e f g", "a b c d h i k", "a h b k c i d"
    p1, r1 = finv(f(4) / f(7)), finv(f(4) / f(7))
    p2, r2 = finv(4 * f(1) / f(7)), finv(4 * f(1) / f(7))
    # ROUGE-1.5.5: recall denominator f(f(m)); hits from runs of consecutive marked REFERENCE
    # positions. Y2's matches a, b, c, d are positions 1-4 of X, one run: hit f(4) as for Y1
    # (the script prints R 0.38721, P 0.57143 for both), where the paper has 4 f(1).
    r_155 = finv(f(4) / f(f(7)))
    ab_r = finv(f(2) / f(f(2)))  # "a b" vs "a b": 0.87055 as the script prints
    # Lin (2004) Section 5: S1 police killed the gunman; S2 police kill the gunman;
    # S3 the gunman kill police; S4 the gunman police killed. 4 words -> C(4,2) = 6 skip-bigrams.
    # Matches with S1: S2 3 (police the, police gunman, the gunman), S3 1, S4 2. ROUGE-S* = matches / 6.
    s1, s2, s3, s4 = "police killed the gunman", "police kill the gunman", "the gunman kill police", "the gunman police killed"
    # ROUGE-SU* (lin2004) adds the 4 unigrams: 10 units; S2 and S3 share 3 unigrams, S4 all 4.
    # rouge155 drops the last token's unigram: S1 units = 6 + {police, killed, the} = 9. S2 adds
    # {police, kill, the}: shared police, the -> (3 + 2) / 9; S3 adds {the, gunman, kill}: shared
    # the (S1's gunman is its last token) -> (1 + 1) / 9; S4 adds {the, gunman, police}: shared
    # the, police -> (2 + 2) / 9.
    # Skip distance: max_skip=0 -> bigrams (S1 vs S2 share "the gunman": 1/3); max_skip=1 -> 2/5.
    s155 = {"max_skip": -1}
    return [
        {"metric": "rouge_w", "params": lin, "candidate": y1, "reference": x, "expected": (p1, r1, _f(p1, r1)), "source": "Lin 2004 §3.2, Y1"},
        {"metric": "rouge_w", "params": lin, "candidate": y2, "reference": x, "expected": (p2, r2, _f(p2, r2)), "source": "Lin 2004 §3.2, Y2"},
        {"metric": "rouge_w", "params": lin, "candidate": x, "reference": x, "expected": (1.0, 1.0, 1.0), "source": "lin2004 identical"},
        {"metric": "rouge_w", "params": {}, "candidate": y1, "reference": x, "expected": (p1, r_155, _f(p1, r_155)), "source": "1.5.5 Y1: R f^-1(f(4)/f(f(7)))"},
        {"metric": "rouge_w", "params": {}, "candidate": y2, "reference": x, "expected": (p1, r_155, _f(p1, r_155)), "source": "1.5.5 Y2: runs along the reference, as Y1"},
        {"metric": "rouge_w", "params": {}, "candidate": "a b", "reference": "a b", "expected": (1.0, ab_r, _f(1.0, ab_r)), "source": "1.5.5 a b vs a b (R 0.87055)"},
        {"metric": "rouge_w", "params": {}, "candidate": "", "reference": x, "expected": None, "source": "empty candidate: unscored"},
        {"metric": "rouge_s", "params": {"max_skip": -1, **lin}, "candidate": s2, "reference": s1, "expected": (3 / 6, 3 / 6, 3 / 6), "source": "Lin 2004 §5, S2"},
        {"metric": "rouge_s", "params": {"max_skip": -1}, "candidate": s3, "reference": s1, "expected": (1 / 6, 1 / 6, 1 / 6), "source": "Lin 2004 §5, S3"},
        {"metric": "rouge_s", "params": {"max_skip": -1}, "candidate": s4, "reference": s1, "expected": (2 / 6, 2 / 6, 2 / 6), "source": "Lin 2004 §5, S4"},
        {"metric": "rouge_s", "params": {"max_skip": 0}, "candidate": s2, "reference": s1, "expected": (1 / 3, 1 / 3, 1 / 3), "source": "S0 = bigrams"},
        {"metric": "rouge_s", "params": {"max_skip": 1}, "candidate": s2, "reference": s1, "expected": (2 / 5, 2 / 5, 2 / 5), "source": "S1 skip distance"},
        {"metric": "rouge_s", "params": {"max_skip": -1}, "candidate": "police", "reference": s1, "expected": None, "source": "one token: no skip-bigram, unscored"},
        {"metric": "rouge_su", "params": {"max_skip": -1, **lin}, "candidate": s2, "reference": s1, "expected": (6 / 10, 6 / 10, 6 / 10), "source": "Lin 2004 §5 + unigrams, S2"},
        {"metric": "rouge_su", "params": {"max_skip": -1, **lin}, "candidate": s3, "reference": s1, "expected": (4 / 10, 4 / 10, 4 / 10), "source": "lin2004 S3"},
        {"metric": "rouge_su", "params": {"max_skip": -1, **lin}, "candidate": s4, "reference": s1, "expected": (6 / 10, 6 / 10, 6 / 10), "source": "lin2004 S4"},
        {"metric": "rouge_su", "params": {"max_skip": -1, **lin}, "candidate": "police", "reference": s1, "expected": (1.0, 1 / 10, _f(1.0, 0.1)), "source": "lin2004 one token: unigram only"},
        {"metric": "rouge_su", "params": s155, "candidate": s2, "reference": s1, "expected": (5 / 9, 5 / 9, 5 / 9), "source": "1.5.5 S2: last unigram not counted"},
        {"metric": "rouge_su", "params": s155, "candidate": s3, "reference": s1, "expected": (2 / 9, 2 / 9, 2 / 9), "source": "1.5.5 S3"},
        {"metric": "rouge_su", "params": s155, "candidate": s4, "reference": s1, "expected": (4 / 9, 4 / 9, 4 / 9), "source": "1.5.5 S4"},
        {"metric": "rouge_su", "params": {}, "candidate": "cat", "reference": "the cat", "expected": (0.0, 0.0, 0.0), "source": "1.5.5 cat vs the cat: 0/0/0"},
        {"metric": "rouge_su", "params": {}, "candidate": "the cat", "reference": "cat", "expected": None, "source": "1.5.5 one-token reference: no unit, unscored"},
    ]


ROUGE_WORKED_EXAMPLES = worked_examples()


def worked_example_rows() -> list[dict[str, Any]]:
    """Report rows for ROUGE-W/S/SU: facetlake vs the hand-worked values (an expected
    ``None`` must come out ``unscored``; anything else counts as an infinite error)."""
    from metric_ops.registry import get_metric

    by_metric: dict[str, list[float]] = collections.defaultdict(list)
    for ex in ROUGE_WORKED_EXAMPLES:
        m = get_metric(ex["metric"], **ex["params"])
        row = m.score_batch([Sample("x", "", (ex["reference"],))], [ex["candidate"]])[0]
        scores = [row[f"{ex['metric']}_{p}"] for p in PARTS]
        if ex["expected"] is None:
            err = 0.0 if all(s.status == "unscored" for s in scores) else float("inf")
        elif any(s.status != "scored" for s in scores):
            err = float("inf")
        else:
            err = max(abs(s.value - b) for s, b in zip(scores, ex["expected"]))
        by_metric[ex["metric"]].append(err)
    return [
        {
            "variant": name,
            "metric": name,
            "cases": len(errs),
            "real_cases": 0,
            "compared": len(errs),
            "left_out": 0,
            "left_out_reasons": {},
            "sources": f"hand-worked {len(errs)}",
            "max_abs_error": max(errs),
            "max_scaled_error": max(errs),
            "worst_case": None,
            "tolerance": WORKED_TOLERANCE,
            "passed": max(errs) <= WORKED_TOLERANCE,
            "reference": "hand-worked examples: Lin 2004 (variant=lin2004) and ROUGE-1.5.5's formulas (variant=rouge155)",
            "reference_version": "-",
            "note": "",
        }
        for name, errs in sorted(by_metric.items())
    ]
