"""ROUGE family (Lin, 2004).

- ``rouge_1``, ``rouge_2``, ``rouge_lsum`` through Google's rouge-score
  (``rouge_scorer.RougeScorer``); ``rouge_l`` lives in :mod:`metric_ops.lexical`.
- ``rouge_w``, ``rouge_s``, ``rouge_su``: rouge-score lacks them; implemented here from
  Lin (2004) and the ROUGE-1.5.5 Perl script's definitions:

  * ROUGE-W: weighted LCS with weighting function f(k) = k**w (w = 1.2, ROUGE-1.5.5's
    ``-w 1.2``); R = f^-1(WLCS / f(m)), P = f^-1(WLCS / f(n)) with m reference and n
    candidate tokens, f^-1(x) = x**(1/w).
  * ROUGE-S: skip-bigrams, i.e. ordered token pairs (i < j) with at most
    ``max_skip`` tokens between them (ROUGE-1.5.5 ``-2 max_skip``; ``None`` or -1 means
    unlimited, Lin's ROUGE-S*); counts are clipped like n-gram counts.
  * ROUGE-SU: ROUGE-S plus unigrams (ROUGE-1.5.5 ``-U``), so a candidate with no
    skip-bigram match still gets credit for its words.

  F is the balanced F-measure (ROUGE-1.5.5's default ``-p 0.5`` / alpha 0.5, the same
  F1 rouge-score reports). Tokens come from rouge-score's tokenizer (lower-cased,
  ``[a-z0-9]`` runs, optional Porter stemming), so every ROUGE variant sees the same
  tokens. With several references the reference with the best F is kept (rouge-score's
  ``score_multi`` rule).

Each metric emits ``<name>_precision``, ``<name>_recall`` and ``<name>_f`` in [0, 1]. A
candidate or reference with no tokens scores 0.0 (no exception), as rouge-score does.
rouge-score's default tokenizer drops everything outside ``[a-z0-9]``: CJK or accented
text may score 0.0 even when identical; ``tokenizer="unicode"`` keeps any Unicode letter
or digit run and splits CJK into characters.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths

TOKENIZERS = ("default", "unicode")
SENTENCE_SPLITS = ("newline", "punctuation")

_CJK = (
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"  # kana, CJK, hangul
)
_UNICODE_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+", re.UNICODE)


class UnicodeTokenizer:
    """A rouge-score tokenizer (``tokenize(text) -> list[str]``) for any script.

    Lower-cases, keeps runs of Unicode letters/digits as tokens and each CJK character as
    its own token; optional Porter stemming of tokens longer than 3 characters (the
    rouge-score rule)."""

    def __init__(self, use_stemmer: bool = False) -> None:
        self.use_stemmer = use_stemmer
        self._stemmer = None
        if use_stemmer:
            from nltk.stem import porter

            self._stemmer = porter.PorterStemmer()

    def tokenize(self, text: str) -> list[str]:
        tokens = _UNICODE_TOKEN.findall(text.lower())
        if self._stemmer is not None:
            tokens = [self._stemmer.stem(t) if len(t) > 3 else t for t in tokens]
        return tokens


def make_tokenizer(tokenizer: str = "default", use_stemmer: bool = False) -> Any:
    """The tokenizer object ROUGE metrics use (``.tokenize(text) -> list[str]``).

    ``"default"``: rouge-score's ``DefaultTokenizer`` (``[a-z0-9]`` runs, lower-cased);
    ``"unicode"``: :class:`UnicodeTokenizer`. Raises ``ValueError`` for other names."""
    if tokenizer == "default":
        from rouge_score import tokenizers

        return tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)
    if tokenizer == "unicode":
        return UnicodeTokenizer(use_stemmer=use_stemmer)
    raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")


def split_sentences(text: str, how: str = "newline") -> str:
    """Text with one sentence per line, as ROUGE-Lsum wants it.

    ``"newline"``: unchanged (rouge-score's rule: sentences are the newline-separated
    lines). ``"punctuation"``: also break after ``.``, ``!`` or ``?`` followed by
    whitespace (a rule that needs no NLTK punkt model, so it works offline)."""
    if how == "newline":
        return text
    if how == "punctuation":
        return "\n".join(s for line in text.split("\n") for s in re.split(r"(?<=[.!?])\s+", line))
    raise ValueError(f"sentence_split must be one of {SENTENCE_SPLITS}, got {how!r}")


def _prf(name: str, precision: float, recall: float, fmeasure: float) -> dict[str, Score]:
    return {
        f"{name}_precision": Score(precision),
        f"{name}_recall": Score(recall),
        f"{name}_f": Score(fmeasure),
    }


def _directions(name: str) -> dict[str, Direction]:
    return {f"{name}_{part}": Direction.MAXIMIZE for part in ("precision", "recall", "f")}


# --------------------------------------------------------------------------- rouge-score


class _RougeScoreBase(Metric):
    """A ROUGE type computed by rouge-score's ``RougeScorer``."""

    abstract = True
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    version = "1"
    libraries = ("rouge-score",)
    rouge_type: str = ""

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default", **extra: Any) -> None:
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, **extra)
        from rouge_score import rouge_scorer

        tok = None if tokenizer == "default" else make_tokenizer(tokenizer, use_stemmer)
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
        self._scorer = rouge_scorer.RougeScorer([self.rouge_type], use_stemmer=use_stemmer, tokenizer=tok)

    def prepare(self, text: str) -> str:
        """Text as handed to rouge-score (identity except for ROUGE-Lsum)."""
        return text

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            refs = [self.prepare(r) for r in sample.references]
            s = self._scorer.score_multi(refs, self.prepare(output))[self.rouge_type]
            results.append(_prf(self.name, s.precision, s.recall, s.fmeasure))
        return results


