"""Word lists for the rule-based recogniser (no model, no network).

Small, hand-collected gazetteers: common given names in English, German, French,
Spanish, Italian, Portuguese, Dutch, Polish, Turkish and Arabic transliteration; countries
and large cities (English and local spellings); titles; organisation and street suffixes.
They are deliberately incomplete: the rule-based strategy also uses context cues (titles,
"patient", "Dear", "lives in", street numbers, company suffixes), and names outside these
lists are found only through such cues. Measured by ``benchmarks/bench_pii.py``.
"""

from __future__ import annotations

GIVEN_NAMES = frozenset(
    """
    aaron adam adrian ahmed aisha alan albert alberto alejandro alessandro alex alexander alexandra alfred ali alice alicia
    amanda amelia amir amy ana andrea andreas andrew angela anna anne annette anton antonio arthur barbara beatriz ben
    benjamin bernd bernard birgit brian bruno camille carla carlos carmen caroline catherine charles charlotte chloe
    christian christina christine christoph claire claudia daniel daniela david deborah denise diana diego dieter dimitri
    dominik dorothy edward elena elias elif elisabeth elizabeth ella emily emma enrique eric erik ernst eva fabian
    fatima felix fernando florian francesca francesco franz françois frank frederik gabriel gabriele george georg
    gerhard giovanni giulia giuseppe greta gregor hannah hans harry heinz helen helena helga henrik henry hugo ibrahim
    ingrid isabel isabella ivan jacob jakob james jan jana jane javier jean jennifer jens jessica joanna johann johanna
    john jonas jonathan jorge josé joseph juan julia julian julien jürgen karin karl katarzyna katharina kathrin
    katherine kevin klaus laura lea leon leonie linda lisa lorenzo louis lucas lucia luis luisa lukas luca magdalena
    manuel marco marcus margaret maria marie marina mario markus marta martin martina mary matthias maximilian mehmet
    melanie michael michaela michel miguel mohammed monika nadia natalia nicolas nicole niklas nina noah olga oliver
    olivia pablo patricia patrick paul paula pedro peter petra philipp pierre piotr rachel rafael ralf rebecca renate
    richard robert roberto rosa ruth sabine samuel sandra sara sarah sebastian sergio simon simone sofia sophie stefan
    stefanie stephanie susan susanne sven tanja thomas tim tobias tom ursula valentina vanessa victoria vincent walter
    wei william wolfgang yasmin yusuf zeynep zoe
    """.split()
)

# Given names that are also common English words: a name only when a surname follows.
AMBIGUOUS_GIVEN_NAMES = frozenset({"will", "may", "mark", "grace", "hope", "rose", "faith", "joy", "june", "april", "bill", "jack", "frank", "eva", "van"})

TITLES = (
    "Dr", "Mr", "Mrs", "Ms", "Miss", "Mx", "Prof", "Professor", "Sir", "Dame", "Herr", "Frau", "Mme", "Mlle",
    "Madame", "Monsieur", "Sr", "Sra", "Señor", "Señora", "Dott", "Signor", "Signora", "Nurse", "Judge", "Rev",
)

# Words that, directly before a capitalised name, mark it as a person.
PERSON_CUES = (
    "patient", "client", "customer", "claimant", "defendant", "plaintiff", "applicant", "employee", "tenant",
    "named", "called", "dear", "regards", "sincerely", "signed by", "contact", "colleague", "husband", "wife",
    "son", "daughter", "mother", "father", "brother", "sister", "witness", "physician", "attorney", "lawyer", "by",
)

# Phrases that, directly before a capitalised word, mark it as a place.
LOCATION_CUES = (
    "lives in", "living in", "lived in", "born in", "moved to", "based in", "resident of", "resides in",
    "located in", "travelled to", "traveled to", "native of", "relocated to", "grew up in", "hometown of", "flew to",
    "admitted in", "stationed in",
)

