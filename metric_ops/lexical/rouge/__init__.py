"""ROUGE family (Lin, 2004): ``rouge_1``, ``rouge_2``, ``rouge_l``, ``rouge_lsum``,
``rouge_w``, ``rouge_s``, ``rouge_su``.

- ``rouge_1``, ``rouge_2``, ``rouge_l``, ``rouge_lsum`` by Google's rouge-score rules
  (``rouge_scorer.RougeScorer``; with several references the best-F reference is kept,
  ``score_multi``), computed by :mod:`metric_ops.lexical.rouge.ngram_lcs`, which equals rouge-score
  bit for bit (tested) without importing it (it imports NLTK, 1-2 s). Without stemming, on one-line texts, these equal the ROUGE-1.5.5 Perl
  script's ROUGE-1/2/L (checked on 412 pairs).
- ``rouge_w``, ``rouge_s``, ``rouge_su``: rouge-score lacks them; computed in
  :mod:`metric_ops.lexical.rouge.rouge155`. ``variant="rouge155"`` (default) reproduces the ROUGE-1.5.5
  Perl script, whose numbers published ROUGE-W/S/SU figures are; ``variant="lin2004"`` uses
  the paper's formulas (see :mod:`metric_ops.lexical.rouge.rouge155` for the three differences). The
  variant enters the metric signature.

Every variant takes the same tokenizer options, ``tokenizer`` (``default`` | ``unicode``,
see :mod:`metric_ops.lexical.rouge.text`) and ``use_stemmer`` (Porter, tokens longer than 3
characters). Each metric emits ``<name>_precision``, ``<name>_recall`` and ``<name>_f`` in
[0, 1] (F balanced, ROUGE-1.5.5's ``-p 0.5``).

Nothing to measure is ``unscored`` (never 0.0), with the reason in ``detail["reason"]``:
no reference; a candidate or every reference without a token after tokenisation (e.g. CJK
text under the default tokenizer, an empty or whitespace-only text); and, for n-gram
kinds, a candidate or every reference without a unit of that kind (ROUGE-2: fewer than 2
tokens, so no bigram; ROUGE-S: no skip-bigram). For the rouge-score kinds
``detail["rouge_score"]`` keeps the value rouge-score returns there (0.0). ROUGE-SU
(``rouge155``) is unscored when a side has no token or no reference has a unit; a candidate
of one token has no unit in 1.5.5 and scores 0/0/0 as the script prints.
References without a token or unit are skipped (their number in ``detail["references_skipped"]``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.lexical.rouge.rouge155 import (  # noqa: F401  (re-exported: tests and benchmarks import them from here)
    VARIANTS,
    check_variant,
    fmeasure,
    rouge_s_pooled,
    rouge_s_prf,
    rouge_w_155,
    rouge_w_prf,
    s_units,
    skip_bigrams,
    wlcs,
)
from metric_ops.lexical.rouge.text import (  # noqa: F401
    SENTENCE_SPLITS,
    TOKENIZERS,
    UnicodeTokenizer,
    check_tokenizer,
    make_tokenizer,
    no_tokens_reason,
    split_sentences,
)

PRF = ("precision", "recall", "f")


def _directions(name: str) -> dict[str, Direction]:
    return {f"{name}_{part}": Direction.MAXIMIZE for part in PRF}


class _RougeBase(Metric):
    """Shared tokenisation and ``unscored`` handling of every ROUGE variant.

    A subclass implements :meth:`units` (the countable units of one tokenised text; only
    their number matters) and :meth:`compute` (P, R, F and extra detail for a candidate
    and its usable references)."""

    abstract = True
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    version = "2"
    parallel_safe = True
    libraries = ("rouge-score",)  # the rules (tokenizer, scorer) are rouge-score's, equal bit for bit: its version stays in the signature
    unit_name = "token"

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default", **extra: Any) -> None:
        check_tokenizer(tokenizer)
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, **extra)
        self._tok = make_tokenizer(tokenizer, use_stemmer)
        self.setup()

    def setup(self) -> None:
        """Hook run at the end of ``__init__`` (e.g. to build rouge-score's scorer)."""

    # hooks ------------------------------------------------------------------------
    def prepare(self, text: str) -> str:
        """Text as scored (identity except for ROUGE-Lsum's sentence split)."""
        return text

    def units(self, tokens: list[str]) -> int:
        """Number of countable units in one tokenised text (default: its tokens)."""
        return len(tokens)

    def reference_has_units(self, tokens: list[str]) -> bool:
        return self.units(tokens) > 0

    def candidate_has_units(self, tokens: list[str]) -> bool:
        return self.units(tokens) > 0

    def compute(self, references: list[str], candidate: str) -> tuple[float, float, float, dict[str, Any]]:
        raise NotImplementedError

    def library_value(self, references: list[str], candidate: str) -> dict[str, Any]:
        """Extra ``unscored`` detail: what the reference library returns for this case."""
        return {}

    # driver -----------------------------------------------------------------------
    def _unscored(self, reason: str, references: list[str], candidate: str, **detail: Any) -> dict[str, Score]:
        extra = self.library_value(references, candidate) if references else {}
        out = {}
        for part in PRF:
            d = dict(detail)
            if extra:
                d.update({key: value[part] for key, value in extra.items()})
            out[f"{self.name}_{part}"] = Score.unscored(reason, **d)
        return out

    def score_one(self, references: Sequence[str], output: str) -> dict[str, Score]:
        """The three scores of one candidate against its references."""
        refs = [self.prepare(r) for r in references]
        cand = self.prepare(output)
        if not refs:
            return self._unscored("the sample has no reference", refs, cand)
        cand_toks = self._tok.tokenize(cand)
        ref_toks = [self._tok.tokenize(r) for r in refs]
        empty = [side for side, ok in (("candidate", bool(cand_toks)), ("reference", any(ref_toks))) if not ok]
        if empty:
            return self._unscored(no_tokens_reason(self.params["tokenizer"], " and the ".join(empty)), refs, cand)
        usable = [r for r, t in zip(refs, ref_toks) if t and self.reference_has_units(t)]
        if not self.candidate_has_units(cand_toks):
            return self._unscored(f"the candidate has no {self.unit_name} ({len(cand_toks)} token(s))", refs, cand)
        if not usable:
            return self._unscored(f"no reference has a {self.unit_name}", refs, cand)
        precision, recall, f, detail = self.compute(usable, cand)
        skipped = len(refs) - len(usable)
        if skipped:
            detail = {**detail, "references_skipped": skipped}
        return {f"{self.name}_{part}": Score(value, detail=dict(detail)) for part, value in zip(PRF, (precision, recall, f))}

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        return [self.score_one(sample.references, output) for sample, output in zip(samples, outputs)]


# --------------------------------------------------------------------------- rouge-score


class _RougeScoreBase(_RougeBase):
    """A ROUGE type computed by rouge-score's ``RougeScorer`` with facetlake's tokenizer."""

    abstract = True
    rouge_type: str = ""

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default") -> None:
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer)

    def setup(self) -> None:
        from metric_ops.lexical.rouge.ngram_lcs import RougeScorer  # rouge-score's rules; importing rouge-score imports NLTK

        self._scorer = RougeScorer(self.rouge_type, self._tok)

    def _score(self, references: list[str], candidate: str) -> Any:
        return self._scorer.score_multi(references, candidate)

    def compute(self, references: list[str], candidate: str) -> tuple[float, float, float, dict[str, Any]]:
        s = self._score(references, candidate)
        return s.precision, s.recall, s.fmeasure, {}

    def library_value(self, references: list[str], candidate: str) -> dict[str, Any]:
        s = self._score(references, candidate)
        return {"rouge_score": {"precision": float(s.precision), "recall": float(s.recall), "f": float(s.fmeasure)}}


