"""Structural evidence of the ``ner`` strategy's fifth round (issue 26, fault 3): cues in
the shape of a name and of the words around it, with no word list of names.

- a legal form written as a dotted abbreviation ("sh.p.k.", "A.E.", "B.V.", "k.d.") ends
  a company's name, its closing dot included: the name is an organisation;
- a lower-case word of two letters that is no English stop word, between capitalised words, joins them
  as a name's connector of another language (Tagalog "ng", Hausa "ta": "X ng Y"); a
  name joined so is no person's (a person's particles are
  :data:`resources.privacy.anonymise.lexicon.NAME_PARTICLES`);
- an acronym opening a name of capitalised words ("FC …", "NK …", "PT …") names a club or
  a company;
- an apposition after a name that says what kind of body it is ("X, a weavers'
  cooperative", "X, an NGO in …"), and a verb whose object is mostly a body ("works for
  X", "joined X", "manages X") vote ORGANIZATION; a name of several words after "the" (no
  listed place) is no person, so its PERSON votes go to ORGANIZATION.

Each function reads the text and a candidate span (start, end offsets) and returns a span
end, a bool or votes; :class:`resources.privacy.anonymise.ner.NERRecogniser` adds them.
"""

from __future__ import annotations

import functools
import re
from typing import Mapping

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.loaders import fold, place_names

Span = tuple[int, int]

# a dotted abbreviation of one to three letters per part, two parts or more ("sh.p.k", "A.E")
_DOTTED = r"[^\W\d_]{1,3}(?:\.[^\W\d_]{1,3}){1,3}"
_DOTTED_AFTER = re.compile(rf",?\s+({_DOTTED})(\.?)(?![\w])")
_DOTTED_LAST = re.compile(rf"(?:^|\s)({_DOTTED})$")
# dotted abbreviations that are no legal form: Latin phrases, times, degrees, places
_NOT_LEGAL = frozenset({"e.g", "i.e", "a.m", "p.m", "n.b", "p.s", "c.f", "ph.d", "m.d", "b.a", "m.a", "b.sc", "m.sc",
                        "d.c", "u.s", "u.k", "u.s.a", "e.u", "u.n", "et.al", "o.k", "a.k.a", "jr", "sr"})
# English words that are no connector inside a name ("Smith vs Jones")
_NOT_CONNECTORS = frozenset({"vs", "cf", "ft", "pp", "ca", "tv", "pm", "id", "ok", "ad", "ex",
                             # prepositions of other languages that stand between two names ("X à Y", "X en Y")
                             "en", "au", "im", "am", "zu", "op", "om", "på", "og", "ou", "és", "ja", "ve", "em", "ao", "às"})
# nouns that, in an apposition after a name, say it names a body ("X, a weavers' cooperative")
_BODY_NOUNS = frozenset(
    """
    cooperative co-operative coop co-op ngo charity nonprofit non-profit company firm business enterprise startup
    club team choir band union association society federation league foundation institute college school hospital
    clinic bank agency publisher newspaper brand label factory mill brewery winery bakery shop collective council
    ministry authority trust partnership consultancy supplier retailer maker manufacturer producer
    """.split()
)
_APPOSITION = re.compile(r",\s+(?:a|an|the)\s+((?:[\w'’-]+\s+){0,3}[\w'’-]+)")
_APPOSITION_STOP = frozenset("of at in for with from by to who which that whose and or".split())
# a verb or noun whose object is mostly a body ("works for X", "joined X", "member of X")
_BODY_OBJECT = re.compile(
    r"(?:\b(?:works?|worked|working|volunteers?|volunteered|volunteering|employed|trained|interned)\s+(?:for|with|by)"
    r"|\b(?:joined|founded|co-founded|manages|managed|runs|ran|chairs|chaired|coordinates|coordinated|heads|headed)"
    r"|\b(?:member|members|employee|employees|staff|chair|director|manager|founder|ceo|head)\s+of)\s+(?:the\s+)?$",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=4096)
def _stop(word: str) -> bool:
    """Whether ``word`` is an English stop word (spaCy's list; none without spaCy)."""
    try:
        from spacy.lang.en.stop_words import STOP_WORDS
    except Exception:  # noqa: BLE001 - no spaCy: no stop list
        return False
    return word.lower() in STOP_WORDS


def _legal(abbreviation: str) -> bool:
    return abbreviation.lower() not in _NOT_LEGAL


