"""Stage 2, ``presidio`` strategy: :class:`PresidioNER`, Microsoft Presidio's
``AnalyzerEngine`` over an installed spaCy pipeline (tldextract pinned to its bundled
suffix list, so nothing is fetched)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from resources.privacy.anonymise.base import AnonymisationError, Entity

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