class Rouge1(_RougeScoreBase):
    """ROUGE-1 (unigram overlap; Lin, 2004) through rouge-score.

    Input: one candidate and >= 1 references; emits ``rouge_1_precision/recall/f`` in
    [0, 1], best-F reference kept. Parameters: ``use_stemmer`` (Porter), ``tokenizer``
    (``default`` = rouge-score's, ``unicode``). No token on a side -> ``unscored``."""

    name = "rouge_1"
    aliases = ("rouge1", "rouge-1")
    score_directions = _directions("rouge_1")
    rouge_type = "rouge1"


class Rouge2(_RougeScoreBase):
    """ROUGE-2 (bigram overlap; Lin, 2004) through rouge-score. Same input, parameters
    and outputs (``rouge_2_precision/recall/f``) as ``rouge_1``; a candidate or every
    reference with fewer than 2 tokens has no bigram -> ``unscored``."""

    name = "rouge_2"
    aliases = ("rouge2", "rouge-2")
    score_directions = _directions("rouge_2")
    rouge_type = "rouge2"
    unit_name = "bigram"

    def units(self, tokens: list[str]) -> int:
        return max(0, len(tokens) - 1)


class RougeL(_RougeScoreBase):
    """ROUGE-L (sentence-level LCS; Lin, 2004) through rouge-score's ``rougeL``.

    Input: one output and >= 1 references per sample. Emits ``rouge_l_precision``,
    ``rouge_l_recall`` and ``rouge_l_f`` in [0, 1]; with several references the reference
    with the best F is kept (``score_multi``). Parameters ``use_stemmer`` (Porter) and
    ``tokenizer`` (``default`` | ``unicode``). A side with no token (e.g. CJK text under
    the default tokenizer) -> ``unscored``, rouge-score's 0.0 kept in
    ``detail["rouge_score"]``."""

    name = "rouge_l"
    aliases = ("rougeL", "rouge-l")
    score_directions = _directions("rouge_l")
    rouge_type = "rougeL"


