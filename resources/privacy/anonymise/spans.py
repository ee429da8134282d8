"""Span helpers of the ``ner`` strategy (issue 26): capitalised-name chunks, repair of a
model's spans, street addresses and gazetteer-less place, person and organisation cues.

A small NER model misses names it has never seen ("Caoimhe Breathnach", an invented
town) and draws wrong borders ("Brackwater to Quellmoor" as one span, "Villaverde" of
"Villaverde del Soto"). In English prose a capitalised word in mid-sentence is a proper
noun, so :func:`name_chunks` offers every run of capitalised words (joined by name
particles, "&", and "of"/"for" after an institution word) as a candidate, dropping a
sentence's first word only when it is a common word (spaCy's tagger says it is not a
proper noun and the English dictionary knows it). :func:`repair` cuts a model span at a
lower-case word that is not a name particle and at a sentence end, and widens it to the
chunk it lies in. :func:`address_spans` finds street addresses in English, German,
Romance, Slavic, Baltic, Nordic and Hungarian forms and the town after them (with its
postcode). The ``*_evidence`` functions are the context votes (weights in the docstring
of :class:`resources.privacy.anonymise.ner.NERRecogniser`). Word lists: :mod:`resources.privacy.anonymise.lexicon`.
"""

from __future__ import annotations

import re
import threading
from typing import Callable, Iterable

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.loaders import PACKAGED_NER_MODEL, fold, load_ner_pipeline, place_names
from resources.privacy.anonymise.structure import is_connector

Span = tuple[int, int]

# a word: letters/digits with inner apostrophes, hyphens, dots and slashes ("O'Connell",
# "Thornwick-on-Sea", "S.p.A", "A/S", "Haʻapai"); a trailing dot or apostrophe is not part of it
WORD = re.compile(r"[^\W_](?:[\w]|['’](?=\w)|[-./](?=[^\W_]))*")
_ABBREVIATIONS = frozenset({"st", "mt", "ft", "ste", "dr", "mr", "mrs", "ms", "prof", "ul", "g", "al", "pl", "sv", "nr", "no"})
_SENTENCE_END = re.compile(r"(?:^|[.!?:;…]|\n)[\s\"“‘'(\[«»—–-]*$")
_STOP_EXTRA = frozenset(
    """
    i i'm i've i'd i'll monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december mr mrs ms dr prof sir madam mx miss dear hi hello regards thanks
    cheers subject re fwd from to cc attendees attendance minutes note ok yes no
    iban bic swift vat tel fax login il gli ein eine einen einem einer une
    """.split()
) | lex.MONTHS_AND_DAYS
_PARTICLE_SPLIT = frozenset(lex.NAME_PARTICLES) | {"of", "for", "&", "o"}  # "o": Māori "of" ("Te Rūnanga o …")
# the endings compared with folded words (fold: lower case, accents off; "şirketi" -> "sirketi")
ORG_ENDINGS = tuple(sorted({fold(e) for e in lex.ORG_WORD_ENDINGS}))
_COMPOUND_ENDINGS = tuple(sorted({fold(e) for e in lex.ORG_COMPOUND_ENDINGS}))
_PLACE_ENDINGS = tuple(sorted({fold(e) for e in lex.PLACE_WORD_ENDINGS}))


def is_capitalised(word: str) -> bool:
    """A name-like word: upper-case first letter (after d'/l'), or a legal form ("A/S")."""
    if word in lex.ORG_LEGAL_FORMS:
        return True
    core = re.sub(r"^[dlDL]['’]", "", word)
    return bool(core) and core[0].isupper() and not any(c.isdigit() for c in core)


def _is_acronym(word: str) -> bool:
    return word.isupper() and len(word) <= 5


