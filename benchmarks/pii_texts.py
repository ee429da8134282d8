"""A labelled set of made-up texts with planted PII, for benchmarks/bench_pii.py.

Every person, place, organisation, address, number and account below is invented (the
card numbers are standard Luhn-valid test numbers, the IBANs are ISO 13616 examples or
made up with a valid check). Markup: ``{TYPE|text}`` marks one entity; types are those of
resources/privacy/anonymise/__init__.py. Names come in several forms (full name, title + surname,
initials, "Surname, Given", given name alone, surname alone on a later mention, names
outside the rule-based word lists) and places likewise (cities, countries, regions,
street addresses in English, German, French, Spanish and Italian forms, postcodes).
"""

from __future__ import annotations

import re
from pathlib import Path

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


# ---------------------------------------------------------------------------------------
# The NER set (issue 16, item 18): 44 made-up texts written before the NER strategy was
# tuned, with several mentions of each person, place and organisation (full name, then
# surname, given name or title + surname; a place or organisation named again). Names
# from many languages, most outside resources/privacy/anonymise/lexicon.py; none is a real person's
# record. benchmarks/bench_pii.py reports recall and precision per type on it.
NER_TEXTS = [
    "Dr. {PERSON|Amara Okafor} joined {ORGANIZATION|Kestrel Analytics} in {LOCATION|Lagos} last spring. {PERSON|Okafor} now leads the team that {ORGANIZATION|Kestrel Analytics} set up in {LOCATION|Abuja}.",
    "{PERSON|Sebastián Ferreyra} flew from {LOCATION|Montevideo} to {LOCATION|Lisbon} to meet {PERSON|Inês Carvalho}. {PERSON|Ferreyra} and {PERSON|Carvalho} signed the contract at the {LOCATION|Lisbon} office of {ORGANIZATION|Tejo Maritime}.",
    "Patient {PERSON|Grzegorz Wiśniewski}, 58, was referred by {ORGANIZATION|St. Brendan's Hospital} in {LOCATION|Galway}. Mr {PERSON|Wiśniewski} reports dizziness; his daughter {PERSON|Marta} drove him from {LOCATION|Athenry}.",
    "{ORGANIZATION|Halvorsen Shipping} announced that its chief executive, {PERSON|Ingrid Halvorsen}, will step down. The board of {ORGANIZATION|Halvorsen Shipping} met in {LOCATION|Bergen} on Friday, and {PERSON|Ingrid Halvorsen} thanked the staff in {LOCATION|Norway}.",
    "Dear {PERSON|Mr. Nguyen}, thank you for contacting {ORGANIZATION|Bluewater Insurance}. Your claim for the flat in {LOCATION|Da Nang} is under review. Regards, {PERSON|Linh Tran}, {ORGANIZATION|Bluewater Insurance}",
    "{PERSON|Kwame Mensah} studied at the {ORGANIZATION|University of Ghana} before moving to {LOCATION|Toronto}. In {LOCATION|Toronto}, {PERSON|Mensah} founded {ORGANIZATION|Adinkra Labs}.",
    "The complaint names {PERSON|Rosalind Fairweather} and {PERSON|Desmond Achebe}, both employees of {ORGANIZATION|Greyfriars Logistics} in {LOCATION|Edinburgh}. {PERSON|Fairweather} denies the allegation; {PERSON|Achebe} has not responded.",
    "Our driver {PERSON|Mehmet Yıldırım} delivered the parcel to {LOCATION|Izmir} on Tuesday, but {ORGANIZATION|Anatolia Express} lost it in {LOCATION|Ankara}. {PERSON|Yıldırım} says {ORGANIZATION|Anatolia Express} never scanned it.",
    "{PERSON|Priyanka Deshmukh} from {ORGANIZATION|Sahyadri Pharma} presented the trial results in {LOCATION|Pune}. Dr {PERSON|Deshmukh} said {ORGANIZATION|Sahyadri Pharma} will file in {LOCATION|India} and {LOCATION|Kenya}.",
    "Minutes: {PERSON|Olaf Brandtner} opened the meeting at {ORGANIZATION|Brandtner & Vogel GmbH} in {LOCATION|Linz}. {PERSON|Brandtner} asked {PERSON|Elke Vogel} to report; {PERSON|Vogel} summarised the sales in {LOCATION|Austria}.",
    "{PERSON|Chen Jiahui} was hired by {ORGANIZATION|Pearl River Robotics} in {LOCATION|Guangzhou}. Before that, {PERSON|Chen Jiahui} worked two years in {LOCATION|Shenzhen}.",
    "Tenant {PERSON|Yusuf Al-Amin} reported a leak at {LOCATION|27 Harrow Lane}, {LOCATION|Bristol}. The landlord, {ORGANIZATION|Severn Homes Ltd}, sent a plumber; {PERSON|Al-Amin} says {ORGANIZATION|Severn Homes Ltd} ignored two earlier reports.",
    "{PERSON|Valentina Russo} and {PERSON|Lorenzo Bianchi} run a bakery in {LOCATION|Turin}. {PERSON|Russo} buys flour from {ORGANIZATION|Molino Alpino}, and {PERSON|Bianchi} handles deliveries to {LOCATION|Milan}.",
    "The interview with {PERSON|Siobhan Gallagher} took place at {ORGANIZATION|Dunmore Community College}. {PERSON|Gallagher} grew up in {LOCATION|Donegal} and moved to {LOCATION|Dublin} at eighteen.",
    "Incident 4471: {PERSON|Tomás Echeverría} could not log in to the {ORGANIZATION|Cordillera Bank} portal from {LOCATION|Santiago}. {PERSON|Echeverría} was told by {ORGANIZATION|Cordillera Bank} support to visit a branch in {LOCATION|Valparaíso}.",
    "{PERSON|Aiko Matsumoto} translated the manual for {ORGANIZATION|Kitsune Instruments}. {PERSON|Matsumoto} lives in {LOCATION|Osaka} but often works from {LOCATION|Kyoto}.",
    "Witness statement of {PERSON|Bronwen Pryce}: I saw {PERSON|Gareth Llewellyn} leave the {ORGANIZATION|Red Kite Tavern} in {LOCATION|Aberystwyth} at midnight. {PERSON|Llewellyn} was alone.",
    "{ORGANIZATION|Nordlicht Energie AG} opened a wind farm near {LOCATION|Husum}. Its engineer {PERSON|Friederike Janssen} said {ORGANIZATION|Nordlicht Energie AG} will hire in {LOCATION|Schleswig-Holstein}. {PERSON|Janssen} expects forty jobs.",
    "Hi {PERSON|Thandiwe}, the venue in {LOCATION|Durban} is booked. {PERSON|Sipho Ndlovu} from {ORGANIZATION|Umhlanga Events} will meet you there. Cheers, {PERSON|Lerato}",
    "{PERSON|Dmitri Volkov} sued {ORGANIZATION|Baltic Timber Holdings} in {LOCATION|Riga}. The court in {LOCATION|Riga} heard that {PERSON|Volkov} was never paid for the shipment to {LOCATION|Gdańsk}.",
    "Referral letter: {PERSON|Fatou Diallo}, resident of {LOCATION|Dakar}, is referred to {ORGANIZATION|Hôpital Saint-Louis} in {LOCATION|Paris}. Ms {PERSON|Diallo} has a history of asthma.",
    "{PERSON|Björn Lindgren} coaches the junior team of {ORGANIZATION|IFK Sundsvall}. {PERSON|Lindgren} took the team to {LOCATION|Uppsala} for the cup final.",
    "The audit of {ORGANIZATION|Marisol Textiles} found that {PERSON|Carmen Aguilar} approved invoices from {LOCATION|Guadalajara}. {PERSON|Aguilar} told auditors that {ORGANIZATION|Marisol Textiles} had no second signer.",
    "{PERSON|Ravi Subramanian} and his wife {PERSON|Lakshmi} moved from {LOCATION|Chennai} to {LOCATION|Singapore}. {PERSON|Ravi} now works for {ORGANIZATION|Straits Capital Partners}.",
    "According to {PERSON|Hannah Weitzman} of {ORGANIZATION|Lakeshore Legal Aid}, the eviction in {LOCATION|Milwaukee} was unlawful. {PERSON|Weitzman} filed an appeal on behalf of {PERSON|Darnell Hughes}; {PERSON|Hughes} still lives in {LOCATION|Wisconsin}.",
    "{PERSON|Aleksandra Nowak} volunteers for {ORGANIZATION|Vistula Food Bank} in {LOCATION|Kraków}. Each Saturday {PERSON|Nowak} collects donations in {LOCATION|Nowa Huta}.",
    "Student {PERSON|Omar Farouk} missed three seminars at {ORGANIZATION|Nile Valley Institute}. Professor {PERSON|Samira Haddad} asked {PERSON|Farouk} to meet her in {LOCATION|Alexandria}.",
    "{PERSON|Liam O'Connell} drove his van from {LOCATION|Cork} to {LOCATION|Limerick} for {ORGANIZATION|Shannon Freight}. {PERSON|O'Connell} was stopped near {LOCATION|Limerick} by police.",
    "{PERSON|Astrid Solberg} is the new spokesperson of {ORGANIZATION|Fjordline Ferries}. {PERSON|Solberg} confirmed that {ORGANIZATION|Fjordline Ferries} will cancel the route to {LOCATION|Hirtshals}.",
    "{PERSON|Joaquim Mendes} repairs boats in {LOCATION|Porto}. His brother {PERSON|Rui Mendes} sells them in {LOCATION|Faro} through {ORGANIZATION|Algarve Nautica}.",
    "HR note: {PERSON|Keisha Robinson} requested leave to visit {LOCATION|Kingston}. Her manager at {ORGANIZATION|Harborview Systems}, {PERSON|Paul Dempsey}, approved it; {PERSON|Robinson} returns on the 14th.",
    "{PERSON|Zhang Wei} and {PERSON|Liu Yang} founded {ORGANIZATION|Jade Harbor Foods} in {LOCATION|Vancouver}. {PERSON|Zhang} handles sourcing from {LOCATION|Yunnan}, {PERSON|Liu} the shops in {LOCATION|Vancouver}.",
    "The parish council of {LOCATION|Little Hadham} thanked {PERSON|Margaret Ellsworth} for forty years of service. Mrs {PERSON|Ellsworth} still runs the library for {ORGANIZATION|East Herts Libraries}.",
    "{PERSON|Emeka Nwosu} wrote to {ORGANIZATION|Zenith Telecom} from {LOCATION|Enugu} about a double charge. {PERSON|Nwosu} says {ORGANIZATION|Zenith Telecom} promised a refund but sent nothing.",
    "{PERSON|Giulia Marchetti} restored the frescoes in {LOCATION|Siena} for {ORGANIZATION|Fondazione Arte Viva}. {PERSON|Marchetti} will lecture about it in {LOCATION|Florence}.",
    "Security log: user {PERSON|Anders Holm} signed in from {LOCATION|Copenhagen}, then from {LOCATION|Aarhus} ten minutes later. {ORGANIZATION|Dansk Datacenter} locked the account of {PERSON|Holm}.",
    "{PERSON|Yasmin Rahimi} teaches at {ORGANIZATION|Caspian International School} in {LOCATION|Baku}. Her colleague {PERSON|Farid Aliyev} says {PERSON|Rahimi} is the best teacher in {LOCATION|Azerbaijan}.",
    "{PERSON|Hugo Lefèvre} bought a vineyard near {LOCATION|Bordeaux} from {ORGANIZATION|Domaine Castel}. {PERSON|Lefèvre} and his partner {PERSON|Claire Dubois} will move there from {LOCATION|Lyon}.",
    "{PERSON|Nadia Petrenko} fled {LOCATION|Kharkiv} in March and reached {LOCATION|Warsaw} a week later. {ORGANIZATION|Open Doors Foundation} found {PERSON|Petrenko} a flat in {LOCATION|Warsaw}.",
    "The hackathon at {ORGANIZATION|Tallinn University of Technology} was won by {PERSON|Kaspar Tamm} and {PERSON|Liis Kask}. {PERSON|Tamm} and {PERSON|Kask} will present in {LOCATION|Helsinki}.",
    "{PERSON|Mateus Oliveira} complained that {ORGANIZATION|Rio Verde Airlines} lost his luggage in {LOCATION|Recife}. {PERSON|Oliveira} flew on to {LOCATION|Manaus} without it.",
    "{PERSON|Eleanor Whitby} chairs the ethics board of {ORGANIZATION|Thornbury Medical Centre}. Dr {PERSON|Whitby} lives in {LOCATION|Harrogate} and commutes to {LOCATION|York}.",
    "{PERSON|Tariq Siddiqui} runs a pharmacy on {LOCATION|Karachi Road} in {LOCATION|Lahore}. {PERSON|Siddiqui} buys from {ORGANIZATION|Indus Generics}, whose depot is in {LOCATION|Multan}.",
    "{PERSON|Johanna Lindqvist} and {PERSON|Mikael Berg} sailed from {LOCATION|Gothenburg} to {LOCATION|Skagen}. {PERSON|Berg} wrote about the trip for {ORGANIZATION|Västkust Tidning}.",
]


