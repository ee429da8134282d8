"""Tokenizers and sentence splitting shared by every ROUGE variant (issue 15, kinds 2-3).

Every ROUGE metric (``rouge_1``, ``rouge_2``, ``rouge_l``, ``rouge_lsum``, ``rouge_w``,
``rouge_s``, ``rouge_su``) takes the same two options:

- ``tokenizer="default"``: rouge-score's ``DefaultTokenizer``: lower-case, every
  character outside ``[a-z0-9]`` becomes a space, optional Porter stemming of tokens
  longer than 3 characters. Without stemming these are the tokens of the ROUGE-1.5.5
  Perl script (``tr/A-Z/a-z/``, ``s/[^A-Za-z0-9\\-]/ /g``, tokens must start with
  ``[a-z0-9]``), except for the rare non-ASCII letters whose Python lower case is ASCII
  (``"İ"``, the Kelvin sign). Text in other scripts keeps no token at all: ROUGE then
  reports ``unscored`` (nothing to measure), never 0.
- ``tokenizer="unicode"``: :class:`UnicodeTokenizer`, for any script.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import regex

TOKENIZERS = ("default", "unicode")
SENTENCE_SPLITS = ("newline", "punctuation")

# kana, CJK ideographs (+ extension A, compatibility), hangul syllables: one token per character
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# A CJK character with its combining marks (e.g. a kana + U+3099 dakuten), or a run of
# letters/digits/combining marks (Mn, Mc, Me) that starts with a letter or digit. Marks
# (Devanagari/Tamil/Thai vowel signs and viramas, Arabic harakat, Latin accents in NFD)
# belong to their word, and so do the zero-width (non-)joiners U+200C/U+200D inside a word
# (Persian, Indic conjuncts), as in Unicode's word-boundary rules (UAX #29, WB4).
_UNICODE_TOKEN = regex.compile(rf"[{_CJK}]\p{{M}}*|(?:(?![{_CJK}])[\p{{L}}\p{{N}}])(?:(?![{_CJK}])[\p{{L}}\p{{N}}\p{{M}}\u200c\u200d])*")


class UnicodeTokenizer:
    """A rouge-score tokenizer (``tokenize(text) -> list[str]``) for any script.

    The text is NFC-normalised (so NFD ``e`` + U+0301 and precomposed ``é`` are the same
    token) and lower-cased. A token is a run of Unicode letters, digits and combining marks
    (categories L*, N*, M*) starting with a letter or digit; each CJK ideograph, kana or
    hangul syllable is its own token (with any combining mark that follows it). Combining
    marks never split a word: "पानी" (water) and "पान" (betel leaf) are different tokens;
    a zero-width (non-)joiner inside a word stays in it (Persian "می‌خواهم" is one token).
    Optional Porter stemming of tokens longer than 3 characters (rouge-score's rule).
    Everything else (punctuation, symbols, spaces) separates tokens."""

    def __init__(self, use_stemmer: bool = False) -> None:
        self.use_stemmer = use_stemmer
        self._stemmer = None
        if use_stemmer:
            from nltk.stem import porter

            self._stemmer = porter.PorterStemmer()

    def tokenize(self, text: str) -> list[str]:
        tokens = _UNICODE_TOKEN.findall(unicodedata.normalize("NFC", text).lower())
        if self._stemmer is not None:
            tokens = [self._stemmer.stem(t) if len(t) > 3 else t for t in tokens]
        return tokens


def check_tokenizer(tokenizer: str) -> str:
    """``tokenizer`` when it is a known name; ``ValueError`` naming the choices otherwise."""
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
    return tokenizer


def make_tokenizer(tokenizer: str = "default", use_stemmer: bool = False) -> Any:
    """The tokenizer object ROUGE metrics use (``.tokenize(text) -> list[str]``).

    ``"default"``: rouge-score's ``DefaultTokenizer`` (``[a-z0-9]`` runs, lower-cased);
    ``"unicode"``: :class:`UnicodeTokenizer`. Raises ``ValueError`` for other names."""
    if check_tokenizer(tokenizer) == "default":
        from metric_ops.lexical.rouge.ngram_lcs import DefaultTokenizer  # rouge-score's rules, without importing NLTK

        return DefaultTokenizer(use_stemmer=use_stemmer)
    return UnicodeTokenizer(use_stemmer=use_stemmer)


def split_sentences(text: str, how: str = "newline") -> str:
    """Text with one sentence per line, as ROUGE-Lsum wants it.

    ``"newline"``: unchanged (rouge-score's rule: sentences are the newline-separated
    lines). ``"punctuation"``: also break after ``.``, ``!`` or ``?`` followed by
    whitespace (a rule that needs no NLTK punkt model, so it works offline). Raises
    ``ValueError`` for another ``how``."""
    if how == "newline":
        return text
    if how == "punctuation":
        return "\n".join(s for line in text.split("\n") for s in re.split(r"(?<=[.!?])\s+", line))
    raise ValueError(f"sentence_split must be one of {SENTENCE_SPLITS}, got {how!r}")


def no_tokens_reason(tokenizer: str, side: str) -> str:
    """The ``unscored`` reason for a side (``"candidate"``/``"reference"``) that keeps no
    token, naming the fix when the default tokenizer dropped a non-Latin script."""
    verb = "have" if " and " in side else "has"
    if tokenizer == "default":
        return (
            f"the {side} {verb} no token after tokenisation (tokenizer=default keeps only [a-z0-9] runs; "
            "use tokenizer=unicode for other scripts)"
        )
    return f"the {side} {verb} no token after tokenisation (tokenizer={tokenizer})"
