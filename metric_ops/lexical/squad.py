"""Exact match, token F1 and quasi-exact match under the SQuAD v2 evaluation script's rules.

All are ``baseline_grounding``, ``local``, and take the maximum over a sample's gold
answers, as the SQuAD v2 script does. BLEU is in :mod:`metric_ops.lexical.bleu`, chrF in
:mod:`metric_ops.lexical.chrf`, ROUGE in :mod:`metric_ops.lexical.rouge`.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Any, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths

# --------------------------------------------------------------------------- SQuAD v2

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def squad_normalize(text: str) -> str:
    """SQuAD v2 answer normalisation (official evaluate-v2.0.py ``normalize_answer``):
    lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_tokens(text: str) -> list[str]:
    """Tokens of the normalised answer (``get_tokens`` in evaluate-v2.0.py); empty text -> []."""
    return squad_normalize(text).split() if text else []


def squad_exact(gold: str, pred: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0 (``compute_exact``)."""
    return float(squad_normalize(gold) == squad_normalize(pred))


def squad_f1(gold: str, pred: str) -> float:
    """Token-overlap F1 (``compute_f1`` of evaluate-v2.0.py); both empty -> 1.0, one empty -> 0.0."""
    gold_toks, pred_toks = squad_tokens(gold), squad_tokens(pred)
    if not gold_toks or not pred_toks:
        return float(gold_toks == pred_toks)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_toks)
    recall = same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def _gold_answers(sample: Sample) -> list[str]:
    # evaluate-v2.0.py: answers that normalise to nothing are dropped; none left -> [""]
    golds = [a for a in sample.references if squad_normalize(a)]
    return golds or [""]


class _SquadMetric(Metric):
    """Shared code of the SQuAD v2 answer metrics: ``_compare(gold, pred)`` in [0, 1],
    maximum over the sample's gold answers (``_gold_answers``)."""

    abstract = True
    value_range = (0.0, 1.0)
    # an empty gold answer is SQuAD v2's "no answer" (the runner keeps it; see runner.py)
    blank_reference_is_answer = True
    _compare: Any
    parallel_safe = True
    parallel_min_samples = 20_000  # string comparisons: cheap per sample

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [
            {self.name: Score(max(self._compare(g, o) for g in _gold_answers(s)))}
            for s, o in zip(samples, outputs)
        ]


class ExactMatch(_SquadMetric):
    """Exact match with SQuAD v2 normalisation (Rajpurkar et al., 2018; official
    ``evaluate-v2.0.py``).

    Input: one output string and >= 1 reference per sample (a reference of ``""`` marks
    an unanswerable question: an empty output then matches). Output: 1.0 or 0.0, the
    maximum over references. Empty output vs non-empty gold -> 0.0. A sample with no
    references at all is ``unscored``.
    """

    name = "exact_match"
    binary = True
    aliases = ("em", "exact")
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"

    _compare = staticmethod(squad_exact)


class TokenF1(_SquadMetric):
    """Token-overlap F1 with SQuAD v2 normalisation (official ``evaluate-v2.0.py``).

    Input: one output string and >= 1 reference per sample. Output in [0, 1], the maximum
    over references; both empty -> 1.0, exactly one empty -> 0.0. No references ->
    ``unscored``.
    """

    name = "token_f1"
    aliases = ("f1", "squad_f1")
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"

    _compare = staticmethod(squad_f1)


def squad_contains(gold: str, pred: str) -> float:
    """1.0 when the SQuAD-normalised gold answer occurs as a contiguous run of whole tokens
    in the SQuAD-normalised prediction, else 0.0. Both normalise to nothing -> 1.0 (SQuAD
    v2's no-answer rule); exactly one empty -> 0.0."""
    gold_toks, pred_toks = squad_tokens(gold), squad_tokens(pred)
    if not gold_toks or not pred_toks:
        return float(gold_toks == pred_toks)
    k = len(gold_toks)
    return float(any(pred_toks[i : i + k] == gold_toks for i in range(len(pred_toks) - k + 1)))


class QuasiExactMatch(_SquadMetric):
    """Quasi-exact match: the gold answer appears, as whole tokens, in the output, both
    after SQuAD v2 normalisation (lower-case, ASCII punctuation and a/an/the removed,
    whitespace collapsed; ``evaluate-v2.0.py``'s ``normalize_answer``).

    ``exact_match`` asks for equality of the normalised strings, which a free-form answer
    ("It is Paris, the capital.") rarely meets; quasi-exact match relaxes equality to
    token-aligned containment, the "answer contained" check used for long-form QA (there
    is no single standard for "quasi": this is the one facetlake uses, documented in
    docs/metrics.md). Input: one output and >= 1 references; output 1.0 or 0.0, max over
    gold answers; an empty gold (unanswerable) matches only an empty output; no
    references -> ``unscored``.
    """

    name = "quasi_exact_match"
    binary = True
    aliases = ("qem", "quasi_em")
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"

    _compare = staticmethod(squad_contains)
