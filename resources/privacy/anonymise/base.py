"""Shared types of the anonymiser (resources/privacy/anonymise/__init__.py): entity types, strategies, the
:class:`Entity` span, the :class:`Recogniser` protocol and :class:`AnonymisationError`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol
from metric_ops.errors import FacetlakeError


DETERMINISTIC_TYPES: tuple[str, ...] = ("EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS", "CREDIT_CARD", "IBAN_CODE")
NER_TYPES: tuple[str, ...] = ("PERSON", "LOCATION", "ORGANIZATION")
ENTITY_TYPES: tuple[str, ...] = (*DETERMINISTIC_TYPES, *NER_TYPES)
STRATEGIES: tuple[str, ...] = ("ner", "rule_based", "presidio", "model")

PLACEHOLDER = re.compile(r"\[(" + "|".join(ENTITY_TYPES) + r")_(\d+)\]")


class AnonymisationError(FacetlakeError, RuntimeError):
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