COUNTRIES_AND_REGIONS = frozenset(
    """
    afghanistan albania algeria argentina armenia australia austria azerbaijan bangladesh belarus belgium bolivia
    bosnia brazil bulgaria cambodia cameroon canada chile china colombia croatia cuba cyprus czechia denmark ecuador
    egypt england estonia ethiopia finland france georgia germany ghana greece hungary iceland india indonesia iran
    iraq ireland israel italy japan jordan kazakhstan kenya korea kosovo latvia lebanon libya lithuania luxembourg
    malaysia malta mexico moldova monaco mongolia montenegro morocco nepal netherlands nigeria norway pakistan peru
    philippines poland portugal qatar romania russia scotland senegal serbia singapore slovakia slovenia somalia spain
    sweden switzerland syria taiwan tanzania thailand tunisia turkey uganda ukraine uruguay venezuela vietnam wales
    yemen zambia zimbabwe deutschland frankreich österreich schweiz españa italia bavaria bayern catalonia tuscany
    california texas florida ontario quebec queensland andalusia brittany normandy saxony
    """.split()
) | frozenset({
    "united states", "united kingdom", "united arab emirates", "south africa", "new zealand", "saudi arabia",
    "sri lanka", "north macedonia", "costa rica", "dominican republic", "czech republic", "ivory coast",
    "new york state", "baden-württemberg", "north rhine-westphalia", "île-de-france",
})

CITIES = frozenset(
    """
    amsterdam antwerp athens atlanta auckland baltimore bangkok barcelona basel beijing beirut belfast belgrade bergen
    berlin bern bilbao birmingham bologna bonn bordeaux boston bratislava bremen brighton brisbane bristol brno brussels
    bucharest budapest cairo calgary cambridge cardiff chicago cologne copenhagen cork dallas delhi denver detroit
    dortmund dresden dubai dublin duisburg düsseldorf edinburgh essen florence frankfurt geneva genoa ghent glasgow
    gothenburg graz hamburg hanover hannover helsinki houston innsbruck istanbul jakarta jerusalem karlsruhe kiel krakow
    kraków kyiv kiev lagos leeds leipzig lille limerick lisbon liverpool ljubljana london lyon madrid mainz malmö
    manchester mannheim marseille melbourne miami milan milano minneapolis montreal moscow mumbai munich münchen
    nantes naples newcastle nuremberg nürnberg oslo ottawa oxford palermo paris perth philadelphia porto prague
    rome rotterdam salzburg sevilla seville seoul shanghai sheffield sofia stockholm stuttgart sydney tallinn tokyo
    toronto toulouse turin utrecht valencia vancouver venice vienna wien vilnius warsaw wiesbaden zagreb zurich zürich
    köln lyons porto göttingen heidelberg freiburg aachen augsburg regensburg würzburg lübeck rostock potsdam
    """.split()
) | frozenset({
    "new york", "los angeles", "san francisco", "san diego", "las vegas", "rio de janeiro", "são paulo",
    "buenos aires", "mexico city", "hong kong", "tel aviv", "cape town", "the hague", "frankfurt am main",
    "st. petersburg", "kuala lumpur", "new delhi", "washington", "salt lake city",
})

STREET_SUFFIXES = (
    "Street", "St.", "Road", "Rd.", "Avenue", "Ave.", "Lane", "Drive", "Boulevard", "Blvd.", "Way", "Place",
    "Square", "Court", "Terrace", "Close", "Crescent", "Gardens", "Row", "Highway",
)
GERMAN_STREET_SUFFIXES = ("straße", "strasse", "str.", "weg", "platz", "allee", "gasse", "ring", "damm", "ufer")
ROMANCE_STREET_PREFIXES = ("rue", "avenue", "boulevard", "place", "calle", "avenida", "plaza", "via", "viale", "piazza", "rua", "carrer")

LOCATION_SUFFIXES = ("City", "County", "Province", "State", "Region", "District", "Valley", "Island", "Bay")

