"""ROUGE-W, ROUGE-S and ROUGE-SU counts in two variants (issue 15, kind 8).

``variant="rouge155"`` (the default of facetlake's metrics) reproduces the ROUGE-1.5.5 Perl
script (Lin, 2004; ``ROUGE-1.5.5.pl``, the program behind published ROUGE-W/S/SU figures),
checked against its output on 412 pairs (``pipelines/crossval/rouge155_known_answers.json``).
``variant="lin2004"`` keeps the formulas of Lin's (2004) paper. They differ in three places:

1. ROUGE-W recall. 1.5.5 applies the weighting function twice to the reference length:
   R = f^-1(WLCS / f(f(m))) (``computeWLCSScore`` adds ``wlcsWeight($lcsBase)`` where
   ``$lcsBase`` is already f(m)); the paper has R = f^-1(WLCS / f(m)). Precision is
   f^-1(WLCS / f(n)) in both. With f(k) = k**1.2, ``a b`` vs ``a b`` has R 0.87055 in 1.5.5.
2. ROUGE-W hits. 1.5.5 does not use the dynamic programme's value: it traces one LCS path
   back (``markLCS``), marks the matched reference positions, and scores each run of
   consecutive marked reference positions of length k as f(k), skipping a marked token
   whose unigram count (reference or candidate) is already used up. The paper uses the DP
   value c(m, n). 1.5.5 also works per reference sentence (one per line), a reference
   position being marked by any candidate sentence.
3. ROUGE-SU units. 1.5.5's ``createSkipBigram`` loops ``for($i=0;$i<$#tokens;$i++)``, so
   the text's last token never adds its unigram: ``the cat`` has the units {the, the cat},
   and a one-token text has none (``cat`` vs reference ``the cat`` scores 0/0/0). The
   paper counts every unigram.

With several references, ``rouge155`` pools hits and counts over the references as 1.5.5
does with ``-f A`` (precision's denominator repeats the candidate count once per
reference); ``lin2004`` keeps the reference with the best F (rouge-score's rule).
ROUGE-S (skip-bigrams without unigrams) is the same in both variants for one reference.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

VARIANTS = ("rouge155", "lin2004")


def check_variant(variant: str) -> str:
    """``variant`` when known; ``ValueError`` naming the choices otherwise."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS} (rouge155 = the ROUGE-1.5.5 Perl script, lin2004 = the paper's formulas), got {variant!r}")
    return variant


def fmeasure(precision: float, recall: float) -> float:
    """Balanced F-measure (rouge-score's ``scoring.fmeasure``, ROUGE-1.5.5 ``-p 0.5``); 0.0
    when both are 0."""
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


# --------------------------------------------------------------------------- ROUGE-W


def wlcs(reference: Sequence[str], candidate: Sequence[str], weight: float = 1.2) -> float:
    """Weighted LCS score of Lin (2004), Section 3.2, with f(k) = k**weight: the dynamic
    programme's value c(m, n), where a run of k consecutive matches earns f(k). Returns 0.0
    when either side is empty."""
    m, n = len(reference), len(candidate)
    if m == 0 or n == 0:
        return 0.0
    prev_c = [0.0] * (n + 1)
    prev_w = [0] * (n + 1)
    for i in range(1, m + 1):
        cur_c = [0.0] * (n + 1)
        cur_w = [0] * (n + 1)
        r = reference[i - 1]
        for j in range(1, n + 1):
            if r == candidate[j - 1]:
                k = prev_w[j - 1]
                cur_c[j] = prev_c[j - 1] + (k + 1) ** weight - k**weight
                cur_w[j] = k + 1
            elif prev_c[j] > cur_c[j - 1]:
                cur_c[j] = prev_c[j]
            else:
                cur_c[j] = cur_c[j - 1]
        prev_c, prev_w = cur_c, cur_w
    return prev_c[n]


def _mark_wlcs(model: Sequence[str], peer: Sequence[str], mask: list[bool], weight: float) -> None:
    """ROUGE-1.5.5 ``wlcs_inner`` + ``markLCS``: the WLCS dynamic programme (ties go up),
    then one traced path from (m, n); sets ``mask[i]`` for each matched model position."""
    m, n = len(model), len(peer)
    if m == 0 or n == 0:
        return
    c = [[0.0] * (n + 1) for _ in range(m + 1)]
    run = [[0] * (n + 1) for _ in range(m + 1)]
    move = [bytearray(n + 1) for _ in range(m + 1)]  # 1 diagonal, 2 up, 3 left
    for i in range(1, m + 1):
        tok, ci, cu, ri, ru, mi = model[i - 1], c[i], c[i - 1], run[i], run[i - 1], move[i]
        for j in range(1, n + 1):
            if tok == peer[j - 1]:
                k = ru[j - 1]
                ci[j] = cu[j - 1] + (k + 1) ** weight - k**weight
                mi[j], ri[j] = 1, k + 1
            elif cu[j] >= ci[j - 1]:
                ci[j], mi[j] = cu[j], 2
            else:
                ci[j], mi[j] = ci[j - 1], 3
    i, j = m, n
    while i and j:
        step = move[i][j]
        if step == 1:
            i, j = i - 1, j - 1
            mask[i] = True
        elif step == 2:
            i -= 1
        else:
            j -= 1


