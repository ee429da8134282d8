"""BLEU, in one place: sentence BLEU, corpus BLEU, NLTK's sentence BLEU, and the corpus
aggregate that recomputes BLEU from summed sufficient statistics.

- ``bleu``: sentence BLEU through sacrebleu (Papineni et al., 2002; Post, 2018),
  multi-reference, sacrebleu's sentence defaults (:class:`SentenceBLEU`);
- ``corpus_bleu``: corpus BLEU through sacrebleu, with the reference shape checked
  (:func:`reference_streams`) so a per-sample reference list is never silently read as
  extra reference streams (:class:`CorpusBLEU`);
- ``nltk_bleu``: the NLTK-style sentence BLEU (``nltk.translate.bleu_score.sentence_bleu``)
  with its smoothing methods (Chen & Cherry, 2014), a separately named variant;
- :func:`bleu_from_totals`: sacrebleu's ``BLEU.compute_bleu`` vectorised over a batch of
  summed statistics (the corpus aggregate ``bleu`` of
  :class:`metric_ops.scoring.corpus.CorpusStatistics`, which bootstrap resampling calls).

chrF and chrF++ (sentence and corpus) are in :mod:`metric_ops.lexical.chrf`.
"""

from __future__ import annotations

import sys
import warnings

from typing import Any, Sequence

import numpy as np

from metric_ops.base import CORPUS_LEVEL, Direction, Metric, Sample, Score, check_lengths

# --------------------------------------------------------------------------- sentence BLEU

def sacrebleu_metrics() -> Any:
    """``sacrebleu.metrics`` (BLEU, CHRF, TER), imported without portalocker's optional Redis
    lock: sacrebleu imports portalocker (for its download cache), which imports ``redis`` when
    it is installed (the ``deploy`` and ``test`` extras), 0.1-0.25 s of every run that scores
    BLEU spent on a client nothing uses (issue 26, "Fixed cost of a run"). ``portalocker.RedisLock``
    stays importable and says at use that redis is missing; ``import redis`` elsewhere is
    unaffected."""
    if "portalocker" not in sys.modules and "portalocker.redis" not in sys.modules:
        sys.modules["portalocker.redis"] = None  # type: ignore[assignment]  # portalocker catches the ImportError
        try:
            import portalocker  # noqa: F401
        finally:
            if sys.modules.get("portalocker.redis", False) is None:
                del sys.modules["portalocker.redis"]
    import sacrebleu.metrics

    return sacrebleu.metrics


class SacrebleuSentenceMetric(Metric):
    """Shared code of sacrebleu's sentence-level metrics (BLEU, chrF, chrF++).

    Subclasses build ``self._sacre`` (a ``sacrebleu.metrics`` object) in ``__init__``.
    An empty hypothesis gives 0.0 with no exception (``detail["empty"]``); references
    that are all empty or whitespace-only leave nothing to measure (``unscored``); otherwise the value is
    ``self._sacre.sentence_score(hyp, refs).score`` (0-100) and :meth:`_detail` adds the
    metric's intermediate numbers. The signature embeds sacrebleu's own signature string.
    """

    abstract = True
    libraries = ("sacrebleu",)
    signature_extras = ("sacrebleu_sig",)
    value_range = (0.0, 100.0)
    _sacre: Any
    parallel_safe = True

    def _detail(self, result: Any) -> dict[str, Any]:
        return {}

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            refs = list(sample.references)
            if not any(r.strip() for r in refs):  # the runner drops blank references first; kept for direct callers
                results.append({self.name: Score.unscored("every reference is empty or whitespace-only: nothing to compare with",
                                                          empty="references")})
                continue
            if not output.strip():  # an empty output is measured: it matches nothing (sacrebleu: 0)
                results.append({self.name: Score(0.0, detail={"empty": "hypothesis"})})
                continue
            result = self._sacre.sentence_score(output, refs)
            results.append({self.name: Score(result.score, detail=self._detail(result))})
        return results

    def signature(self) -> str:
        # sentence-level scoring takes a variable number of references per sample
        sig = self._sacre._SIGNATURE_TYPE({**self._sacre.__dict__, "num_refs": -1})
        return f"{super().signature()}|sacrebleu_sig:{sig.format()}"


