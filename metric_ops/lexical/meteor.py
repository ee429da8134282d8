"""METEOR through NLTK with WordNet 3.0, offline.

NLTK reads WordNet only from an ``nltk_data/corpora/wordnet/`` folder. facetlake looks
in NLTK's usual places (``NLTK_DATA``, ``~/nltk_data``, ...) and then in the repository's
``.nltk_data`` folder, which ``scripts/setup_wordnet.sh`` builds from the Debian packages
``wordnet-base`` and ``wordnet-sense-index``. With internet, ``python -m nltk.downloader
wordnet`` works as well.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.errors import FacetlakeError

DEFAULT_NLTK_DATA = Path(__file__).resolve().parents[2] / ".nltk_data"

INSTALL_HINT = (
    "WordNet 3.0 is not available to NLTK, so METEOR cannot run. Offline: run "
    "`scripts/setup_wordnet.sh` (installs the Debian packages wordnet-base and "
    "wordnet-sense-index and builds ./.nltk_data/corpora/wordnet; or set NLTK_DATA to an "
    "nltk_data folder holding corpora/wordnet). With internet: `python -m nltk.downloader wordnet`."
)


class WordNetMissingError(FacetlakeError, RuntimeError):
    """WordNet cannot be loaded by NLTK; the message says how to install it."""


@functools.lru_cache(maxsize=1)
def load_wordnet() -> Any:
    """NLTK's WordNet corpus reader, loaded (``wordnet.get_version()`` works).

    Searches NLTK's data path (``NLTK_DATA`` first), then the repository's ``.nltk_data``.
    Raises :class:`WordNetMissingError` with installation instructions when absent."""
    import nltk
    from nltk.corpus import wordnet

    if str(DEFAULT_NLTK_DATA) not in nltk.data.path:
        nltk.data.path.append(str(DEFAULT_NLTK_DATA))
    try:
        wordnet.ensure_loaded()
        wordnet.get_version()
    except LookupError as exc:
        raise WordNetMissingError(INSTALL_HINT) from exc
    except OSError as exc:  # a half-built folder (e.g. lexnames missing)
        raise WordNetMissingError(f"{INSTALL_HINT} (NLTK said: {exc})") from exc
    return wordnet


def reopen_wordnet_files() -> None:
    """Make this process open its own WordNet data files.

    NLTK's reader keeps one open file per part of speech and reads it with seek + readline.
    A process forked after those files were opened shares their offsets with its parent
    and siblings, so concurrent reads interleave and return wrong synsets (seen as
    ``'NoneType' object has no attribute 'lemmas'``). Call this first thing in a forked
    worker."""
    from nltk.corpus import wordnet

    try:
        if hasattr(wordnet, "_data_file_map"):
            wordnet._data_file_map = {}
    except LookupError:  # WordNet not installed: nothing is open
        pass


class _MemoWordNet:
    """WordNet reader whose ``synsets(word)`` is memoised: the same synset lists, so the
    same METEOR values, without re-reading the index for every repeated word."""

    def __init__(self, wordnet: Any) -> None:
        self._wn = wordnet
        self.synsets = functools.lru_cache(maxsize=200_000)(wordnet.synsets)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wn, name)


class _MemoStemmer:
    """Porter stemmer with a memoised ``stem`` (same stems, computed once per word)."""

    def __init__(self) -> None:
        from nltk.stem.porter import PorterStemmer

        self._stemmer = PorterStemmer()
        self.stem = functools.lru_cache(maxsize=200_000)(self._stemmer.stem)


@functools.lru_cache(maxsize=1)
def _word_tokenizer() -> Any:
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


METEOR_TOKENIZERS: tuple[str, ...] = ("nltk", "whitespace")


def meteor_tokens(text: str, tokenizer: str = "nltk") -> list[str]:
    """Tokens METEOR sees; NLTK's ``meteor_score`` then lower-cases them.

    ``tokenizer="nltk"`` (default): NLTK's Treebank-style ``NLTKWordTokenizer`` (no
    punkt model needed), which splits punctuation and rewrites quotes (``'' no`` ->
    ``["''", "no"]``, ``no ''`` -> ``["no", "''"]``); ``"whitespace"``: ``text.split()``,
    as the METEOR in other toolkits that take pre-tokenised text. Raises ``ValueError``
    for another name."""
    if tokenizer == "nltk":
        return _word_tokenizer().tokenize(text)
    if tokenizer == "whitespace":
        return text.split()
    raise ValueError(f"meteor: tokenizer must be one of {', '.join(METEOR_TOKENIZERS)}, got {tokenizer!r} (e.g. --param tokenizer=whitespace)")


class Meteor(Metric):
    """METEOR (Banerjee & Lavie, 2005; Lavie & Agarwal, 2007) through
    ``nltk.translate.meteor_score.meteor_score`` with WordNet 3.0 synonyms and Porter
    stems.

    Input: one hypothesis and >= 1 references per sample (NLTK keeps the best reference),
    tokenised by :func:`meteor_tokens`. Output in [0, 1). An empty hypothesis, or one with
    no match, scores 0.0 (NLTK's rule). Parameters: ``alpha`` (0.9), ``beta`` (3.0),
    ``gamma`` (0.5), NLTK's defaults; ``tokenizer`` (``nltk``, the default, or
    ``whitespace``), recorded in the signature as ``tok:nltk_word`` / ``tok:whitespace``.
    The two differ where NLTK splits punctuation or rewrites quotes: on QAGS-XSum's
    hypothesis ``'' no`` against ``no ''``, 0.25 with ``nltk`` and 0.50 with
    ``whitespace``. Raises :class:`WordNetMissingError` at construction
    when WordNet is not installed (the message says how to install it).
    """

    name = "meteor"
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    value_range = (0.0, 1.0)
    version = "1"
    libraries = ("nltk",)
    parallel_safe = True
    parallel_min_samples = 20_000  # a worker loads NLTK and WordNet first (seconds)
    signature_extras = ("wordnet", "tok")

    def __init__(self, alpha: float = 0.9, beta: float = 3.0, gamma: float = 0.5, tokenizer: str = "nltk") -> None:
        if tokenizer not in METEOR_TOKENIZERS:
            raise ValueError(
                f"meteor: tokenizer must be one of {', '.join(METEOR_TOKENIZERS)}, got {tokenizer!r} (e.g. --param tokenizer=whitespace)"
            )
        # the tokenizer enters the signature as its tok: field (the default's signature is unchanged)
        super().__init__(alpha=float(alpha), beta=float(beta), gamma=float(gamma))
        self.tokenizer = tokenizer
        wordnet = load_wordnet()
        self._wordnet = _MemoWordNet(wordnet)
        self._stemmer = _MemoStemmer()
        self._wordnet_version = wordnet.get_version()

    def signature(self) -> str:
        tok = "nltk_word" if self.tokenizer == "nltk" else self.tokenizer
        return f"{super().signature()}|wordnet:{self._wordnet_version}|tok:{tok}"

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        from nltk.translate.meteor_score import meteor_score

        check_lengths(samples, outputs)
        results = []
        for sample, output in zip(samples, outputs):
            value = meteor_score(
                [meteor_tokens(r, self.tokenizer) for r in sample.references],
                meteor_tokens(output, self.tokenizer),
                stemmer=self._stemmer,
                wordnet=self._wordnet,
                alpha=self.params["alpha"],
                beta=self.params["beta"],
                gamma=self.params["gamma"],
            )
            results.append({self.name: Score(float(value))})
        return results
