"""Stage 2, ``rule_based`` strategy: :class:`RuleBasedNER`, gazetteers and context cues
for PERSON, LOCATION and ORGANIZATION (no model, no network); its name patterns are
shared with the ``ner`` strategy's typing."""

from __future__ import annotations

import re
from typing import Iterable

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.base import Entity

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
    and a short list of well-known names. Word lists: :mod:`resources.privacy.anonymise.lexicon`.
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