def ner_labelled() -> list[tuple[str, list[tuple[str, int, int]]]]:
    """Every text of :data:`NER_TEXTS` parsed."""
    return [parse(t) for t in NER_TEXTS]


# ---------------------------------------------------------------------------------------
# A held-out check, written after the ner strategy was tuned on the sets above and
# measured once (benchmarks/bench_pii.py prints it as set 'holdout'); not tuned on.
HOLDOUT_TEXTS = [
    "{PERSON|Oluwaseun Adeyemi} opened a clinic in {LOCATION|Ibadan} with help from {ORGANIZATION|Harmattan Health Trust}. {PERSON|Adeyemi} hopes {ORGANIZATION|Harmattan Health Trust} will fund a second site in {LOCATION|Oyo}.",
    "Mrs {PERSON|Beatrix Kowalczyk} wrote to {ORGANIZATION|Pomeranian Water Company} about the bill for her house in {LOCATION|Gdynia}. {PERSON|Kowalczyk} has paid twice.",
    "{PERSON|Santiago Morales} and {PERSON|Lucía Paredes} met at {ORGANIZATION|Universidad del Pacífico} in {LOCATION|Lima}. {PERSON|Morales} later moved to {LOCATION|Cusco}; {PERSON|Paredes} stayed in {LOCATION|Lima}.",
    "The pilot, {PERSON|Henrik Dahl}, landed in {LOCATION|Tromsø} after the storm. {ORGANIZATION|Arctic Wings Airlines} praised {PERSON|Dahl} in a statement from {LOCATION|Oslo}.",
    "{PERSON|Mei Lin Tan} is a nurse at {ORGANIZATION|Raffles Heights Hospital} in {LOCATION|Singapore}. {PERSON|Tan} asked for a transfer to {LOCATION|Penang}.",
    "Case note: {PERSON|Abdullahi Musa} was seen in {LOCATION|Kano} by {PERSON|Dr. Zainab Bello}. {PERSON|Musa} will return to {LOCATION|Kano} in June; Dr {PERSON|Bello} will follow up.",
    "{ORGANIZATION|Cobalt Ridge Mining} hired {PERSON|Jarrah Whitfield} to manage its site near {LOCATION|Kalgoorlie}. {PERSON|Whitfield} grew up in {LOCATION|Perth}.",
    "{PERSON|Elif Demir} sells carpets in {LOCATION|Bursa}. Her supplier, {ORGANIZATION|Anatolian Looms}, is run by {PERSON|Kemal Aksoy}; {PERSON|Aksoy} lives in {LOCATION|Konya}.",
    "Dear {PERSON|Ms. Okonjo}, your order from {ORGANIZATION|Baobab Books} has shipped to {LOCATION|Nairobi}. Kind regards, {PERSON|Wanjiru Kamau}",
    "{PERSON|Pierre-Alain Rochat} teaches at {ORGANIZATION|École Polytechnique Fédérale de Lausanne}. {PERSON|Rochat} commutes from {LOCATION|Vevey} to {LOCATION|Lausanne}.",
    "{PERSON|Ngozi Eze} reported that {ORGANIZATION|Lagoon City Bank} froze her account in {LOCATION|Port Harcourt}. {PERSON|Eze} visited the {LOCATION|Port Harcourt} branch twice.",
    "{PERSON|Isabella Conti} organised the festival in {LOCATION|Verona} for {ORGANIZATION|Società Musicale Veneta}. {PERSON|Conti} thanked the mayor of {LOCATION|Verona}.",
    "{PERSON|Tobias Grünewald} repairs organs for {ORGANIZATION|Orgelbau Grünewald}. {PERSON|Tobias} is restoring one in {LOCATION|Freiburg}.",
    "{PERSON|Anh Pham} moved from {LOCATION|Hanoi} to {LOCATION|Melbourne} to study at {ORGANIZATION|Monash University}. {PERSON|Pham} works weekends at {ORGANIZATION|Southbank Noodle Bar}.",
    "Warden {PERSON|Callum MacLeod} found the hikers near {LOCATION|Fort William}. {PERSON|MacLeod} works for {ORGANIZATION|Lochaber Mountain Rescue}.",
    "{PERSON|Rania Khalil} founded {ORGANIZATION|Cedar Code Academy} in {LOCATION|Beirut}. {PERSON|Khalil} now trains teachers in {LOCATION|Amman} too.",
]


