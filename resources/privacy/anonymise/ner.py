"""Stage 2, ``ner`` strategy: :class:`NERRecogniser`, a trained NER model (spaCy's
en_core_web_sm 3.8.0 by default, its meta checked at load (resources/privacy/anonymise/loaders.py); or a named spaCy
pipeline or transformers token-classification model), spans typed by evidence votes and
propagated to every mention."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from resources.privacy.anonymise import cues
from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise import spans as spans_mod
from resources.privacy.anonymise import structure
from resources.privacy.anonymise.base import Entity
from resources.privacy.anonymise.loaders import NER_LABELS, fold, load_ner_pipeline, place_names
from resources.privacy.anonymise.rules import _STOP, _UP, NAME_WORD, RuleBasedNER, _alternation, _is_stop

# --------------------------------------------------------------------------- stage 2: NER model
_CAP_WORD = re.compile(rf"[{_UP}][\w'’.-]*")
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
    answered called emailed e-mailed confirmed decided grew phoned rang texted plays played scored keeps kept sells
    sold owns owned manages managed chaired proposed blamed promised planted objected stayed wants wanted hopes hoped
    knows knew thinks thought believes believed spent spends pays paid rents rented weaves weaved studied studies
    sailed presented presents retired married divorced died smiled laughed cried agreed refused admitted denied
    """.split()
)


def _given(word: str) -> bool:
    """Whether ``word`` (lower case; either part of "Jean-Bosco") is a known given name."""
    return any(w in lex.GIVEN_NAMES or w in lex.GIVEN_NAMES_WORLD for w in (word, *word.split("-")[:1]))


def _person_verb(word: str) -> bool:
    """Whether ``word`` is a form of a verb whose subject is mostly a person ("sail" of "sailed")."""
    w = word.lower()
    return bool({w, w + "s", w + "es", w + "ed", w + "d", w[:-1] + "ied"} & _PERSON_VERBS)


_STRONG_PLACE_PREPOSITIONS = frozenset({"in", "near", "outside", "inside", "around", "across", "through", "into", "à", "nach",
                                        "above", "below", "beyond", "beneath"})
# nouns that, right before a name, say what kind of body it is ("the charity X", "its supplier, X")
_ORG_APPOSITION_NOUNS = frozenset(
    "charity firm company publisher broadcaster airline supplier retailer manufacturer brand startup insurer lender "
    "operator carrier ngo cooperative employer contractor subsidiary club".split())
# verbs whose object is mostly a person: "hired Wanbli Iron Shell", "fired X"
_PERSON_OBJECT_VERBS = frozenset("hired fired promoted interviewed dismissed sacked appointed married arrested".split())
# prepositions that make a name the complement of a noun before it ("the mayor of X said"):
# a verb after the name has that noun as its subject, not the name
_COMPLEMENT_PREPOSITIONS = frozenset({"of", "in", "at", "from", "near", "for"})


def trade_name(lowered: list[str], given_first: bool) -> bool:
    """Whether a name of two words or more opens or ends with a trade or institution noun
    of another language (:data:`resources.privacy.anonymise.lexicon.ORG_TRADE_WORDS`:
    "Molino Alpino", "Västkust Tidning", "Demirel Mobilya") and no known given name opens it.

    ``lowered``: the name's words in lower case, punctuation stripped; ``given_first``:
    whether a known given name opens it ("Ana Molino" is a person). Never raises.
    """
    return len(lowered) >= 2 and not given_first and (lowered[0] in lex.ORG_TRADE_WORDS or lowered[-1] in lex.ORG_TRADE_WORDS)


def surname_comma_given(text: str, start: int, end: int) -> bool:
    """Whether the word ``text[start:end]`` is a surname written before a given name
    ("Schneider, Katharina (born …)"): a comma, then a known given name
    (:func:`_given`) that no further capitalised word follows.

    ``start``/``end``: character offsets of one word in ``text``. Never raises.
    """
    m = re.match(rf",\s+([{_UP}][\w'’-]+)(?!\s+[{_UP}])", text[end : end + 40])
    return bool(m) and _given(m.group(1).lower()) and m.group(1).lower() not in lex.AMBIGUOUS_GIVEN_NAMES