class RougeLsum(_RougeScoreBase):
    """ROUGE-Lsum (summary-level LCS over sentences, union LCS; Lin, 2004) through
    rouge-score's ``rougeLsum``.

    Sentences are the newline-separated lines of each text (rouge-score's rule). With
    ``sentence_split="punctuation"`` the text is first broken after ``.``/``!``/``?``
    followed by whitespace (see :func:`split_sentences`); the default ``"newline"`` leaves
    text as given, so single-line texts score as ROUGE-L. Emits
    ``rouge_lsum_precision/recall/f`` in [0, 1]; no token on a side -> ``unscored``."""

    name = "rouge_lsum"
    aliases = ("rougeLsum", "rouge-lsum")
    score_directions = _directions("rouge_lsum")
    rouge_type = "rougeLsum"

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default", sentence_split: str = "newline") -> None:
        if sentence_split not in SENTENCE_SPLITS:
            raise ValueError(f"sentence_split must be one of {SENTENCE_SPLITS}, got {sentence_split!r}")
        _RougeBase.__init__(self, use_stemmer=use_stemmer, tokenizer=tokenizer, sentence_split=sentence_split)

    def prepare(self, text: str) -> str:
        return split_sentences(text, self.params["sentence_split"])


# --------------------------------------------------------------------------- ROUGE-W/S/SU


class _OwnRougeBase(_RougeBase):
    """ROUGE-W/S/SU (no Python reference library): ``variant`` = ``rouge155`` | ``lin2004``."""

    abstract = True

    def __init__(self, use_stemmer: bool = False, tokenizer: str = "default", variant: str = "rouge155", **extra: Any) -> None:
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, variant=check_variant(variant), **extra)

    def best_f(self, references: list[str], candidate: str, prf: Callable[[list[str], list[str]], tuple[float, float, float]]) -> tuple[float, float, float]:
        """lin2004's multi-reference rule: the reference with the best F (rouge-score's)."""
        cand = self._tok.tokenize(candidate)
        return max((prf(self._tok.tokenize(r), cand) for r in references), key=lambda t: t[2])


class RougeW(_OwnRougeBase):
    """ROUGE-W: weighted LCS with f(k) = k**weight (Lin, 2004, Section 3.2; ROUGE-1.5.5 ``-w``).

    Input: one candidate and >= 1 references; emits ``rouge_w_precision/recall/f`` in
    [0, 1]. Parameters: ``weight`` (1.2, the usual ``-w 1.2``), ``variant`` (``rouge155``:
    ROUGE-1.5.5's recall f^-1(WLCS/f(f(m))) and runs along one traced LCS path, per line
    of the reference, references pooled as ``-f A``; ``lin2004``: the paper's
    f^-1(WLCS/f(m)) from the dynamic programme, best-F reference), ``use_stemmer``,
    ``tokenizer``. No token on a side -> ``unscored``. Checked against the Perl script's
    printed values (``pipelines/crossval/rouge155_known_answers.json``)."""

    name = "rouge_w"
    aliases = ("rougeW", "rouge-w")
    score_directions = _directions("rouge_w")

    def __init__(self, weight: float = 1.2, use_stemmer: bool = False, tokenizer: str = "default", variant: str = "rouge155") -> None:
        if not float(weight) > 1.0:
            raise ValueError(f"ROUGE-W weight must be > 1 (f(k)=k**weight rewards runs), got {weight!r}")
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, variant=variant, weight=float(weight))

    def _sentences(self, text: str) -> list[list[str]]:
        return [toks for toks in (self._tok.tokenize(line) for line in text.split("\n")) if toks]

    def compute(self, references: list[str], candidate: str) -> tuple[float, float, float, dict[str, Any]]:
        w = self.params["weight"]
        if self.params["variant"] == "lin2004":
            return (*self.best_f(references, candidate, lambda r, c: rouge_w_prf(r, c, w)), {})
        return (*rouge_w_155([self._sentences(r) for r in references], self._sentences(candidate), w), {})