def dotted_form_end(text: str, start: int, end: int) -> int:
    """The end of the name ``text[start:end]`` with a legal form written as a dotted
    abbreviation after it or ending it, its closing dot included ("Gjokaj Ndërtim" +
    " sh.p.k.", "Trofima A.E" + "."); ``end`` when there is none. Never raises."""
    if not text[start:end][:1].isupper():
        return end
    m = _DOTTED_LAST.search(text, start, end)
    if m and _legal(m.group(1)) and " " in text[start:end].strip():
        return end + 1 if text[end : end + 1] == "." else end
    m = _DOTTED_AFTER.match(text, end)
    if m and _legal(m.group(1)):
        return m.end()
    return end


def dotted_form_evidence(span: str) -> float:
    """ORGANIZATION votes (4) for a name of capitalised words that a dotted legal form ends
    ("Agro Vlora sh.p.k.", "Delta Foods B.V."). Never raises."""
    m = _DOTTED_LAST.search(span.rstrip("."))
    return 4.0 if m and _legal(m.group(1)) and span[:1].isupper() and " " in span.strip() else 0.0


def is_connector(word: str) -> bool:
    """Whether a lower-case ``word`` between capitalised words joins them into one name as a
    connector of another language: two letters, no English stop word nor a preposition
    between two names ("ng", "ta", "ka"; not "of", "vs", "à", "en"). Never raises."""
    return (len(word) == 2 and word.isalpha() and word.islower() and word not in _NOT_CONNECTORS
            and not _stop(word))


def _joined_by_connector(words: list[str]) -> bool:
    """Whether the inner words of a name hold a connector that is no person's particle."""
    return any(is_connector(w) and w not in lex.NAME_PARTICLES and w not in ("o",) for w in words[1:-1])


def evidence(text: str, start: int, end: int) -> Mapping[str, float]:
    """Votes from a span's structure and its neighbours: a dotted legal form ending it (4),
    an acronym opening a name of capitalised words (3), a connector of another language
    inside it (2), an apposition naming a body after it (3), a verb whose object is mostly
    a body before it (1.5) - ORGANIZATION. Never raises."""
    span = text[start:end]
    words = span.split()
    out = {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": dotted_form_evidence(span)}
    first = words[0].strip(".,;:") if words else ""
    if (len(words) >= 2 and re.fullmatch(r"[A-Z]{2,4}", first) and words[1][:1].isupper()
            and first.lower() not in lex.PERSON_LEAD_WORDS and first.lower() not in {t.lower() for t in lex.TITLES}
            and fold(first) not in place_names()):
        out["ORGANIZATION"] += 3.0
    if len(words) >= 3 and _joined_by_connector(words):
        out["ORGANIZATION"] += 2.0
    if body_apposition(text, end):
        out["ORGANIZATION"] += 3.0
    if _BODY_OBJECT.search(text[max(0, start - 40) : start]):
        out["ORGANIZATION"] += 1.5
    return out


def body_apposition(text: str, end: int) -> bool:
    """Whether an apposition after the name ending at ``end`` says what kind of body it
    is: ", a/an/the" and up to four words before a preposition or relative word, one of
    them a body noun (", a weavers' cooperative", ", an NGO in …"; not ", a member of the
    club"). Never raises."""
    m = _APPOSITION.match(text, end)
    if not m:
        return False
    for word in m.group(1).split():
        w = word.lower().strip("'’")
        if w in _APPOSITION_STOP:
            return False
        if w in _BODY_NOUNS:
            return True
    return False


def after_the(text: str, start: int, end: int) -> bool:
    """Whether a name of two words or more follows "the" and is no listed place ("at the
    Orfeó de …", "to the Gemeente …"): a person's name takes no article, so its PERSON
    votes are a body's. Never raises."""
    return (" " in text[start:end].strip() and bool(re.search(r"(?<![\w])the\s+$", text[max(0, start - 8) : start]))
            and fold(text[start:end]) not in place_names())


def widen(text: str, votes: dict[Span, dict[str, float]]) -> None:
    """Widen each candidate in ``votes`` (span -> votes per type) to a dotted legal form
    after it or ending it (:func:`dotted_form_end`), dropping the candidates that the
    wider span overlaps."""
    for key in list(votes):
        if key not in votes:
            continue
        end = dotted_form_end(text, *key)
        if end == key[1]:
            continue
        box = votes.pop(key)
        for other in [k for k in votes if k[0] < end and key[0] < k[1]]:
            del votes[other]
        votes[(key[0], end)] = box