def holdout_labelled() -> list[tuple[str, list[tuple[str, int, int]]]]:
    """Every text of :data:`HOLDOUT_TEXTS` parsed."""
    return [parse(t) for t in HOLDOUT_TEXTS]


# ---------------------------------------------------------------------------------------
# The planted corpus of issue 26 (fault 3): tests/data/pii_planted/{dev,dev2,heldout}.txt,
# one marked-up text per line (README.md there says how it was made). ``dev`` and ``dev2``
# were used to tune the ner strategy; ``heldout`` was written before the third tuning round
# and not tuned on until that round read its misses; ``heldout2`` was written after that
# (40 texts, new names), before the code of that round was run on it, and tuned on in the
# fourth round; ``heldout3`` was written blind for the fourth round (45 texts, new names and
# languages, by someone who had not read the anonymiser's code), measured once and tuned on
# in the fifth; ``heldout4`` was written blind for the fifth round and is not tuned on.
PLANTED_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "pii_planted"


def planted_labelled(part: str) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """The ``dev``, ``dev2``, ``heldout``, ``heldout2``, ``heldout3`` or ``heldout4`` part of the planted corpus, parsed (``#`` lines skipped)."""
    if part not in ("dev", "dev2", "heldout", "heldout2", "heldout3", "heldout4"):
        raise ValueError(f"planted corpus part {part!r}: use dev, dev2, heldout, heldout2, heldout3 or heldout4")
    lines = (PLANTED_DIR / f"{part}.txt").read_text(encoding="utf-8").splitlines()
    return [parse(line) for line in lines if line.strip() and not line.startswith("#")]
