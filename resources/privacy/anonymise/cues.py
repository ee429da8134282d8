"""Evidence of the ``ner`` strategy's fourth round (issue 26, fault 3): acronyms defined in
the text, legal forms of several tokens, institution phrases, places that name a local
body, and organisation shapes. Each function reads the text and the candidate spans of
:class:`resources.privacy.anonymise.ner.NERRecogniser` and returns spans or weights; the
recogniser adds them to its votes.

- an acronym defined next to a name ("Name Words (ABC)", "ABC (the Name Words)") is the
  same entity: the two share their votes, and the acronym is a candidate wherever it
  stands (a lone acronym is otherwise no candidate unless the model tags it);
- a legal form of several tokens ("Sp. z o.o.", "spol. s r.o.", "Co., Ltd.", "Sdn Bhd",
  "S.A. de C.V.") belongs to the name before it, which is an organisation;
- an institution phrase opening a name (Vietnamese "Truong Tieu Hoc …", Indonesian
  "Rumah Sakit …": :data:`resources.privacy.anonymise.lexicon.ORG_LEAD_PHRASES`);
- a place named by a local body ("Kerrowmoor Parish Council", "Dunmere District Health
  Board"): the words before the area word, named alone elsewhere, are a place;
- "&" between capitalised words ("Harrow & Finch") names a firm.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.loaders import fold

Span = tuple[int, int]

_LEGAL_FORM = (
    r"(?:[Ss]p\.\s?z\s?o\.\s?o\.?|[Ss]p\.\s?[jkp]\.|spol\.\s?s\s?r\.\s?o\.?|s\.\s?r\.\s?o\.?|d\.\s?o\.\s?o\.?"
    r"|Co\.,?\s+Ltd\.?|Pty\.?\s+Ltd\.?|Pvt\.?\s+Ltd\.?|Sdn\.?\s+Bhd\.?|S\.\s?A\.\s?(?:de\s+C\.\s?V\.?|S\.?)?"
    r"|S\.\s?de\s+R\.\s?L\.(?:\s+de\s+C\.\s?V\.?)?|GmbH\s+&\s+Co\.\s?KG|S\.\s?p\.\s?A\.?|S\.\s?r\.\s?l\.?"
    r"|S\.\s?L\.\s?U?\.?|e\.\s?V\.?|a\.\s?s\.?|k\.\s?s\.?|v\.\s?o\.\s?s\.?|Sp\.\s?zoo)(?![\w])"
)
_LEGAL_AT = re.compile(_LEGAL_FORM)
_LEGAL_AFTER = re.compile(r",?\s+" + _LEGAL_FORM)
_LEGAL_IN = re.compile(r"(?:^|\s)" + _LEGAL_FORM + r"$")
_ACRONYM = r"[A-Z][A-Za-z]?[A-Z&]{1,6}"
_ACRONYM_AFTER = re.compile(rf"\s*\(\s*({_ACRONYM})\s*\)")
_ACRONYM_BEFORE = re.compile(rf"(?<![\w])({_ACRONYM})\s*\(\s*(?:the\s+|The\s+)?$")


def legal_form_end(text: str, start: int, end: int) -> int:
    """The end of the name ``text[start:end]`` with a legal form of several tokens that
    goes on after it ("Młyny Podlaskie Sp" + ". z o.o.", "Harbin Tools" + " Co., Ltd.");
    ``end`` when none does. Never raises."""
    last = text.rfind(" ", start, end) + 1 or start
    for at, regex in ((last, _LEGAL_AT), (end, _LEGAL_AFTER)):
        m = regex.match(text, at)
        if m and m.end() > end:
            return m.end()
    return end


def legal_form_evidence(span: str) -> float:
    """ORGANIZATION votes for a name that ends with a legal form of several tokens or holds
    "&" between capitalised words (4 and 3). Never raises."""
    if _LEGAL_IN.search(span):
        return 4.0
    if re.search(r"[^\W\d_][\w.'’]*\s+&\s+[^\W\d_]", span) and span[:1].isupper():
        return 3.0
    return 0.0


def _fits(acronym: str, name: str) -> bool:
    """Whether the letters of ``acronym`` appear in order in ``name``, the first one
    opening it ("NKSB" of "Norrbottens Kraftsamband", "FIMA" of "Fonderia Italiana …")."""
    letters = [c for c in fold(acronym) if c.isalnum()]
    folded = fold(name)
    if not letters or not folded.startswith(letters[0]):
        return False
    at = 0
    for c in letters:
        at = folded.find(c, at)
        if at < 0:
            return False
        at += 1
    return True


def acronym_pairs(text: str, names: Iterable[Span]) -> list[tuple[Span, Span]]:
    """(acronym span, name span) for each acronym defined next to a candidate name of two
    words or more: "Name Words (ABC)" or "ABC (the Name Words)", its letters in order in
    the name. ``names``: candidate spans (start, end offsets). Never raises."""
    out = []
    for a, b in names:
        name = text[a:b]
        if " " not in name:
            continue
        m = _ACRONYM_AFTER.match(text, b)
        if m and _fits(m.group(1), name):
            out.append(((m.start(1), m.end(1)), (a, b)))
        m = _ACRONYM_BEFORE.search(text[max(0, a - 20) : a])
        if m and _fits(m.group(1), name):
            off = max(0, a - 20)
            out.append(((off + m.start(1), off + m.end(1)), (a, b)))
    return out


def lead_phrase(lowered: list[str]) -> bool:
    """Whether a name's words (lower case) open with an institution phrase of
    :data:`resources.privacy.anonymise.lexicon.ORG_LEAD_PHRASES` and go on after it."""
    words = fold(" ".join(lowered)).replace("đ", "d").split()
    return any(words[: len(p.split())] == p.split() and len(words) > len(p.split()) for p in lex.ORG_LEAD_PHRASES)


def council_places(text: str, names: Iterable[Span]) -> list[Span]:
    """Spans of a place named alone that also opens the name of a local body among
    ``names`` ("Kerrowmoor" of "Kerrowmoor Parish Council": the words before an area word
    of :data:`resources.privacy.anonymise.lexicon.ADMIN_AREA_WORDS`, the name ending with
    an institution word). Never raises."""
    names = list(names)
    places = set()
    for a, b in names:
        words = text[a:b].split()
        lowered = [w.strip(".,;:").lower() for w in words]
        if len(words) < 3 or lowered[-1] not in lex.ORG_HEAD_WORDS:
            continue
        cut = next((i for i, w in enumerate(lowered) if w in lex.ADMIN_AREA_WORDS), 0)
        if 1 <= cut <= 3 and all(w[:1].isupper() for w in words[:cut]):
            places.add(" ".join(words[:cut]))
    for a, b in names:  # a surname of a person named in full is no place ("Ambrose Tregarthen")
        words = text[a:b].split()
        if 2 <= len(words) <= 3 and not {w.lower() for w in words} & lex.ADMIN_AREA_WORDS:
            places.discard(words[-1])
    out = []
    for place in places:
        for m in re.finditer(rf"(?<![\w'’-]){re.escape(place)}(?![\w'’-]|\s+[A-Z])", text):
            if not any(a <= m.start() and m.end() <= b and (a, b) != m.span() for a, b in names):
                out.append(m.span())  # not a part of another name ("Ambrose Penhaligon")
    return out


def share_votes(groups: Mapping[str, dict[str, float]], pairs: Iterable[tuple[str, str]]) -> None:
    """Give an acronym and the name it abbreviates (surface forms in ``groups``) the sum of
    their votes, plus one ORGANIZATION vote (a defined acronym mostly names a body)."""
    for acronym, name in pairs:
        if acronym not in groups or name not in groups or acronym == name:
            continue
        total = {k: groups[acronym][k] + groups[name][k] for k in groups[name]}
        total["ORGANIZATION"] += 1.0
        groups[acronym].update(total)
        groups[name].update(total)