class Rouge1(_RougeScoreBase):
    """ROUGE-1 (unigram overlap; Lin, 2004) through rouge-score.

    Input: one candidate and >= 1 references; emits ``rouge_1_precision/recall/f`` in
    [0, 1], best-F reference kept. Parameters: ``use_stemmer`` (Porter), ``tokenizer``
    (``default`` = rouge-score's, ``unicode``). No tokens on either side -> 0.0."""

    name = "rouge_1"
    aliases = ("rouge1", "rouge-1")
    score_directions = _directions("rouge_1")
    rouge_type = "rouge1"


class Rouge2(_RougeScoreBase):
    """ROUGE-2 (bigram overlap; Lin, 2004) through rouge-score. Same input, outputs
    (``rouge_2_precision/recall/f``), parameters and empty behaviour as ``rouge_1``."""

    name = "rouge_2"
    aliases = ("rouge2", "rouge-2")
    score_directions = _directions("rouge_2")
    rouge_type = "rouge2"


class RougeLsum(_RougeScoreBase):
    """ROUGE-Lsum (summary-level LCS over sentences, union LCS; Lin, 2004) through
    rouge-score's ``rougeLsum``.

    Sentences are the newline-separated lines of each text (rouge-score's rule). With
    ``sentence_split="punctuation"`` the text is first broken after ``.``/``!``/``?``
    followed by whitespace (see :func:`split_sentences`); the default ``"newline"`` leaves
    text as given, so single-line texts score as ROUGE-L. Emits
    ``rouge_lsum_precision/recall/f`` in [0, 1]; empty text -> 0.0."""

    name = "rouge_lsum"
    aliases = ("rougeLsum", "rouge-lsum")
    score_directions = _directions("rouge_lsum")
    rouge_type = "rougeLsum"

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default", sentence_split: str = "newline") -> None:
        if sentence_split not in SENTENCE_SPLITS:
            raise ValueError(f"sentence_split must be one of {SENTENCE_SPLITS}, got {sentence_split!r}")
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, sentence_split=sentence_split)

    def prepare(self, text: str) -> str:
        return split_sentences(text, self.params["sentence_split"])


# --------------------------------------------------------------------------- ROUGE-W/S/SU


def fmeasure(precision: float, recall: float) -> float:
    """Balanced F-measure (rouge-score's ``scoring.fmeasure``); 0.0 when both are 0."""
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def wlcs(reference: Sequence[str], candidate: Sequence[str], weight: float = 1.2) -> float:
    """Weighted longest common subsequence score of Lin (2004), Section 3.2, with
    f(k) = k**weight: a run of k consecutive matches earns f(k), so consecutive matches
    beat scattered ones. Dynamic programme over (i, j) with c (score) and w (length of the
    consecutive run ending at i, j), as in ROUGE-1.5.5's ``wlcs``. Returns 0.0 when either
    side is empty."""
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


def rouge_w_prf(reference: Sequence[str], candidate: Sequence[str], weight: float = 1.2) -> tuple[float, float, float]:
    """ROUGE-W (precision, recall, F) of token lists: R = (WLCS/f(m))**(1/w),
    P = (WLCS/f(n))**(1/w); all 0.0 when either side is empty."""
    if not reference or not candidate:
        return 0.0, 0.0, 0.0
    score = wlcs(reference, candidate, weight)
    recall = (score / len(reference) ** weight) ** (1.0 / weight)
    precision = (score / len(candidate) ** weight) ** (1.0 / weight)
    return precision, recall, fmeasure(precision, recall)


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