class SentenceBLEU(SacrebleuSentenceMetric):
    """Sentence-level BLEU through sacrebleu (Papineni et al., 2002; Post, 2018).

    Input: one hypothesis and >= 1 references per sample. Output on sacrebleu's 0-100
    scale (``sacrebleu.sentence_bleu(hyp, refs).score``) with sacrebleu's defaults for
    sentence BLEU (tokenizer ``13a``, ``exp`` smoothing, effective order), in [0, 100]
    (a perfect match is exactly 100: the runner clamps sacrebleu's float residue such as
    100.00000000000004, see :func:`metric_ops.base.check_range`). An empty hypothesis
    gives 0.0, no exception; empty or whitespace-only references are ``unscored``. The
    sacrebleu signature string is recorded in ``detail``.

    Parameters: ``tokenize`` (sacrebleu tokenizer name), ``lowercase`` (bool),
    ``smooth_method`` (``exp``/``floor``/``add-k``/``none``).
    """

    name = "bleu"
    aliases = ("sentence_bleu", "sacrebleu")
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, smooth_method: str = "exp") -> None:
        super().__init__(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
        self._sacre = sacrebleu_metrics().BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method, effective_order=True)

    def _detail(self, result: Any) -> dict[str, Any]:
        return {"bp": result.bp, "precisions": result.precisions}


# --------------------------------------------------------------------------- shapes and corpus BLEU


def reference_streams(n_hypotheses: int, references: Sequence[Any]) -> list[list[str | None]]:
    """Transpose per-sample references into sacrebleu's reference streams.

    Args:
        n_hypotheses: number of hypotheses (segments) in the corpus.
        references: one entry per hypothesis, in hypothesis order; each entry is a string
            (one reference) or a non-empty sequence of strings (several references).
            Samples may have different numbers of references.

    Returns:
        ``streams[k][i]`` = the k-th reference of sample i, ``None`` where sample i has
        fewer than k+1 references (sacrebleu skips ``None``).

    Raises:
        ValueError: ``len(references) != n_hypotheses`` (e.g. sacrebleu-style streams were
            passed where per-sample lists are expected), or a sample has no reference.
        TypeError: an entry is neither a string nor a sequence of strings.
    """
    if isinstance(references, str):
        raise TypeError("references must be a list with one entry per hypothesis, not a bare string")
    if len(references) != n_hypotheses:
        raise ValueError(
            f"got {n_hypotheses} hypotheses but {len(references)} reference entries; pass one entry "
            "per hypothesis (a string or a list of that hypothesis's references), not "
            "sacrebleu-style reference streams"
        )
    per_sample: list[list[str]] = []
    for i, entry in enumerate(references):
        refs = [entry] if isinstance(entry, str) else list(entry)
        if not refs:
            raise ValueError(f"hypothesis {i} has no reference; give at least one (\"\" is allowed)")
        if not all(isinstance(r, str) for r in refs):
            raise TypeError(f"references of hypothesis {i} must be strings, got {[type(r).__name__ for r in refs]}")
        per_sample.append(refs)
    width = max((len(r) for r in per_sample), default=1)
    return [[refs[k] if k < len(refs) else None for refs in per_sample] for k in range(width)]


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[Any],
    tokenize: str = "13a",
    lowercase: bool = False,
    smooth_method: str = "exp",
) -> Any:
    """Corpus BLEU through sacrebleu's ``BLEU.corpus_score``.

    Args:
        hypotheses: N hypothesis strings ("" allowed: it adds no n-grams).
        references: N entries, one per hypothesis: a string or a list of strings
            (see :func:`reference_streams`; shape mismatches raise ``ValueError``).
        tokenize, lowercase, smooth_method: sacrebleu ``BLEU`` settings.

    Returns:
        sacrebleu's ``BLEUScore`` (``.score`` on the 0-100 scale); its signature is
        ``BLEU(...).get_signature()``. An empty corpus raises ``ValueError``.
    """
    BLEU = sacrebleu_metrics().BLEU

    hyps = list(hypotheses)
    if not hyps:
        raise ValueError("corpus BLEU needs at least one hypothesis")
    streams = reference_streams(len(hyps), references)
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
    return bleu.corpus_score(hyps, streams)