ORG_SUFFIXES = (
    "Inc", "Inc.", "Ltd", "Ltd.", "LLC", "LLP", "PLC", "plc", "GmbH", "AG", "SA", "S.A.", "SE", "NV", "N.V.", "BV",
    "B.V.", "Corp", "Corp.", "Corporation", "Company", "Co.", "Group", "Holdings", "Bank", "Hospital", "Clinic",
    "Klinikum", "Clinics", "University", "Universität", "College", "Institute", "Foundation", "Association", "Agency",
    "Ministry", "Authority", "Partners", "Associates", "Insurance", "Versicherung", "Pharma", "Pharmaceuticals",
    "Laboratories", "Labs", "Trust", "Council", "School", "Academy", "Bureau", "Consulting", "Technologies", "Systems",
    "Solutions", "Services", "Airlines", "Motors", "Energy", "Capital", "Ventures", "Software", "Medical Center",
    "Health", "Healthcare", "Law Firm", "Gesellschaft", "e.V.", "KG", "OHG",
)
ORG_PREFIXES = ("University of", "Bank of", "Ministry of", "Institute of", "Department of", "Office of", "Court of", "College of", "Hospital of", "Universität")

KNOWN_ORGANIZATIONS = frozenset({
    "google", "microsoft", "amazon", "apple", "siemens", "bosch", "deutsche bank", "commerzbank", "allianz", "bayer",
    "novartis", "roche", "pfizer", "nestlé", "unilever", "ibm", "oracle", "sap", "volkswagen", "bmw", "daimler",
    "mercedes-benz", "airbus", "philips", "ing", "bnp paribas", "société générale", "santander", "hsbc", "barclays",
    "openai", "meta", "facebook", "netflix", "tesla", "intel", "nvidia", "samsung", "sony", "toyota", "who", "unicef",
    "european commission", "united nations", "red cross", "charité", "mayo clinic",
})

# Generic words that make a capitalised name an organisation when they end it (industry,
# trade and institution nouns; the NER strategy's typing, resources/privacy/anonymise/__init__.py).
ORG_HEAD_WORDS = frozenset(
    """
    shipping freight logistics analytics robotics textiles telecom telecoms generics ferries ferry events foods food homes
    instruments maritime express tavern hotel hotels restaurant bakery library libraries centre center theatre theater
    museum church club cafe café studio studios media news times press records airline airlines railway railways motors
    pharma pharmaceuticals insurance bank capital partners aid foundation hospital clinic college school university
    institute academy agency council ministry trust group holdings ltd inc llc gmbh ag plc sa corp corporation company
    co. labs laboratories systems solutions services technologies software consulting energy ventures network networks
    industries manufacturing construction builders realty properties estates brewery winery vineyards farms dairy
    cooperative union association society federation league party department office bureau authority commission
    tribune gazette herald journal magazine radio television tv broadcasting publishing books markets stores shop
    supermarket mall pharmacy surgery practice chambers associates solicitors lawyers bakeries motors automotive
    aviation airways mining oil gas petroleum chemicals steel foods beverages apparel fashion textile design games
    """.split()
)

# Words that open an organisation's name in other languages (Fondazione X, Banco X, Hôpital X).
ORG_LEAD_WORDS = frozenset(
    """
    fondazione fundación fundação fondation stiftung banco banca banque hôpital hospital ospedale klinikum klinik
    université universidad universidade università universität instituto istituto institut domaine bodega cantina
    compagnie compañía companhia società gesellschaft verein ifk fc sc ac
    """.split()
)

# Words that, right before a capitalised name, make it a person (role and kin nouns, greetings).
PERSON_LEAD_WORDS = frozenset(
    """
    patient client customer claimant defendant plaintiff applicant employee tenant landlord student pupil teacher
    driver witness colleague husband wife son daughter mother father brother sister partner manager director engineer
    spokesperson spokesman spokeswoman professor doctor nurse dr mr mrs ms miss mx prof sir dame herr frau mme mlle
    señor señora sr sra dott signor signora dear hi hello regards sincerely thanks cheers user officer agent chef coach
    councillor senator judge captain uncle aunt cousin grandson granddaughter niece nephew boss volunteer author writer
    """.split()
)

# Prepositions and verbs that, right before a capitalised name, make it a place.
LOCATION_LEAD_WORDS = frozenset(
    """
    in near from to into via through across outside inside around towards toward lives live living lived born
    moved fled reached visited visit flew sailed drove travelled traveled relocated resides resident based
    """.split()
)