class RougeS(_OwnRougeBase):
    """ROUGE-S: skip-bigram co-occurrence (Lin, 2004, Section 5; ROUGE-1.5.5 ``-2``).

    Input: one candidate and >= 1 references; emits ``rouge_s_precision/recall/f`` in
    [0, 1]. Parameters: ``max_skip`` (4 = ROUGE-S4, the usual DUC setting; -1 = unlimited,
    ROUGE-S*), ``variant`` (``rouge155``: references pooled as 1.5.5's ``-f A``;
    ``lin2004``: best-F reference; identical for one reference), ``use_stemmer``,
    ``tokenizer``. A candidate or every reference with fewer than two tokens has no
    skip-bigram -> ``unscored``."""

    name = "rouge_s"
    aliases = ("rougeS", "rouge-s")
    score_directions = _directions("rouge_s")
    unigrams = False
    unit_name = "skip-bigram"

    def __init__(self, max_skip: int = 4, use_stemmer: bool = False, tokenizer: str = "default", variant: str = "rouge155") -> None:
        if isinstance(max_skip, bool) or not isinstance(max_skip, int):
            raise ValueError(f"max_skip must be an integer (-1 for unlimited), got {max_skip!r}")
        super().__init__(use_stemmer=use_stemmer, tokenizer=tokenizer, variant=variant, max_skip=max_skip)

    def units(self, tokens: list[str]) -> int:
        return sum(s_units(tokens, self.params["max_skip"], self.unigrams, self.params["variant"]).values())

    def compute(self, references: list[str], candidate: str) -> tuple[float, float, float, dict[str, Any]]:
        k, variant = self.params["max_skip"], self.params["variant"]
        if variant == "lin2004":
            return (*self.best_f(references, candidate, lambda r, c: rouge_s_prf(r, c, k, self.unigrams, variant)), {})
        refs = [self._tok.tokenize(r) for r in references]
        cand = self._tok.tokenize(candidate)
        detail: dict[str, Any] = {}
        if not self.units(cand):
            detail = {"note": "ROUGE-1.5.5 counts no unigram for a text's last token, so this candidate has no unit: 0 as the script prints"}
        return (*rouge_s_pooled(refs, cand, k, self.unigrams, variant), detail)


class RougeSU(RougeS):
    """ROUGE-SU: ROUGE-S plus unigram co-occurrence (Lin, 2004; ROUGE-1.5.5 ``-U``).

    Same input and parameters as ``rouge_s``; emits ``rouge_su_precision/recall/f`` in
    [0, 1]. ``variant="rouge155"`` (default) counts no unigram for a text's last token, as
    ROUGE-1.5.5 does: candidate ``cat`` vs reference ``the cat`` scores 0/0/0 (the
    candidate has no unit), and a reference of one token has none (-> ``unscored``).
    ``variant="lin2004"`` counts every unigram (``cat`` vs ``the cat``: R 1/3, P 1).
    No token on a side -> ``unscored``."""

    name = "rouge_su"
    aliases = ("rougeSU", "rouge-su")
    score_directions = _directions("rouge_su")
    unigrams = True
    unit_name = "skip-bigram or unigram"

    def candidate_has_units(self, tokens: list[str]) -> bool:
        # 1.5.5 scores a one-token candidate 0 (it has tokens, none counted); see class doc
        return bool(tokens)


__all__ = [
    "VARIANTS",
    "check_variant",
    "fmeasure",
    "rouge_s_pooled",
    "rouge_s_prf",
    "rouge_w_155",
    "rouge_w_prf",
    "s_units",
    "skip_bigrams",
    "wlcs",
    "SENTENCE_SPLITS",
    "TOKENIZERS",
    "UnicodeTokenizer",
    "check_tokenizer",
    "make_tokenizer",
    "no_tokens_reason",
    "split_sentences",
    "PRF",
    "Rouge1",
    "Rouge2",
    "RougeL",
    "RougeLsum",
    "RougeW",
    "RougeS",
    "RougeSU",
]