class Dictionary:
    """English words from the packaged spaCy pipeline's lemmatizer tables (its
    ``lemma_index``: WordNet 3.0's noun, verb, adjective and adverb lemmas) and spaCy's
    stop words. Empty (only the stop words) when spaCy or the pipeline is missing."""

    _lock = threading.Lock()
    _words: dict[str, frozenset[str]] | None = None

    @classmethod
    def tables(cls) -> dict[str, frozenset[str]]:
        with cls._lock:
            if cls._words is None:
                words: dict[str, frozenset[str]] = {}
                try:
                    from spacy.lang.en.stop_words import STOP_WORDS

                    words["stop"] = frozenset(STOP_WORDS) | _STOP_EXTRA
                    _, nlp = load_ner_pipeline(PACKAGED_NER_MODEL, "spacy")
                    index = nlp.get_pipe("lemmatizer").lookups.get_table("lemma_index")
                    for pos in ("noun", "verb", "adj", "adv"):
                        words[pos] = frozenset(index[pos])
                except Exception:  # noqa: BLE001 - no dictionary: only the built-in stop list
                    words.setdefault("stop", _STOP_EXTRA)
                cls._words = words
            return cls._words

    @staticmethod
    def _lemmas(word: str) -> list[str]:
        w = word.lower()
        out = [w]
        for suffix, repl in (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"), ("ly", "")):
            if w.endswith(suffix) and len(w) > len(suffix) + 2:
                out.append(w[: -len(suffix)] + repl)
        return out

    @classmethod
    def is_stop(cls, word: str) -> bool:
        return word.lower() in cls.tables().get("stop", frozenset())

    @classmethod
    def is_common(cls, word: str) -> bool:
        """Whether ``word`` is an English word (any part of speech, or a stop word)."""
        t = cls.tables()
        if cls.is_stop(word):
            return True
        return any(lemma in t.get(pos, ()) for lemma in cls._lemmas(word) for pos in ("noun", "verb", "adj", "adv"))

    @classmethod
    def head_noun(cls, word: str) -> float:
        """How surely ``word`` ending a name is an English common noun: 2 for a regular
        plural of a noun ("Carpets", "Fisheries", "…works"), 1 for a singular noun ("Cargo"),
        0 otherwise (a plural whose singular is no noun: "Hughes", listed in WordNet as people)."""
        nouns = cls.tables().get("noun", frozenset())
        w = word.lower()
        if w.endswith("works"):
            return 2.0
        if w.endswith("s") and not w.endswith("ss"):
            singulars = [w[:-1], w[:-2] if w.endswith("es") else "", w[:-3] + "y" if w.endswith("ies") else ""]
            return 2.0 if any(x and x in nouns for x in singulars) else 0.0
        return 1.0 if w in nouns else 0.0

    @classmethod
    def only_adjective(cls, word: str) -> bool:
        """Whether ``word``'s only English reading is an adjective (no stop word, noun, verb or
        adverb): a given name that WordNet also lists as a rare adjective ("Ane")."""
        t = cls.tables()
        w = word.lower()
        return w in t.get("adj", ()) and not any(w in t.get(pos, ()) for pos in ("stop", "noun", "verb", "adv"))

    @classmethod
    def is_noun(cls, word: str) -> bool:
        """Whether ``word`` (or its singular) is an English common noun."""
        nouns = cls.tables().get("noun", frozenset())
        return any(lemma in nouns for lemma in cls._lemmas(word)[:4])


def sentence_initial(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence, a line, or what follows a colon."""
    return bool(_SENTENCE_END.search(text[max(0, start - 12) : start])) or start == 0


def name_chunks(text: str, propn: Callable[[int], bool | None] | None = None, keep: Iterable[int] = ()) -> list[Span]:
    """Runs of capitalised words that may be names, as character spans.

    ``propn(offset)``: whether the tagger calls the word at ``offset`` a proper noun
    (None when there is no tagger); ``keep``: offsets where the NER model starts an
    entity. A run's first words are dropped while they are stop words, titles or role
    words, or sentence-initial English words ("Yesterday", "Contact") unless the model
    starts an entity there or they open a name (a given name, "Little", "Nowe"); a run of
    only English words that the tagger does not call proper nouns, a lone acronym and a
    lone stop word are not offered.
    """
    keep = set(keep)
    words = list(WORD.finditer(text))
    out: list[Span] = []
    i = 0
    while i < len(words):
        if not is_capitalised(words[i].group()):
            i += 1
            continue
        run = [i]
        j = i
        while j + 1 < len(words):
            w, nxt = words[j], words[j + 1]
            gap = text[w.end() : nxt.start()]
            lw = w.group().lower()
            if gap == " " and is_capitalised(nxt.group()) and nxt.group().lower() not in _STOP_EXTRA:
                run.append(j + 1)
                j += 1
                continue
            if gap == ". " and (len(w.group()) == 1 or lw in _ABBREVIATIONS) and is_capitalised(nxt.group()):
                run.append(j + 1)
                j += 1
                continue
            connector = gap == " " and is_connector(nxt.group())  # "Samahang Magsasaka ng Laguna"
            if gap in (" & ", " ") and (nxt.group().lower() in _PARTICLE_SPLIT | {"and"} or connector):
                k = j + 1  # particles between capitalised words ("de la", "van der", "of")
                while k < len(words) and k - j <= 3 and (words[k].group().lower() in _PARTICLE_SPLIT or (k == j + 1 and connector)) \
                        and text[words[k - 1].end() : words[k].start()] == " ":
                    k += 1
                particles = [words[m].group().lower() for m in range(j + 1, k)]
                joins = gap == " " and k < len(words) and text[words[k - 1].end() : words[k].start()] == " " and is_capitalised(words[k].group())
                institutional = lw in lex.ORG_HEAD_WORDS or lw in lex.ORG_LEAD_WORDS or fold(lw).endswith(ORG_ENDINGS)
                if joins and ({"of", "for", "o"} & set(particles)) and not institutional:
                    joins = False
                if joins and "and" in particles:
                    joins = False
                if joins:
                    run.extend(range(j + 1, k + 1))
                    j = k
                    continue
            if gap == " & " and is_capitalised(nxt.group()):
                run.append(j + 1)
                j += 1
                continue
            if gap == " " and re.fullmatch(r"[dlDL]['’]", nxt.group()[:2]) and is_capitalised(nxt.group()):
                run.append(j + 1)
                j += 1
                continue
            break
        i = j + 1
        # drop leading stop, title and role words, and sentence-initial common words
        while run:
            first = words[run[0]].group()
            lower = first.lower()
            if lower in lex.PLACE_LEAD_WORDS and len(run) > 1 and not Dictionary.is_stop(words[run[1]].group()):
                break  # a place word opening a name, stop word or not ("Much Hadlow", "Upper Slaughter")
            if lower in _STOP_EXTRA or Dictionary.is_stop(first) or lower in lex.PERSON_LEAD_WORDS or lower.rstrip(".") in {t.lower() for t in lex.TITLES}:
                run.pop(0)
            elif sentence_initial(text, words[run[0]].start()) and Dictionary.is_common(first) and words[run[0]].start() not in keep \
                    and not (len(run) > 1 and (lower in lex.GIVEN_NAMES or lower in lex.PLACE_LEAD_WORDS)) \
                    and not (len(run) > 1 and propn and propn(words[run[0]].start()) and Dictionary.only_adjective(first)):
                run.pop(0)  # (a proper noun whose only English reading is a rare adjective, "Ane", opens the name)
            elif first[0].islower() or first == "&":  # a lower-case particle does not open a name
                run.pop(0)
            else:
                break
        while run and (words[run[-1]].group().lower() in _PARTICLE_SPLIT | {"and"}) and words[run[-1]].group() not in lex.ORG_LEGAL_FORMS:
            run.pop()
        for k in range(1, len(run) - 1):  # "Kundin von Harzer Volksbank": a person's word, then an institution
            if words[run[k]].group().lower() in lex.NAME_PARTICLES and organisation_evidence([words[m].group() for m in run[k + 1 :]]) \
                    and not organisation_evidence([words[m].group() for m in run[:k]]):
                run = run[k + 1 :]
                break
        if not run:
            continue
        first, last = words[run[0]], words[run[-1]]
        if len(run) == 1 and (_is_acronym(first.group()) or first.group().lower() in _STOP_EXTRA):
            continue
        if all(Dictionary.is_common(words[k].group()) for k in run) and not any(propn and propn(words[k].start()) for k in run):
            if len(run) == 1 or sentence_initial(text, first.start()):
                continue
        end = last.end()
        trail = re.search(r"['’]s$", last.group())  # a possessive is not part of the name
        if trail:
            end -= len(trail.group())
        out.append((first.start(), end))
    return out


def repair(text: str, start: int, end: int, chunks: Iterable[Span]) -> list[Span]:
    """A model span cut at lower-case words that are no name particle ("Brackwater to
    Quellmoor") and at sentence ends ("… Ltd. Inchcombe"), each piece widened to the
    name chunk it overlaps when it overlaps exactly one ("Villaverde" -> "Villaverde del
    Soto", "Agence Régionale de" -> "Agence Régionale de l'Eau")."""
    pieces: list[Span] = []
    piece_start = start
    prev = None
    for w in WORD.finditer(text, start, end):
        word = w.group()
        cut = False
        if not is_capitalised(word) and word.lower() not in _PARTICLE_SPLIT and not word[0].isdigit():
            cut = True
        elif prev is not None and re.fullmatch(r"\.\s+", text[prev.end() : w.start()]):
            if len(prev.group()) > 1 and prev.group().lower() not in _ABBREVIATIONS:  # a sentence ends here
                if text[piece_start : w.start()].strip():
                    pieces.append((piece_start, w.start()))
                piece_start = w.start()
        prev = w
        if cut:
            if text[piece_start : w.start()].strip():
                pieces.append((piece_start, w.start()))
            piece_start = w.end()
    if text[piece_start:end].strip():
        pieces.append((piece_start, end))
    chunks = list(chunks)
    out = []
    for a, b in pieces:
        seg = text[a:b]
        a += len(seg) - len(seg.lstrip(" ,.;:-"))
        b -= len(seg) - len(seg.rstrip(" ,.;:-"))
        if b <= a:
            continue
        inside = [c for c in chunks if c[0] < b and a < c[1]]
        if len(inside) == 1 and not re.search(r"\d", text[a:b]):
            out.append(inside[0])
        else:
            out.append((a, b))
    return out


# --------------------------------------------------------------------------- addresses
_UPPER = "".join(re.escape(chr(c)) for c in [*range(0x41, 0x250), *range(0x370, 0x530)] if chr(c).isupper())
_NAME = rf"(?:[dlDL]['’])?[{_UPPER}][\w'’ʻ-]*"
_STREET_WORD = r"(?:ul\.|ulica|al\.|aleja|os\.|g\.|gatan|gata|gate|gade|vej|veien|vegen|katu|tie|utca|u\.|út|tér|cesta|ulice|náměstí|nám\.|str\.|strada|calea|bulevardul|bd\.|rynek|plac|trg|ulitsa|prospekt|vulytsia|iela|tänav|rue|chemin|allée|impasse|quai|cours|route|calle|carrer|camino|avenida|rua|travessa|largo|via|viale|piazza|vicolo|corso|st\.|tee|maantee|puiestee|jalan|jln\.|jl\.|lorong|lrg\.|soi|thanon|odos|sokak|sokağı|caddesi|cad\.)"
# "<street name words> <number>" with a street word anywhere ("Liepų g. 7", "ul. Jaśminowa 14", "Strada Florilor 3")
_STREET_NUMBER_RE = re.compile(
    rf"(?<![\w])\d{{1,4}}[a-z]?,?\s+(?i:{_STREET_WORD})\s+(?:(?:{'|'.join(lex.NAME_PARTICLES)})\s+|[dlDL]['’])*{_NAME}(?:\s+{_NAME})?"
    rf"|(?i:(?<![\w]){_STREET_WORD})\s+(?:{_NAME}\s+){{0,3}}{_NAME}\s+\d{{1,4}}[A-Za-z]?(?:\s[A-Z]\b)?"
    rf"|(?<![\w])(?:{_NAME}\s+){{0,3}}{_NAME}\s+(?i:{_STREET_WORD})\s+\d{{1,4}}[A-Za-z]?\b"
    rf"|(?<![\w])(?:{_NAME}\s+)?{_NAME}(?i:katu|tie|gatan|gata|gate|gade|vej|veien|vegen|iela|tänav|utca|straße|strasse|weg|gasse|platz|allee|ring|damm|ufer)\s+\d{{1,4}}[A-Za-z]?(?:\s[A-Z]\b)?"
)
# "<street name words> <number>, <postcode> <town>" where the street has no street word ("Kneza Miloša 41, 11000 Beograd")
# a postcode: 4-5 digits with an optional country prefix ("LV-4201"), 3 + 2 digits (Czech,
# Slovak, Greek, Swedish: "059 42"), 3-4 digits (Japan: "507-0033"); Dutch letters after it
_POSTCODE = r"(?:(?:[A-Z]{1,2}-)?\d{4,5}|\d{3}\s\d{2}|\d{3}-\d{4})(?:\s[A-Z]{2})?"
_PARTICLES = "|".join(lex.NAME_PARTICLES)
# the street's own words may hold one lower-case street word of any language ("Ropka tee 14")
_BARE_STREET_RE = re.compile(
    rf"(?<![\w])((?:{_NAME}\s+){{0,3}}{_NAME}(?:\s+([^\W\d_A-Z]{{2,9}}))?\s+\d{{1,4}}[A-Za-z]?),\s+(?={_POSTCODE}\s+[^\W\d_])")
_POSTCODE_TOWN_RE = re.compile(
    rf"(?:(?<=,\s)|(?<=^)|(?<=\n))({_POSTCODE})\s+((?:{_NAME})(?:\s+(?:(?:{_PARTICLES})\s+)?(?:{_NAME}))*)")
# a house number, hyphenated blocks included ("2-7-5"), then capitalised words and a comma,
# after "at" or "to" ("lives at 12 Bracken Brae, Kilbrannock"): a street with no street word
_NUMBER_FIRST_RE = re.compile(rf"(?<=\b(?:at|to)\s)\d{{1,4}}(?:-\d{{1,4}}){{0,3}}[A-Za-z]?\s+((?:{_NAME}\s+){{0,2}}{_NAME})(?=,\s+[A-Z])")
# a house number before a street ("No. 12, Jalan …", "Nr. 4 …")
_HOUSE_NUMBER_BEFORE = re.compile(r"(?:No|Nr|Nº|№)\.?\s?\d{1,4}[A-Za-z]?,?\s+$")
# a postcode after a town ("Tajimi 507-0033")
_POSTCODE_AFTER = re.compile(r"\s+(?:\d{3}-\d{4}|\d{3}\s\d{2}|\d{5,6})(?![\w-])")
_UK_POSTCODE_RE = re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2}\b")


def address_spans(text: str, streets: Iterable[Span] = ()) -> tuple[list[Span], list[Span]]:
    """(street spans, town spans) of street addresses in ``text``.

    Streets: "<street word> <name> <number>", "<name> <street word> <number>", German and
    Nordic compound street names with a number, and "<name> <number>" right before a
    postcode; ``streets`` adds spans found elsewhere (the rule recogniser's English and
    Romance forms). Towns: the capitalised words after a street and a comma (postcode
    included, "LT-54311 Garliava", "Ashcombe Magna"), and a postcode + town after a comma
    or at a line start ("37412 Herzberg-Lonau").
    """
    street: list[Span] = [(m.start(), m.end()) for m in _STREET_NUMBER_RE.finditer(text)]
    street += [(m.start(1), m.end(1)) for m in _BARE_STREET_RE.finditer(text) if not (m.group(2) and Dictionary.is_stop(m.group(2)))]
    street += [(m.start(), m.end()) for m in _NUMBER_FIRST_RE.finditer(text) if not _common_run(m.group(1))]
    street += [s for s in streets]
    merged: list[Span] = []  # overlapping readings of one street are one span ("No. 12, Jalan …")
    for a, b in sorted((_house_number_start(text, a), b) for a, b in street):
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    street = merged
    towns: list[Span] = []
    for m in _POSTCODE_TOWN_RE.finditer(text):
        town = _trim_town(text, m.start(1), m.end(2))
        if town:
            towns.append(town)
    for a, b in street:
        m = re.match(rf",\s+((?:{_POSTCODE}\s+)?{_NAME}(?:\s+(?:(?:{_PARTICLES})\s+)?{_NAME}){{0,3}})", text[b:])
        if m:
            town = _trim_town(text, b + m.start(1), b + m.end(1))
            if town:
                after = _POSTCODE_AFTER.match(text, town[1])
                towns.append((town[0], after.end()) if after and not re.search(r"\d", text[town[0]:town[1]]) else town)
    towns = [t for t in towns if not any(o != t and o[0] <= t[0] and t[1] <= o[1] for o in towns)]  # the longest reading
    return street, towns


def _common_run(words: str) -> bool:
    """Whether a run of capitalised words after a number holds a stop word, a month or a
    day ("12 March", "3 Mondays"): a date, not a street."""
    return any(Dictionary.is_stop(w) or w.lower() in lex.MONTHS_AND_DAYS for w in words.split())


def _house_number_start(text: str, start: int) -> int:
    """``start`` moved back over a house number written before the street ("No. 12, ")."""
    m = _HOUSE_NUMBER_BEFORE.search(text[max(0, start - 14) : start])
    return start - len(m.group()) if m else start


def _trim_town(text: str, start: int, end: int) -> Span | None:
    """The town words of ``text[start:end]``: capitalised words only, a UK postcode and
    what follows a lower-case word cut off."""
    out_end = start
    for w in WORD.finditer(text, start, end):
        if w.group()[0].isdigit() or re.fullmatch(r"[A-Z]{1,2}-\d{4,5}", w.group()):
            out_end = w.end()
            continue
        if not is_capitalised(w.group()) and w.group().lower() not in lex.NAME_PARTICLES:
            break
        if _UK_POSTCODE_RE.match(text, w.start()) or Dictionary.is_stop(w.group()):
            break
        out_end = w.end()
    seg = text[start:out_end]
    if not re.search(r"[^\W\d_]{2}", seg):
        return None
    return (start, out_end)


# --------------------------------------------------------------------------- context evidence
def _words_before(text: str, start: int, n: int = 8) -> list[str]:
    clause = re.split(r"[.!?;:\n]", text[max(0, start - 80) : start])[-1]
    return re.findall(r"[\w'’-]+", clause)[-n:]


_TRAVEL_NOUNS = frozenset("ferry flight flights train trains bus road route trip journey ticket tickets way drive ride pass track "
                          "power electricity water supplies supply deliveries shipments".split())
# verbs of leaving: "for X" after them names a destination ("left Ajloun for X", "set off for X")
_LEAVE_VERBS = frozenset("left leave leaves leaving departed depart departs set sets headed heads bound sailed".split())
_VISIT_VERBS = frozenset("visited visit visits visiting left leave leaves leaving reached reach reaches fled flee flees toured entered evacuated".split())


def place_evidence(text: str, start: int, end: int) -> float:
    """LOCATION votes from the words around a span: "between X and Y" (1.5), "from"/"to"
    after a verb of motion or a travel noun (1.5: "moved … to X", "the ferry to X"), the
    object of "visited", "left", "reached", "fled" (1.25), "for X" after "left", "set off",
    "headed" (1.5: "left Ajloun for X"), "<village|mayor|north…> of X"
    (2), "X-based" and "X, a village|town|city" (2)."""
    before = [w.lower() for w in _words_before(text, start)]
    after = text[end : end + 24]
    score = 0.0
    prev = before[-1] if before else ""
    if prev == "between" or (prev == "and" and "between" in before[-5:]):
        score += 1.5
    if prev in ("from", "to", "into", "towards", "toward") and any(w in lex.MOTION_VERBS for w in before[-7:-1]):
        score += 1.5
    if prev in ("from", "to") and len(before) >= 2 and before[-2] in _TRAVEL_NOUNS:
        score += 1.5
    if prev in _VISIT_VERBS:
        score += 1.25
    if prev == "for" and any(w in _LEAVE_VERBS for w in before[-5:-1]):
        score += 1.5
    if prev == "of" and len(before) >= 2 and before[-2] in lex.PLACE_OF_NOUNS:
        score += 2.0
    if re.match(r"-based\b|,\s+a\s+(?:small\s+|little\s+)?(?:village|town|city|hamlet|suburb|port)\b", after):
        score += 2.0
    return score


def person_evidence(text: str, start: int, end: int) -> float:
    """PERSON votes: "née X" (3); "X's <husband|brother|team|flight…>" (2.5)."""
    before = [w.lower() for w in _words_before(text, start, 2)]
    score = 3.0 if before and before[-1] in ("née", "nee", "geb", "geborene") else 0.0
    m = re.match(r"['’]s?\s+([\w-]+)(?:\s+([\w-]+))?", text[end : end + 30])
    if m and any((g or "").lower() in lex.PERSON_POSSESSIONS for g in m.groups()):
        score += 2.5
    return score


def organisation_evidence(words: list[str]) -> float:
    """ORGANIZATION votes from the words of a span: a legal form ("Kft", "A/S"), an
    institution word ending ("Stadtwerke", "Volksbank"), or a compound that ends with an
    institution word ("Datacenter", "Metsäpalvelu"; not "Center" alone) (4)."""
    for w in words:
        core = w.strip(".,;:")
        if core in lex.ORG_LEGAL_FORMS or core.rstrip(".") in lex.ORG_LEGAL_FORMS:
            return 4.0
        folded = fold(core)
        if folded.endswith(ORG_ENDINGS):
            return 4.0
        if any(folded.endswith(e) and len(folded) > len(e) + 2 for e in _COMPOUND_ENDINGS):
            return 4.0
    return 0.0


def is_place(word: str) -> bool:
    """Whether ``word`` is a known place name (:func:`resources.privacy.anonymise.loaders.place_names`)."""
    return fold(word) in place_names()


def shape_evidence(words: list[str], given_first: bool) -> dict[str, float]:
    """Votes from a span's own words: a hyphenated place form ("Thornwick-on-Sea",
    "Llanfihangel-y-Creuddyn", "Grevenbroich-Süd", "Saint-…": LOCATION 2.5), a place-word
    ending of another language ("…fjörður", "…fjorden": LOCATION 2.5); for several
    words, a place word ending or opening it ("… Creek", "Little …": LOCATION 2.5), a
    business word in it ("Agro", "Tech": ORGANIZATION 2), a trade ending it ("…
    Quarrying": ORGANIZATION 1.5), or an English common noun
    ending it with no known given name before it (ORGANIZATION 2 when plural: "Tavakoli
    Carpets"; 1 when singular, a tie a person's vote breaks: "Steppe Cargo" but "Ibrahima
    Sow")."""
    out = {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0}
    if words and re.search(r"-(?:on|upon|by|sur|sous|lès|les|le|la|am|an|im|bei|en|de|del|y)-|-(?:nord|süd|sud|ost|west|north|south|east|mitte|centre|centro)$"
                           r"|^(?:saint|sainte|san|santa|sankt|st|ste)-", words[-1].lower() if len(words) == 1 else words[0].lower() + " " + words[-1].lower()):
        out["LOCATION"] += 2.5
    if any(fold(w).endswith(e) and len(w) > len(e) + 3 for w in words for e in _PLACE_ENDINGS):
        out["LOCATION"] += 2.5  # a place word ending a word of another language ("Borgarfjörður")
    if len(words) < 2:
        return out
    last = words[-1].strip(".,;:").lower()
    first = words[0].strip(".,;:").lower()
    if last in lex.PLACE_HEAD_WORDS:
        out["LOCATION"] += 2.5
    elif first in lex.PLACE_LEAD_WORDS:
        out["LOCATION"] += 2.5
    elif any(w.strip(".,;:").lower() in lex.ORG_ANY_WORDS for w in words):
        out["ORGANIZATION"] += 2.0
    elif not given_first and last.endswith("ing") and Dictionary.is_common(last):
        out["ORGANIZATION"] += 1.5  # a trade: "… Quarrying", "… Catering"
    elif not given_first and last not in lex.GIVEN_NAMES:
        out["ORGANIZATION"] += Dictionary.head_noun(last)
    return out