class CorpusBLEU(Metric):
    """Corpus BLEU through sacrebleu (Papineni et al., 2002; Post, 2018).

    Corpus-level (``corpus_level = True``): the number is defined over the whole set of
    samples passed in one ``score_batch`` call, so a caller must pass the whole set in
    one call (a split batch gives a different, per-batch number). ``score_batch`` gives
    every sample the corpus value (0-100) with, in ``detail["stats"]``, the sample's own
    sufficient statistics (hypothesis and reference lengths, n-gram matches and totals);
    the scores table stores the corpus value once per model and evaluation, with every
    segment's statistics (:func:`metric_ops.scoring.corpus.corpus_score_rows`, :meth:`corpus_spec`),
    and the comparisons resample them (paired bootstrap, approximate randomisation).
    :func:`corpus_bleu_from_stats` recomputes the value from statistics. Multiple
    references per sample are allowed (their number may vary). An empty hypothesis
    contributes no n-grams (it lowers BLEU). Parameters: ``tokenize``, ``lowercase``,
    ``smooth_method`` (sacrebleu).
    """

    name = "corpus_bleu"
    aliases = ("bleu_corpus",)
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"
    value_range = (0.0, 100.0)
    libraries = ("sacrebleu",)
    signature_extras = ("sacrebleu_sig",)
    corpus_level = True

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, smooth_method: str = "exp") -> None:
        super().__init__(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
        BLEU = sacrebleu_metrics().BLEU

        self._bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        if not samples:
            return []
        streams = reference_streams(len(outputs), [list(s.references) for s in samples])
        stats = self._bleu._extract_corpus_statistics(list(outputs), streams)
        result = self._bleu._compute_score_from_stats([sum(col) for col in zip(*stats)])
        return [
            {self.name: Score(result.score, detail={"level": CORPUS_LEVEL, "n_samples": len(samples), "stats": [float(x) for x in row]})}
            for row in stats
        ]

    def corpus_spec(self, score_name: str) -> dict[str, Any]:
        """Aggregate, parameters and statistics names of the stored corpus score
        (:class:`metric_ops.scoring.corpus.CorpusStatistics`; aggregate :func:`metric_ops.lexical.bleu.bleu_from_totals`)."""
        b = self._bleu
        order = b.max_ngram_order
        fields = ["hyp_len", "ref_len", *(f"match_{n}" for n in range(1, order + 1)), *(f"total_{n}" for n in range(1, order + 1))]
        return {"kind": "bleu", "fields": fields, "params": {"max_ngram_order": order, "smooth_method": b.smooth_method,
                                                              "smooth_value": b.smooth_value, "effective_order": b.effective_order}}

    def signature(self) -> str:
        sig = self._bleu._SIGNATURE_TYPE({**self._bleu.__dict__, "num_refs": -1})
        return f"{super().signature()}|sacrebleu_sig:{sig.format()}"


def corpus_bleu_from_stats(stats: Sequence[Sequence[float]], smooth_method: str = "exp") -> float:
    """Corpus BLEU (0-100) from the per-sample ``detail["stats"]`` of ``corpus_bleu`` rows
    (sacrebleu's sufficient statistics: hyp_len, ref_len, 4 matches, 4 totals)."""
    BLEU = sacrebleu_metrics().BLEU

    bleu = BLEU(smooth_method=smooth_method)
    return bleu._compute_score_from_stats([sum(col) for col in zip(*stats)]).score


# --------------------------------------------------------------------------- NLTK BLEU

NLTK_SMOOTHING = tuple(range(8))


class NltkBLEU(Metric):
    """NLTK-style sentence BLEU (``nltk.translate.bleu_score.sentence_bleu``) with NLTK's
    smoothing methods 0-7 (Chen & Cherry, 2014).

    Input: one hypothesis and >= 1 references per sample, tokenised with sacrebleu's
    ``13a`` tokenizer (``tokenize="13a"``, the default) or on whitespace
    (``tokenize="whitespace"``), then lower-cased when ``lowercase``. Output in [0, 1]
    (NLTK's scale, not sacrebleu's 0-100). Parameters: ``smoothing`` (0 = none ... 7;
    NLTK's method6 refuses a hypothesis with no bigram match: such a sample is an
    ``error`` with NLTK's message, never a made-up number),
    ``max_order`` (uniform weights 1/max_order), ``auto_reweigh`` (NLTK's option).
    An empty hypothesis or references that all tokenise to nothing give 0.0 with no
    exception or warning.
    """

    name = "nltk_bleu"
    aliases = ("bleu_nltk",)
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    version = "1"
    libraries = ("nltk", "sacrebleu")
    parallel_safe = True

    def __init__(
        self,
        smoothing: int = 1,
        max_order: int = 4,
        tokenize: str = "13a",
        lowercase: bool = False,
        auto_reweigh: bool = False,
    ) -> None:
        if smoothing not in NLTK_SMOOTHING:
            raise ValueError(f"smoothing must be one of {NLTK_SMOOTHING} (NLTK SmoothingFunction.method<N>), got {smoothing!r}")
        if tokenize not in ("13a", "whitespace"):
            raise ValueError(f"tokenize must be '13a' or 'whitespace', got {tokenize!r}")
        if not isinstance(max_order, int) or max_order < 1:
            raise ValueError(f"max_order must be a positive integer, got {max_order!r}")
        super().__init__(smoothing=smoothing, max_order=max_order, tokenize=tokenize, lowercase=lowercase, auto_reweigh=auto_reweigh)
        from nltk.translate.bleu_score import SmoothingFunction

        self._smooth = getattr(SmoothingFunction(), f"method{smoothing}")
        self._weights = tuple(1.0 / max_order for _ in range(max_order))
        if tokenize == "13a":
            sacrebleu_metrics()  # the package first, without the Redis lock
            from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

            self._tok = Tokenizer13a()
        else:
            self._tok = None

    def tokens(self, text: str) -> list[str]:
        """The token list NLTK receives for ``text``."""
        if self._tok is not None:
            text = self._tok(text.strip())
        if self.params["lowercase"]:
            text = text.lower()
        return text.split()

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        from nltk.translate.bleu_score import sentence_bleu

        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            hyp = self.tokens(output)
            refs = [t for t in (self.tokens(r) for r in sample.references) if t]
            if not hyp or not refs:
                results.append({self.name: Score(0.0, detail={"empty": "hypothesis" if not hyp else "references"})})
                continue
            try:
                with warnings.catch_warnings():  # "the hypothesis contains 0 counts of N-gram overlaps": the value says so
                    warnings.simplefilter("ignore", UserWarning)
                    value = sentence_bleu(
                        refs, hyp, weights=self._weights, smoothing_function=self._smooth, auto_reweigh=self.params["auto_reweigh"]
                    )
            except AssertionError as exc:  # NLTK method6 needs a bigram match; NLTK asserts
                results.append({self.name: Score.error(f"NLTK smoothing method{self.params['smoothing']}: {exc}")})
                continue
            results.append({self.name: Score(float(value))})
        return results


# --------------------------------------------------------------------------- corpus aggregate
BLEU_SMOOTH_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}


