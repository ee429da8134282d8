"""Stage 1 of the anonymiser: deterministic recognisers (regular expressions plus
checksums, no dependency) for e-mail addresses, telephone numbers, IP addresses, credit-card
numbers (Luhn) and IBANs (ISO 13616 mod-97)."""

from __future__ import annotations

import ipaddress
import re
from typing import Iterable

from resources.privacy.anonymise.base import DETERMINISTIC_TYPES, Entity

# --------------------------------------------------------------------------- stage 1
def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) checksum of a digit string (ISO/IEC 7812-1)."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616 check: move the first four characters to the end, letters to 10..35, mod 97 == 1."""
    s = re.sub(r"\s", "", iban).upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", s):
        return False
    rearranged = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])")
_PHONE = re.compile(
    r"(?<![\w+/])(?:\+\d{1,3}[ .-]?)?(?:\(0?\d{1,5}\)[ .-]?)?\d{1,5}(?:[ ./-]\d{2,8}){0,4}(?![\w/])"
)
# an international number (a "+" or "00" and a country code), then groups of one to five
# digits, the last of two or more: a subscriber part with a one-digit group ("+374 264 2 31
# 87", "+36 1 234 5678", "0049 30 1 23 45 67") that :data:`_PHONE` cuts after its first group
_PHONE_INTL = re.compile(
    r"(?<![\w+/])(?:\+|00)[1-9]\d{0,2}(?:\s?\(0\))?(?:[ .-]\d{1,5}){0,6}[ .-]\d{2,5}(?![\w/])"
)
_PHONE_CUE = re.compile(r"(?i)(?:phone|tel|telephone|mobile|cell|fax|call|ring|text|whatsapp|handy|telefon|nr\.?|number)\W{0,4}$")
_DATE_LIKE = re.compile(r"^\d{1,4}[./-]\d{1,2}[./-]\d{1,4}$")


class DeterministicRecogniser:
    """Stage 1: e-mail, telephone, IPv4/IPv6, credit card (Luhn) and IBAN (mod 97).

    Telephone numbers are 7-15 digits that carry a sign of being one (a leading ``+``
    or ``00`` and a country code, whatever the groups after it,
    an area code in parentheses, three or more groups, a trunk ``0`` with two groups, or a
    cue word such as "phone"/"call" just before); dates are never phone numbers.
    """

    name = "deterministic"

    def __init__(self, entities: Iterable[str] = DETERMINISTIC_TYPES) -> None:
        self.entities = set(entities)

    def find(self, text: str) -> list[Entity]:
        out: list[Entity] = []
        want = self.entities
        if "EMAIL_ADDRESS" in want:
            out += [Entity("EMAIL_ADDRESS", m.start(), m.end(), m.group(), self.name) for m in _EMAIL.finditer(text)]
        if "CREDIT_CARD" in want:
            for m in _CARD.finditer(text):
                digits = re.sub(r"\D", "", m.group())
                if 13 <= len(digits) <= 19 and luhn_valid(digits):
                    out.append(Entity("CREDIT_CARD", m.start(), m.end(), m.group(), self.name))
        if "IBAN_CODE" in want:
            for m in _IBAN.finditer(text):
                span = m.group()
                # trailing groups may belong to the next word: shorten until the checksum holds
                while len(re.sub(r"\s", "", span)) >= 15:
                    if iban_valid(span):
                        out.append(Entity("IBAN_CODE", m.start(), m.start() + len(span), span, self.name))
                        break
                    span = span[:-1].rstrip()
        if "IP_ADDRESS" in want:
            for regex in (_IPV4, _IPV6):
                for m in regex.finditer(text):
                    try:
                        ipaddress.ip_address(m.group())
                    except ValueError:
                        continue
                    out.append(Entity("IP_ADDRESS", m.start(), m.end(), m.group(), self.name))
        if "PHONE_NUMBER" in want:
            international = []
            for m in _PHONE_INTL.finditer(text):
                if 7 <= len(re.sub(r"\D", "", m.group())) <= 15:
                    international.append((m.start(), m.end()))
                    out.append(Entity("PHONE_NUMBER", m.start(), m.end(), m.group(), self.name))
            for m in _PHONE.finditer(text):
                span = m.group()
                if any(a < m.end() and m.start() < b for a, b in international):
                    continue
                digits = re.sub(r"\D", "", span)
                if not 7 <= len(digits) <= 15 or _DATE_LIKE.match(span):
                    continue
                groups = len(re.findall(r"\d+", span))
                cue = _PHONE_CUE.search(text[max(0, m.start() - 24) : m.start()])
                if span.startswith("+") or "(" in span or groups >= 3 or (span.startswith("0") and groups >= 2) or cue:
                    out.append(Entity("PHONE_NUMBER", m.start(), m.end(), span, self.name))
        return out