def _given_first(lowered: list[str]) -> bool:
    """Whether a known given name (not an ambiguous one) opens a name of two words or more."""
    return len(lowered) >= 2 and _given(lowered[0]) and lowered[0] not in lex.AMBIGUOUS_GIVEN_NAMES


def _institution_word(lowered: list[str], given_first: bool) -> bool:
    """Whether an institution word ends or opens the name (an institution phrase included),
    or a trade word does where no given name opens it (:func:`trade_name`)."""
    return (lowered[-1] in lex.ORG_HEAD_WORDS or lowered[0] in lex.ORG_LEAD_WORDS or trade_name(lowered, given_first)
            or cues.lead_phrase(lowered))


def institutional(lowered: list[str]) -> bool:
    """Whether a name's words (lower case, punctuation stripped) hold an institution word:
    one ending or opening it, a legal form or institution ending, or a trade word. Never raises."""
    return _institution_word(lowered, _given_first(lowered)) or spans_mod.organisation_evidence(lowered) > 0


_AFTER_NAME = re.compile(r"(?:\s+(?:has|had|have|was|is|will|would|also|then|now|later|still|never|often|always|once|has been|had been))*\s+([\w-]+)")


def _bare_part_evidence(text: str, start: int, end: int, votes: Mapping[tuple[int, int], object]) -> float:
    """PERSON votes (1.5) for a name of two or three words from a mention elsewhere of its
    last word alone ("Iestyn Pennant … Pennant lives in …"): followed by a verb whose
    subject is mostly a person, or by a possessive and a person's belonging. A mention
    inside another multi-word candidate is not alone. Never raises."""
    words = text[start:end].split()
    part = words[-1].strip(".,;:") if 2 <= len(words) <= 3 else ""
    if len(part) < 3 or not part[0].isupper():
        return 0.0
    for m in re.finditer(rf"(?<![\w'’-]){re.escape(part)}(?![\w-])", text):
        if start <= m.start() < end or any(a <= m.start() < b and " " in text[a:b] for a, b in votes):
            continue
        after = _AFTER_NAME.match(text[m.end() : m.end() + 40])
        if (after and _person_verb(after.group(1))) or spans_mod.person_evidence(text, m.start(), m.end()) >= 2.5:
            return 1.5
    return 0.0


def heading_word(word: str) -> bool:
    """Whether ``word``, opening a sentence before "for", "to", "from", "by" or "with" and a
    name, is an English noun that heads the line ("Invoice for …", "Letter to …") and no
    word of an institution's or a place's name ("Ministry for …", "Bay of …") nor a given
    name. Never raises."""
    w = word.lower()
    return (spans_mod.Dictionary.is_noun(word) and w not in lex.ORG_HEAD_WORDS and w not in lex.ORG_LEAD_WORDS
            and w not in lex.PLACE_HEAD_WORDS and w not in lex.PLACE_LEAD_WORDS and w not in lex.PLACE_OF_NOUNS
            and w not in lex.GIVEN_NAMES and w not in lex.ADMIN_AREA_WORDS and w not in lex.ORG_TRADE_WORDS)


def _without_sentence_opener(text: str, span: tuple[int, int], propn: Any) -> tuple[int, int]:
    """``span`` (start, end offsets into ``text``) without a sentence's opening word that the
    tagger reads as no proper noun ("Later Hordiienko wrote", "Meanwhile Ada Ruiz"): an
    English word, not a given name nor a place's lead word, followed by a capitalised word
    (issue 26, fault 3: a replacement swallowed the neighbouring word); and an English noun
    with a preposition after it, whatever the tagger says ("Invoice for Ana Diaz"). ``propn(offset)``:
    True / False from the tagger, None without one (then the span is kept). Never raises."""
    start, end = span
    m = re.match(r"([A-Za-z]+)\s+(?:for|to|from|by|with)\s+(?=[A-Z])", text[start:end])
    if m and spans_mod.sentence_initial(text, start) and heading_word(m.group(1)):
        return start + m.end(), end  # "Invoice for Ana Diaz": a heading noun and its preposition
    m = re.match(r"([A-Za-z]+)\s+(?=[A-Z])", text[start:end])
    if not m or propn(start) is not False or not spans_mod.sentence_initial(text, start):
        return span
    word = m.group(1).lower()
    if word in lex.GIVEN_NAMES or word in lex.PLACE_LEAD_WORDS or not spans_mod.Dictionary.is_common(m.group(1)):
        return span
    return start + m.end(), end