def bleu_from_totals(
    totals: Any,
    max_ngram_order: int = 4,
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> np.ndarray:
    """BLEU (0-100) of each row of summed statistics, as sacrebleu's ``BLEU.compute_bleu``.

    Args:
        totals: ``(B, 2 + 2N)`` or ``(2 + 2N,)``: hypothesis length, reference length,
            N n-gram match counts, N n-gram totals (sacrebleu's statistics layout).
        max_ngram_order, smooth_method (``none``/``floor``/``add-k``/``exp``),
        smooth_value (None: sacrebleu's default), effective_order: sacrebleu's settings.

    Returns ``(B,)`` scores; sacrebleu's rules kept: 0 when no n-gram matches, the
    brevity penalty, the n-gram loop stopping at the first order with no n-grams, and
    ``log(0)`` floored at -9999999999.
    """
    if smooth_method not in BLEU_SMOOTH_DEFAULTS:
        raise ValueError(f"unknown BLEU smooth_method {smooth_method!r}; use one of {', '.join(BLEU_SMOOTH_DEFAULTS)}")
    t = np.atleast_2d(np.asarray(totals, dtype=float))
    n_order = int(max_ngram_order)
    if t.shape[1] != 2 + 2 * n_order:
        raise ValueError(f"BLEU statistics need {2 + 2 * n_order} columns for max_ngram_order {n_order}, got {t.shape[1]}")
    if smooth_value is None:
        smooth_value = BLEU_SMOOTH_DEFAULTS[smooth_method]
    sys_len, ref_len = np.floor(t[:, 0]), np.floor(t[:, 1])
    correct, total = t[:, 2 : 2 + n_order], t[:, 2 + n_order :]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.where(sys_len > 0, sys_len, 1.0)), 0.0), 1.0)
        rows = t.shape[0]
        precisions = np.zeros((rows, n_order))
        active = np.ones(rows, dtype=bool)
        smooth_mteval = np.ones(rows)
        eff_order = np.full(rows, n_order)
        for n in range(1, n_order + 1):
            c, tot = correct[:, n - 1], total[:, n - 1]
            if smooth_method == "add-k" and n > 1:
                c, tot = c + smooth_value, tot + smooth_value
            active &= tot != 0
            if effective_order:
                eff_order = np.where(active, n, eff_order)
            safe = np.where(tot != 0, tot, 1.0)
            zero = active & (c == 0)
            if smooth_method == "exp":
                smooth_mteval = np.where(zero, smooth_mteval * 2, smooth_mteval)
                precisions[:, n - 1] = np.where(zero, 100.0 / (smooth_mteval * safe), precisions[:, n - 1])
            elif smooth_method == "floor":
                precisions[:, n - 1] = np.where(zero, 100.0 * smooth_value / safe, precisions[:, n - 1])
            hit = active & (c != 0)
            precisions[:, n - 1] = np.where(hit, 100.0 * c / safe, precisions[:, n - 1])
        logs = np.where(precisions == 0.0, -9999999999.0, np.log(np.where(precisions > 0, precisions, 1.0)))
        logs = np.where(np.arange(n_order)[None, :] < eff_order[:, None], logs, 0.0)
        acc = np.zeros(rows)
        for n in range(n_order):  # left to right, as sacrebleu's sum()
            acc = acc + logs[:, n]
        score = bp * np.exp(acc / eff_order)
    return np.where((correct != 0).any(axis=1), score, 0.0)