def rouge_s_prf(
    reference: Sequence[str], candidate: Sequence[str], max_skip: int | None = 4, unigrams: bool = False
) -> tuple[float, float, float]:
    """ROUGE-S (``unigrams=False``) or ROUGE-SU (``unigrams=True``) precision, recall, F
    of token lists: clipped skip-bigram (+ unigram) matches over the candidate's and
    the reference's totals. 0.0 when a side has no units."""
    ref = skip_bigrams(reference, max_skip)
    cand = skip_bigrams(candidate, max_skip)
    if unigrams:
        ref.update(Counter((t,) for t in reference))
        cand.update(Counter((t,) for t in candidate))
    ref_total, cand_total = sum(ref.values()), sum(cand.values())
    if ref_total == 0 or cand_total == 0:
        return 0.0, 0.0, 0.0
    hits = sum(min(c, ref[k]) for k, c in cand.items() if k in ref)
    precision, recall = hits / cand_total, hits / ref_total
    return precision, recall, fmeasure(precision, recall)


class _OwnRougeBase(Metric):
    """ROUGE variants implemented here (no Python reference library exists)."""

    abstract = True
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    version = "1"
    libraries = ("rouge-score",)  # its tokenizer and stemmer

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default", **extra: Any) -> None:
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, **extra)
        self._tok = make_tokenizer(tokenizer, use_stemmer)

    def prf(self, reference: list[str], candidate: list[str]) -> tuple[float, float, float]:
        raise NotImplementedError

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            cand = self._tok.tokenize(output)
            best = max((self.prf(self._tok.tokenize(r), cand) for r in sample.references), key=lambda t: t[2])
            results.append(_prf(self.name, *best))
        return results


class RougeW(_OwnRougeBase):
    """ROUGE-W: weighted LCS (Lin, 2004, Section 3.2; ROUGE-1.5.5 ``-w``), f(k)=k**weight.

    Input: one candidate and >= 1 references; emits ``rouge_w_precision/recall/f`` in
    [0, 1] (best-F reference kept). Parameters: ``weight`` (1.2, ROUGE-1.5.5's usual
    setting), ``use_stemmer``, ``tokenizer``. Empty side -> 0.0. No Python reference
    library: tested on hand-worked examples."""

    name = "rouge_w"
    aliases = ("rougeW", "rouge-w")
    score_directions = _directions("rouge_w")

    def __init__(self, weight: float = 1.2, use_stemmer: bool = False, tokenizer: str = "default") -> None:
        if not weight > 1.0:
            raise ValueError(f"ROUGE-W weight must be > 1 (f(k)=k**weight rewards runs), got {weight!r}")
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, weight=float(weight))

    def prf(self, reference: list[str], candidate: list[str]) -> tuple[float, float, float]:
        return rouge_w_prf(reference, candidate, self.params["weight"])


class RougeS(_OwnRougeBase):
    """ROUGE-S: skip-bigram co-occurrence (Lin, 2004, Section 5; ROUGE-1.5.5 ``-2``).

    Input: one candidate and >= 1 references; emits ``rouge_s_precision/recall/f`` in
    [0, 1]. Parameter ``max_skip`` (4 = ROUGE-S4, the usual DUC setting; -1 = unlimited,
    ROUGE-S*), ``use_stemmer``, ``tokenizer``. A text with fewer than two tokens has no
    skip-bigram -> 0.0. No Python reference library: tested on hand-worked examples."""

    name = "rouge_s"
    aliases = ("rougeS", "rouge-s")
    score_directions = _directions("rouge_s")
    unigrams = False

    def __init__(self, max_skip: int = 4, use_stemmer: bool = False, tokenizer: str = "default") -> None:
        if not isinstance(max_skip, int):
            raise ValueError(f"max_skip must be an integer (-1 for unlimited), got {max_skip!r}")
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, max_skip=max_skip)

    def prf(self, reference: list[str], candidate: list[str]) -> tuple[float, float, float]:
        return rouge_s_prf(reference, candidate, self.params["max_skip"], unigrams=self.unigrams)


class RougeSU(RougeS):
    """ROUGE-SU: ROUGE-S plus unigram co-occurrence (Lin, 2004; ROUGE-1.5.5 ``-U``).

    Same input and parameters as ``rouge_s``; emits ``rouge_su_precision/recall/f`` in
    [0, 1]. A one-token text still counts its unigram; empty text -> 0.0. No Python
    reference library: tested on hand-worked examples."""

    name = "rouge_su"
    aliases = ("rougeSU", "rouge-su")
    score_directions = _directions("rouge_su")
    unigrams = True
