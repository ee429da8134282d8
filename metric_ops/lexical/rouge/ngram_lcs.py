"""ROUGE-N, ROUGE-L and ROUGE-Lsum by rouge-score's rules, without importing it.

rouge-score (Google, PyPI ``rouge-score``) imports NLTK at module level, and importing
NLTK costs 1-2 s on this project's machines, more than scoring a thousand pairs. These
functions follow rouge-score's ``rouge_scorer`` exactly (same tokenisation, counting,
tie-breaking and floating-point operations), so their values equal rouge-score's bit for
bit; ``tests/test_rouge.py`` and the cross-validation (``pipelines/crossval``) check that
on real data. NLTK is imported only for the Porter stemmer, and only when stemming is on.

Rules (Lin, 2004, as rouge-score implements them):

- tokens: :class:`DefaultTokenizer` (lower-case, every run of characters outside
  ``[a-z0-9]`` separates tokens; Porter-stemmed when longer than 3 characters);
- ROUGE-N: clipped n-gram overlap; P = overlap / max(#candidate n-grams, 1),
  R = overlap / max(#reference n-grams, 1);
- ROUGE-L: LCS length over candidate length (P) and reference length (R); 0/0/0 when a
  side has no token;
- ROUGE-Lsum: summary-level union LCS over newline-separated sentences, each token hit
  counted at most as often as it occurs on both sides;
- F = 2PR / (P + R), 0.0 when P + R = 0; with several references the first reference
  with the highest F is kept (``score_multi``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, NamedTuple, Sequence

_NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
_SPACES = re.compile(r"\s+")
_VALID = re.compile(r"^[a-z0-9]+$")


class PRF(NamedTuple):
    """Precision, recall and F of one comparison, each in [0, 1] (rouge-score's ``Score``)."""

    precision: float
    recall: float
    fmeasure: float


def fmeasure(precision: float, recall: float) -> float:
    """Balanced F-measure, 0.0 when both are 0 (rouge-score's ``scoring.fmeasure``)."""
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


class DefaultTokenizer:
    """rouge-score's default tokenizer: lower-case, characters outside ``[a-z0-9]`` become
    spaces, split, optional Porter stemming (NLTK's ``PorterStemmer``) of tokens longer than
    3 characters, then only ``[a-z0-9]+`` tokens are kept. ``tokenize(text) -> list[str]``."""

    def __init__(self, use_stemmer: bool = False) -> None:
        self._stemmer = None
        if use_stemmer:
            from nltk.stem import porter

            self._stemmer = porter.PorterStemmer()

    def tokenize(self, text: str) -> list[str]:
        tokens = _SPACES.split(_NON_ALPHANUM.sub(" ", text.lower()))
        if self._stemmer is not None:
            tokens = [self._stemmer.stem(t) if len(t) > 3 else t for t in tokens]
        return [t for t in tokens if _VALID.match(t)]


def ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    """Counter of the n-grams (tuples) of ``tokens``; empty when there are fewer than n."""
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def score_ngrams(reference: Counter, candidate: Counter) -> PRF:
    """ROUGE-N from the two sides' n-gram counts (clipped overlap)."""
    overlap = sum(min(count, candidate[gram]) for gram, count in reference.items())
    precision = overlap / max(sum(candidate.values()), 1)
    recall = overlap / max(sum(reference.values()), 1)
    return PRF(precision, recall, fmeasure(precision, recall))


def lcs_length(reference: Sequence[str], candidate: Sequence[str]) -> int:
    """Length of a longest common subsequence (two-row dynamic programme, O(len*len))."""
    previous = [0] * (len(candidate) + 1)
    for token in reference:
        current = [0]
        for j, other in enumerate(candidate, 1):
            current.append(previous[j - 1] + 1 if token == other else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def score_lcs(reference: Sequence[str], candidate: Sequence[str]) -> PRF:
    """Sentence-level ROUGE-L of two token lists; 0/0/0 when either is empty."""
    if not reference or not candidate:
        return PRF(0, 0, 0)
    lcs = lcs_length(reference, candidate)
    precision = lcs / len(candidate)
    recall = lcs / len(reference)
    return PRF(precision, recall, fmeasure(precision, recall))


def _lcs_indices(reference: Sequence[str], candidate: Sequence[str]) -> list[int]:
    """Reference indices of the LCS rouge-score's backtrack reads out (same tie rule)."""
    rows, cols = len(reference), len(candidate)
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        for j in range(1, cols + 1):
            if reference[i - 1] == candidate[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    i, j, found = rows, cols, []
    while i > 0 and j > 0:
        if reference[i - 1] == candidate[j - 1]:
            found.append(i - 1)
            i -= 1
            j -= 1
        elif table[i][j - 1] > table[i - 1][j]:
            j -= 1
        else:
            i -= 1
    return found[::-1]


def score_summary_lcs(reference: Sequence[Sequence[str]], candidate: Sequence[Sequence[str]]) -> PRF:
    """Summary-level ROUGE-Lsum of tokenised sentences (union LCS per reference sentence)."""
    m = sum(map(len, reference))
    n = sum(map(len, candidate))
    if not reference or not candidate or not m or not n:
        return PRF(0, 0, 0)
    left_r: Counter = Counter()
    left_c: Counter = Counter()
    for sentence in reference:
        left_r.update(sentence)
    for sentence in candidate:
        left_c.update(sentence)
    hits = 0
    for sentence in reference:
        union = sorted(set().union(*(_lcs_indices(sentence, c) for c in candidate)))
        for token in (sentence[i] for i in union):
            if left_c[token] > 0 and left_r[token] > 0:
                hits += 1
                left_c[token] -= 1
                left_r[token] -= 1
    recall = hits / m
    precision = hits / n
    return PRF(precision, recall, fmeasure(precision, recall))


class RougeScorer:
    """One ROUGE type (``rouge1`` ... ``rouge9``, ``rougeL``, ``rougeLsum``) with a given
    tokenizer (an object with ``tokenize(text) -> list[str]``): rouge-score's
    ``RougeScorer([rouge_type], tokenizer=...)`` for a single type.

    Raises ``ValueError`` for another type name or n <= 0."""

    def __init__(self, rouge_type: str, tokenizer: Any) -> None:
        self.rouge_type = rouge_type
        self._tok = tokenizer
        self._n = 0
        if rouge_type not in ("rougeL", "rougeLsum"):
            if not re.match(r"rouge[0-9]$", rouge_type) or int(rouge_type[5:]) <= 0:
                raise ValueError(f"invalid rouge type {rouge_type!r}: rouge1..rouge9, rougeL or rougeLsum")
            self._n = int(rouge_type[5:])

    def score(self, reference: str, candidate: str) -> PRF:
        """P, R, F of ``candidate`` against one ``reference`` text."""
        if self.rouge_type == "rougeLsum":
            sentences = lambda text: [self._tok.tokenize(s) for s in text.split("\n") if len(s)]  # noqa: E731
            return score_summary_lcs(sentences(reference), sentences(candidate))
        ref, cand = self._tok.tokenize(reference), self._tok.tokenize(candidate)
        if self.rouge_type == "rougeL":
            return score_lcs(ref, cand)
        return score_ngrams(ngram_counts(ref, self._n), ngram_counts(cand, self._n))

    def score_multi(self, references: Sequence[str], candidate: str) -> PRF:
        """The score against the first reference with the highest F (rouge-score's
        ``score_multi``, which takes numpy's argmax). ``references`` must be non-empty."""
        best = None
        for reference in references:
            s = self.score(reference, candidate)
            if best is None or s.fmeasure > best.fmeasure:
                best = s
        if best is None:
            raise ValueError("score_multi needs at least one reference")
        return best
