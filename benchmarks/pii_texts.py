"""A labelled set of made-up texts with planted PII, for benchmarks/bench_pii.py.

Every person, place, organisation, address, number and account below is invented (the
card numbers are standard Luhn-valid test numbers, the IBANs are ISO 13616 examples or
made up with a valid check). Markup: ``{TYPE|text}`` marks one entity; types are those of
resources/anonymise.py. Names come in several forms (full name, title + surname,
initials, "Surname, Given", given name alone, surname alone on a later mention, names
outside the rule-based word lists) and places likewise (cities, countries, regions,
street addresses in English, German, French, Spanish and Italian forms, postcodes).
"""

from __future__ import annotations

import re

TEXTS = [
    "Patient {PERSON|Maria Schmidt} was admitted to {ORGANIZATION|Klinikum Nordstadt} in {LOCATION|Hanover} on 3 March. {PERSON|Schmidt} reported chest pain.",
    "Dr. {PERSON|Jonas Becker} reviewed the scan and called {PHONE_NUMBER|+49 511 4478 2310} to reach the family.",
    "Please send the discharge letter to {EMAIL_ADDRESS|m.schmidt-home@example.de} and copy {EMAIL_ADDRESS|records@klinikum-nordstadt.example}.",
    "The claimant, {PERSON|Olusegun Adebayo}, lives at {LOCATION|14 Marlowe Road}, {LOCATION|Leeds}. Mr {PERSON|Adebayo} disputes the charge.",
    "Card {CREDIT_CARD|4111 1111 1111 1111} was charged twice; the refund goes to IBAN {IBAN_CODE|GB82 WEST 1234 5698 7654 32}.",
    "Login attempts came from {IP_ADDRESS|203.0.113.77} and {IP_ADDRESS|2001:db8:85a3::8a2e:370:7334} within one minute.",
    "{PERSON|Schneider, Katharina} (born in {LOCATION|Graz}) signed the lease with {ORGANIZATION|Alpenblick Immobilien GmbH}.",
    "Mme {PERSON|Camille Durand} habite au {LOCATION|12 rue de la Paix}, {LOCATION|75002 Paris}; téléphone {PHONE_NUMBER|+33 1 42 68 53 00}.",
    "The witness {PERSON|Tomasz Wiśniewski} moved to {LOCATION|Poland} after working for {ORGANIZATION|Baltic Freight Ltd}.",
    "Our client {PERSON|Ayşe Yılmaz} transferred funds from {IBAN_CODE|DE89 3704 0044 0532 0130 00} to {ORGANIZATION|Deutsche Bank}.",
    "{PERSON|J. R. Whitcombe} of {ORGANIZATION|Whitcombe & Sons Solicitors} can be reached on {PHONE_NUMBER|(0113) 496 0123}.",
    "Regards, {PERSON|Elena Petrova}, {ORGANIZATION|University of Vienna}, {EMAIL_ADDRESS|elena.petrova@univie.example.at}",
    "Sra. {PERSON|Lucía Fernández} vive en {LOCATION|Calle Mayor 5}, {LOCATION|Madrid}, y trabaja en {ORGANIZATION|Banco Meridional SA}.",
    "Il signor {PERSON|Marco Bellini} abita in {LOCATION|Via Roma 10} a {LOCATION|Bologna}.",
    "The server at {IP_ADDRESS|10.20.30.40} belongs to {ORGANIZATION|Northwind Technologies}; ping it, not {IP_ADDRESS|192.168.0.1}.",
    "{PERSON|Priya Raghunathan} flew to {LOCATION|Singapore} and then to {LOCATION|Kuala Lumpur} for the audit.",
    "Invoice 2024-118 for {PERSON|Henrik Lindqvist}, {LOCATION|Storgatan 7}, {LOCATION|Stockholm}; paid by card {CREDIT_CARD|5555-5555-5555-4444}.",
    "Dear {PERSON|Fatima}, your appointment at {ORGANIZATION|St. Mary's Hospital} is confirmed. Call {PHONE_NUMBER|020 7946 0958} to change it.",
    "Frau {PERSON|Ingrid Vogelsang} wohnt in der {LOCATION|Kastanienallee 12}, {LOCATION|10435 Berlin}.",
    "{PERSON|Wei Zhang} and {PERSON|Kenji Watanabe} presented the results to {ORGANIZATION|Helix Pharma AG} in {LOCATION|Basel}.",
    "Complaint filed by {PERSON|Gareth Pryce-Jones} against {ORGANIZATION|Cymru Energy PLC}; contact {EMAIL_ADDRESS|g.pryce.jones@mailbox.example}.",
    "Transfer reference: {IBAN_CODE|FR14 2004 1010 0505 0001 3M02 606}, beneficiary {PERSON|Amélie Rousseau}, {LOCATION|Lyon}.",
    "The nurse noted that {PERSON|Ahmed} had not eaten. His daughter {PERSON|Leila Haddad} will visit from {LOCATION|Beirut}.",
    "{PERSON|M. Okonkwo} works at {ORGANIZATION|Lagos Business School} and grew up in {LOCATION|Enugu}.",
    "Text {PHONE_NUMBER|+1 415 555 0132} or e-mail {EMAIL_ADDRESS|sam.ortiz@example.com} to reach {PERSON|Samuel Ortiz} in {LOCATION|San Francisco}.",
    "Account holder {PERSON|Bartholomew Quince}, {LOCATION|221B Baker Street}, {LOCATION|London} {LOCATION|NW1 6XE}.",
    "The model answered correctly on 12 of 15 questions; version 2.3.1 scored 0.84 on 2024-05-01.",
    "Version 10.0.1 of the tool and order number 20240315 contain no personal data, nor does the sum 1,299.00 EUR.",
    "{PERSON|Rosalind Achterberg} from {LOCATION|Utrecht} consulted {PERSON|Prof. Dieter Hallmann} at {ORGANIZATION|Institute of Tropical Medicine}.",
    "{PERSON|Nkechi} told {PERSON|Dr Abernathy} that {PERSON|Nkechi}'s card {CREDIT_CARD|3782 822463 10005} had been stolen in {LOCATION|Accra}.",
]

_MARK = re.compile(r"\{([A-Z_]+)\|([^{}]+)\}")


def parse(marked: str) -> tuple[str, list[tuple[str, int, int]]]:
    """(plain text, [(type, start, end)]) from a marked-up text."""
    out, spans, pos = [], [], 0
    length = 0
    for m in _MARK.finditer(marked):
        before = marked[pos : m.start()]
        out.append(before)
        length += len(before)
        kind, text = m.group(1), m.group(2)
        if kind == "PERSON":  # a title inside the braces is not part of the name
            t = re.match(r"^(?:Prof\.|Dr\.?|Mr\.?|Mrs\.?|Ms\.?)\s+", text)
            if t:
                out.append(t.group())
                length += len(t.group())
                text = text[len(t.group()):]
        spans.append((kind, length, length + len(text)))
        out.append(text)
        length += len(text)
        pos = m.end()
    out.append(marked[pos:])
    return "".join(out), spans


def labelled() -> list[tuple[str, list[tuple[str, int, int]]]]:
    """Every text of :data:`TEXTS` parsed."""
    return [parse(t) for t in TEXTS]