def _weak_openers(text: str, votes: Mapping[tuple[int, int], Mapping[str, float]]) -> list[tuple[int, int]]:
    """Spans that are one English word opening a sentence or after "the", every time they
    occur, with no more evidence than the model's one vote ("Complaint filed by …", "Bill
    to …", "the Update"): a capitalised common word, not a name. Never raises."""
    forms: dict[str, list[tuple[int, int]]] = {}
    for key in votes:
        forms.setdefault(text[key[0] : key[1]], []).append(key)
    out = []
    for form, keys in forms.items():
        if " " in form or not spans_mod.Dictionary.is_common(form):
            continue
        if all((spans_mod.sentence_initial(text, a) or re.search(r"(?<![\w])the\s+$", text[max(0, a - 5) : a]))
               and sum(votes[(a, b)].values()) <= 1.0 for a, b in keys):
            out.extend(keys)
    return out


_STREET_WORDS = frozenset(w.rstrip(".") for w in lex.STREET_SUFFIXES) | {"Straße", "Strasse", "Allee", "Gasse", "Platz", "Weg"}


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
    gazetteer place (2.5), a place preposition before a single word (0.75: "in", "near"),
    an acronym (ORGANIZATION 1.5), "the charity X" (ORGANIZATION 3), "hired X" (PERSON
    1.5), a bare later mention of the last word before a person's verb (PERSON 1.5: "…
    Pennant. Pennant lives"). The model votes once per span and label, however many pieces
    it cut the name into; a lone common English word opening a sentence or after "the"
    with only the model's vote is dropped ("Complaint filed by"). Every mention with the
    same text shares its votes, a surname alone typed a person lends its votes to the
    full name (not an institution's), and a surname or given name alone joins the votes
    of the full name it belongs to. Finally every occurrence of a typed
    form (and a person's surname and given name) anywhere in the text is a mention
    (consistent-mention propagation). Word lists: :mod:`resources.privacy.anonymise.lexicon`.
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
        spans, proper, _, _ = self.analyse(text)
        return spans, proper

    def analyse(self, text: str) -> tuple[list[tuple[int, int, str | None, float]], list[tuple[int, int]] | None,
                                           Callable[[int], bool | None], set[tuple[int, int]]]:
        """:meth:`model_spans`, plus ``propn(offset)`` (whether the tagger calls the word at
        that offset a proper noun; None without a tagger) and the spans the model labels as
        nationalities, languages or dates (never names on their own)."""
        kind, nlp = load_ner_pipeline(self.model, self.kind)
        if kind == "transformers":
            out = []
            for r in nlp(text):
                label = str(r.get("entity_group") or r.get("entity") or "").split("-")[-1].upper()
                if label in self.labels and float(r.get("score", 1.0)) >= self.score_threshold:
                    out.append((int(r["start"]), int(r["end"]), self.labels[label], float(r.get("score", 1.0))))
            return out, None, lambda offset: None, set()
        doc = nlp(text)
        tagged = doc.has_annotation("TAG") or doc.has_annotation("POS")
        proper = [(t.idx, t.idx + len(t)) for t in doc if t.pos_ == "PROPN" or t.tag_ in ("NNP", "NNPS")] if tagged else None
        starts = {t.idx for t in doc if t.pos_ == "PROPN" or t.tag_ in ("NNP", "NNPS")}
        other = {(e.start_char, e.end_char) for e in doc.ents if e.label_ in ("NORP", "LANGUAGE", "DATE", "TIME")}
        spans = [(e.start_char, e.end_char, self.labels[e.label_], 1.0) for e in doc.ents if e.label_ in self.labels]
        return spans, proper, (lambda offset: offset in starts) if tagged else (lambda offset: None), other

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
        if not span or not span[0].isupper():
            return None
        return start, end

    def find(self, text: str) -> list[Entity]:
        votes: dict[tuple[int, int], dict[str, float]] = {}

        def vote(start: int, end: int, kind: str | None, weight: float) -> None:
            cleaned = self._clean(text, start, end)
            if cleaned is None:
                return
            cleaned = _without_sentence_opener(text, cleaned, propn)
            box = votes.setdefault(cleaned, {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})
            if kind in box:
                box[kind] += weight

        spans, proper, propn, other = self.analyse(text)
        chunks = [c for c in spans_mod.name_chunks(text, propn, keep={a for a, _, _, _ in spans}) if c not in other]
        model_votes: set[tuple[int, int, str | None]] = set()
        for start, end, kind, _ in spans:
            for a, b in spans_mod.repair(text, start, end, chunks):
                if " " not in text[a:b] and spans_mod.Dictionary.is_stop(text[a:b]):
                    continue  # a lone stop or label word is no name ("IBAN GB82 …", "Il signor …")
                tail = re.search(r"\s+(\w+)$", text[a:b])
                if tail and tail.group(1) in lex.NAME_PARTICLES:  # a name does not end with "der", "de" (but "AB" is a legal form)
                    b = a + tail.start()
                    if " " not in text[a:b] and not any(c0 <= a and b <= c1 for c0, c1 in chunks):
                        continue  # "Mitglied der …": a common word the chunks left out, before a name
                if (a, b, kind) in model_votes:
                    continue  # one vote per span and label, however many pieces the model cut it into
                model_votes.add((a, b, kind))
                vote(a, b, kind, 1.0)
        from_model = set(votes)
        rule_streets = []
        if self._rule is not None:
            for e in self._rule.find(text):
                if e.type == "LOCATION" and re.search(r"\d", e.text):  # street addresses are typed by their own rule
                    rule_streets.append((e.start, e.end))
                elif any(a < e.end < b or a < e.start < b for a, b in chunks):
                    continue  # it cuts a name in two ("X of Bugesera Health" of "… Health Alliance")
                elif proper is None or any(a < e.end and e.start < b for a, b in proper):
                    vote(e.start, e.end, e.type, 1.5)  # a rule span needs a proper noun in it (not "Who wrote?")
        streets, towns = spans_mod.address_spans(text, rule_streets)
        addresses = sorted(set(streets) | set(towns))
        for start, end in chunks:
            if (start, end) not in votes and not any(a < end and start < b for a, b in addresses):
                vote(start, end, None, 0.0)
        for m in _ORG_HEAD_RE.finditer(text):  # "Lakeshore Legal Aid": an institution word ends it
            start = m.start()
            while True:  # not the sentence's first word when that is a common word ("The", "Our")
                word = re.match(r"\S+\s+", text[start : m.end()])
                if word and _is_stop(word.group().strip()) and start + word.end() < m.end():
                    start += word.end()
                else:
                    break
            if any(a < m.end() < b for a, b in chunks):  # the name goes on ("… Health" of "… Health Alliance")
                continue
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
        # street addresses and the towns after them are places, whatever overlaps them
        for key in [k for k in votes if any(a < k[1] and k[0] < b for a, b in addresses)]:
            del votes[key]
        for a, b in addresses:
            votes[(a, b)] = {"PERSON": 0.0, "LOCATION": 6.0 if re.search(r"\d", text[a:b]) else 4.0, "ORGANIZATION": 0.0}
        self._round4(text, votes, vote)
        structure.widen(text, votes)  # "… sh.p.k.", "… B.V." with its closing dot
        pairs = cues.acronym_pairs(text, votes)
        for (a, b), _ in pairs:  # a defined acronym is a candidate ("NKSB (the Norrbottens Kraftsamband)")
            vote(a, b, None, 0.0)
        self._weigh(text, votes)
        for key in cues.council_places(text, votes):  # "Kerrowmoor" of "Kerrowmoor Parish Council"
            votes.setdefault(key, {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})["LOCATION"] += 3.0
        for key in _weak_openers(text, votes):
            del votes[key]
        links = [(text[a:b], text[c:d]) for (a, b), (c, d) in pairs]
        return self._propagate(text, self._type(text, votes, links))

    @staticmethod
    def _round4(text: str, votes: dict[tuple[int, int], dict[str, float]], vote: Callable[[int, int, str | None, float], None]) -> None:
        """Widen each candidate to a legal form of several tokens after it ("… Sp. z o.o."),
        dropping the candidates that form overlaps."""
        for key in list(votes):
            end = cues.legal_form_end(text, *key)
            if end == key[1] or key not in votes:
                continue
            box = votes.pop(key)
            for other in [k for k in votes if k[0] < end and key[0] < k[1]]:
                del votes[other]
            votes[(key[0], end)] = box

    def _weigh(self, text: str, votes: dict[tuple[int, int], dict[str, float]]) -> None:
        """Add the evidence of the words in and around each span to its votes."""
        for (start, end), box in votes.items():
            span = text[start:end]
            words = span.split()
            lowered = [w.strip(".,;:").lower() for w in words]
            before = re.findall(r"[\w'’]+", text[max(0, start - 40) : start])
            prev = before[-1].lower() if before else ""
            if prev in lex.PERSON_LEAD_WORDS or prev in {t.lower() for t in lex.TITLES}:
                box["PERSON"] += 3.0
            elif prev in _PERSON_OBJECT_VERBS:
                box["PERSON"] += 1.5
            elif prev in _ORG_APPOSITION_NOUNS:
                box["ORGANIZATION"] += 3.0
            if re.fullmatch(r"[A-Z]{2,6}", span) and fold(span) not in place_names():
                box["ORGANIZATION"] += 1.5  # an acronym ("FIMA", "KNUST") names an institution more than a person
            given_first = _given_first(lowered)
            if given_first:
                box["PERSON"] += 2.0
            known_org = span.lower() in lex.KNOWN_ORGANIZATIONS and (len(span) > 4 or span.isupper())  # WHO, not "Who"
            institutional = _institution_word(lowered, given_first)
            if institutional or known_org:
                box["ORGANIZATION"] += 3.0
            box["ORGANIZATION"] += spans_mod.organisation_evidence(words) + cues.legal_form_evidence(span)
            place = fold(span) in place_names()
            if place:  # a listed place that an institution word opens ("Hôpital Saint-Louis") is mostly the institution;
                # not one that ends with it ("Brooklyn Center", "Falls Church" are towns)
                box["LOCATION"] += 1.5 if lowered[0] in lex.ORG_LEAD_WORDS or lowered[0] in lex.ORG_TRADE_WORDS else 2.5
            if prev in _STRONG_PLACE_PREPOSITIONS:
                box["LOCATION"] += 1.5
            elif prev == "from":
                box["LOCATION"] += 1.25 if len(words) == 1 else 1.0
            elif len(words) == 1 and prev in lex.LOCATION_LEAD_WORDS:
                box["LOCATION"] += 0.75
            box["LOCATION"] += spans_mod.place_evidence(text, start, end)
            box["PERSON"] += spans_mod.person_evidence(text, start, end)
            street = words[-1].strip(".,") in _STREET_WORDS
            if street:
                box["LOCATION"] += 3.0
            for kind, weight in spans_mod.shape_evidence(words, given_first).items():
                box[kind] += 0.0 if institutional else weight
            after = _AFTER_NAME.match(text[end : end + 40])
            if after and _person_verb(after.group(1)) and prev not in _COMPLEMENT_PREPOSITIONS:
                box["PERSON"] += 1.5  # not "the council of Little Hadham thanked": the council thanked
            before_comma = re.search(rf"([{_UP}][\w'’-]*),\s+$", text[max(0, start - 40) : start])
            if len(words) == 1 and not place and (surname_comma_given(text, start, end) or (
                    before_comma and surname_comma_given(text, start - len(before_comma.group()), start - len(before_comma.group()) + len(before_comma.group(1))))):
                box["PERSON"] += 3.0  # "Schneider, Katharina": a surname before a given name, and the given name
            place_shape = len(words) >= 2 and (lowered[0] in lex.PLACE_LEAD_WORDS or lowered[-1] in lex.PLACE_HEAD_WORDS)
            if (len(words) in (2, 3, 4) and not institutional and not street and prev not in _STRONG_PLACE_PREPOSITIONS
                    and not place and not place_shape and all(w[:1].isupper() for w in words)
                    and not (spans_mod.Dictionary.head_noun(lowered[-1]) and not spans_mod.is_place(lowered[-1]))):
                box["PERSON"] += 1.25  # two to four capitalised words, no institution word, not a place: mostly a person
            box["PERSON"] += _bare_part_evidence(text, start, end, votes)
            for kind, weight in structure.evidence(text, start, end).items():
                box[kind] += weight
            if structure.after_the(text, start, end):  # "the Orfeó de …": a body, no person
                box["ORGANIZATION"], box["PERSON"] = box["ORGANIZATION"] + box["PERSON"], 0.0
            if not any(box.values()):  # a name with no evidence of its type is still a name
                box["LOCATION" if len(words) == 1 and (prev in lex.LOCATION_LEAD_WORDS or prev == "at")
                    else "ORGANIZATION" if structure.after_the(text, start, end) else "PERSON"] += 0.5

    @staticmethod
    def _type(text: str, votes: dict[tuple[int, int], dict[str, float]], links: list[tuple[str, str]] = ()) -> dict[str, str]:
        """One type per surface form: mentions with the same text share votes, a lone
        surname or given name joins its full name's, and an acronym its defined name's
        (``links``: (acronym, name) forms)."""
        groups: dict[str, dict[str, float]] = {}
        for (start, end), box in votes.items():
            total = groups.setdefault(text[start:end], {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0})
            for k, v in box.items():
                total[k] += v
        cues.share_votes(groups, links)
        lone_person = {form: total["PERSON"] for form, total in groups.items()
                       if " " not in form and total["PERSON"] > 0 and max(total, key=total.get) == "PERSON"}
        for full, total in groups.items():  # a surname alone that is a person's votes for the full name
            parts = full.split()  # (not a first word: "Quartermaine Aggregates" is named after a person)
            if len(parts) >= 2 and not institutional([w.strip(".,;:").lower() for w in parts]):
                total["PERSON"] += lone_person.get(parts[-1], 0.0)
        for form, total in list(groups.items()):
            if " " in form:
                continue
            for full, other in groups.items():
                parts = full.split()
                if len(parts) >= 2 and form in (parts[0], parts[-1]) and max(other, key=other.get) == "PERSON" and other["PERSON"] > 0:
                    total["PERSON"] += other["PERSON"] + 2.0  # a part of a person's name in the same text is that person
        typed: dict[str, str] = {}
        for form, total in groups.items():
            best = max(total, key=total.get)
            if total[best] > 0:
                typed[form] = best
        return typed

    def _propagate(self, text: str, typed: dict[str, str]) -> list[Entity]:
        """Every occurrence of a typed form is a mention, and so is a person's surname
        (with its particles: "van Rijckevorsel", "Van Rijckevorsel") and given name, and a
        town named with its postcode ("11000 Beograd") named without it."""
        forms: dict[str, str] = dict(typed)
        for form, kind in typed.items():
            parts = form.split()
            extra = []
            if kind == "PERSON" and len(parts) >= 2:
                extra = [parts[0], parts[-1]]
                if len(parts) >= 3 and parts[1].lower() in lex.NAME_PARTICLES:
                    tail = " ".join(parts[1:])
                    extra += [tail, tail[0].upper() + tail[1:]]
            elif kind == "LOCATION" and re.match(r"(?:[A-Z]{1,2}-)?\d{4,5}\s+\S", form):
                extra = [form.split(None, 1)[1]]
            for part in extra:
                if len(part) > 2 and part[0].isupper() and part.lower() not in _STOP and part.lower() not in lex.NAME_PARTICLES \
                        and part not in forms:
                    forms[part] = kind
        out = []
        for form, kind in sorted(forms.items(), key=lambda kv: -len(kv[0])):
            for m in re.finditer(rf"(?<![\w]){re.escape(form)}(?![\w])", text):
                out.append(Entity(kind, m.start(), m.end(), m.group(), self.name, 0.85))
        return out