def wlcs_hits_155(
    model_sentences: Sequence[Sequence[str]], peer_sentences: Sequence[Sequence[str]], weight: float = 1.2
) -> tuple[float, float]:
    """ROUGE-1.5.5's ``wlcs``: (hit, base) for one reference (model) against a candidate
    (peer), both given as sentences of tokens. ``base`` is sum f(len(sentence)) over the
    model's sentences; ``hit`` sums f(k) over runs of k consecutive marked model positions,
    a marked token counting only while its unigram count is left on both sides."""
    f = lambda k: k**weight  # noqa: E731
    model_counts = Counter(t for s in model_sentences for t in s)
    peer_counts = Counter(t for s in peer_sentences for t in s)
    hit, base = 0.0, 0.0
    for sent in model_sentences:
        mask = [False] * len(sent)
        base += f(len(sent))
        for peer in peer_sentences:
            _mark_wlcs(sent, peer, mask, weight)
        run = 0
        for j, tok in enumerate(sent):
            if mask[j] and model_counts[tok] > 0 and peer_counts[tok] > 0:
                run += 1
                if j + 1 == len(sent) or not mask[j + 1]:
                    hit += f(run)
                    run = 0
                model_counts[tok] -= 1
                peer_counts[tok] -= 1
    return hit, base


def rouge_w_prf(reference: Sequence[str], candidate: Sequence[str], weight: float = 1.2) -> tuple[float, float, float]:
    """Lin (2004) ROUGE-W of token lists: R = (c/f(m))**(1/w), P = (c/f(n))**(1/w) with c
    the DP's WLCS value; all 0.0 when either side is empty."""
    if not reference or not candidate:
        return 0.0, 0.0, 0.0
    score = wlcs(reference, candidate, weight)
    recall = (score / len(reference) ** weight) ** (1.0 / weight)
    precision = (score / len(candidate) ** weight) ** (1.0 / weight)
    return precision, recall, fmeasure(precision, recall)


def rouge_w_155(
    references: Sequence[Sequence[Sequence[str]]], candidate: Sequence[Sequence[str]], weight: float = 1.2
) -> tuple[float, float, float]:
    """ROUGE-1.5.5 ROUGE-W (``computeWLCSScore``, ``-f A``) of a candidate against one or
    more references, each a list of sentences of tokens: R = f^-1(sum hit / sum f(base)),
    P = f^-1(sum hit / (#refs * f(n))). Zeros where a denominator is 0 (as 1.5.5 prints)."""
    f = lambda k: k**weight  # noqa: E731
    n = sum(len(s) for s in candidate)
    hits = count = count_p = 0.0
    for ref in references:
        hit, base = wlcs_hits_155(ref, candidate, weight)
        hits += hit
        count += f(base)
        count_p += f(n)
    recall = (hits / count) ** (1 / weight) if count else 0.0
    precision = (hits / count_p) ** (1 / weight) if count_p else 0.0
    return precision, recall, fmeasure(precision, recall)


# --------------------------------------------------------------------------- ROUGE-S / SU


def skip_bigrams(tokens: Sequence[str], max_skip: int | None = 4) -> Counter:
    """Counts of skip-bigrams (tokens[i], tokens[j]), i < j, with at most ``max_skip``
    tokens between them (``j - i - 1 <= max_skip``); ``None`` or a negative value means
    any gap (Lin's ROUGE-S*, C(n, 2) pairs)."""
    counts: Counter = Counter()
    n = len(tokens)
    unlimited = max_skip is None or max_skip < 0
    for i in range(n):
        stop = n if unlimited else min(n, i + max_skip + 2)
        a = tokens[i]
        for j in range(i + 1, stop):
            counts[(a, tokens[j])] += 1
    return counts


def s_units(tokens: Sequence[str], max_skip: int | None = 4, unigrams: bool = False, variant: str = "rouge155") -> Counter:
    """The units ROUGE-S (``unigrams=False``) or ROUGE-SU counts for one text: its
    skip-bigrams, plus for SU the unigrams of every token (``lin2004``) or of every token
    but the last (``rouge155``, as ``createSkipBigram`` does)."""
    units = skip_bigrams(tokens, max_skip)
    if unigrams:
        kept = tokens if variant == "lin2004" else tokens[:-1]
        units.update(Counter((t,) for t in kept))
    return units


def clipped_hits(reference: Counter, candidate: Counter) -> int:
    """Matches of candidate units in the reference, each clipped to the reference count."""
    return sum(min(c, reference[k]) for k, c in candidate.items() if k in reference)


def rouge_s_prf(
    reference: Sequence[str], candidate: Sequence[str], max_skip: int | None = 4, unigrams: bool = False, variant: str = "lin2004"
) -> tuple[float, float, float]:
    """ROUGE-S or ROUGE-SU (precision, recall, F) of one reference and a candidate (token
    lists): clipped unit matches over the candidate's and the reference's unit totals;
    0.0 where a total is 0 (as 1.5.5 prints)."""
    return rouge_s_pooled([reference], candidate, max_skip, unigrams, variant)


def rouge_s_pooled(
    references: Sequence[Sequence[str]], candidate: Sequence[str], max_skip: int | None = 4, unigrams: bool = False, variant: str = "rouge155"
) -> tuple[float, float, float]:
    """ROUGE-1.5.5 ``computeSkipBigramScore`` with ``-f A``: hits and unit counts summed
    over the references (the candidate's count once per reference)."""
    cand = s_units(candidate, max_skip, unigrams, variant)
    cand_total = sum(cand.values())
    hits = ref_total = pooled_cand = 0
    for r in references:
        ref = s_units(r, max_skip, unigrams, variant)
        hits += clipped_hits(ref, cand)
        ref_total += sum(ref.values())
        pooled_cand += cand_total
    recall = hits / ref_total if ref_total else 0.0
    precision = hits / pooled_cand if pooled_cand else 0.0
    return precision, recall, fmeasure(precision, recall)
