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
    california texas florida ontario quebec queensland andalusia brittany normandy saxony usa uk uae drc
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
    "Square", "Court", "Terrace", "Close", "Crescent", "Gardens", "Row", "Highway", "Mews", "Walk", "Grove", "Parade",
    "Rise", "Yard", "Wharf", "Quay", "Alley", "Passage", "Circus", "Hill", "View", "Green",
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

# Months and days of the week, singular and plural ("On Saturdays Ana plays"): never part of a name.
MONTHS_AND_DAYS = frozenset(
    w + s for w in """monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december""".split() for s in ("", "s"))

# Generic words that make a capitalised name an organisation when they end it (industry,
# trade and institution nouns; the NER strategy's typing, resources/privacy/anonymise/__init__.py).
ORG_HEAD_WORDS = frozenset(
    """
    shipping freight logistics analytics robotics textiles telecom telecoms generics ferries ferry events foods food homes
    instruments maritime express tavern hotel hotels restaurant bakery library libraries centre center theatre theater
    museum church club cafe café studio studios media news times press records airline airlines railway railways motors
    pharma pharmaceuticals insurance bank capital partners aid foundation lab hospital clinic college school university
    institute academy agency council ministry trust group holdings ltd inc llc gmbh ag plc sa corp corporation company
    co. labs laboratories systems solutions services technologies software consulting energy ventures network networks
    industries manufacturing construction builders realty properties estates brewery winery vineyards farms dairy
    cooperative union association society federation league party department office bureau authority commission
    tribune gazette herald journal magazine radio television tv broadcasting publishing books markets stores shop
    supermarket mall pharmacy surgery practice chambers associates solicitors lawyers bakeries motors automotive
    aviation airways mining oil gas petroleum chemicals steel foods beverages apparel fashion textile design games
    diagnostics therapeutics biosciences genomics biotech biologics optics electronics engineering architects
    surveyors accountants recruitment joinery roofing plumbing haulage removals imports exports supplies rentals
    observatory archive archives laboratory lines guild syndicate consortium collective
    inn hostel motel guesthouse brothers bros sons co-operative co-op coop
    """.split()
)

# Words that open an organisation's name in other languages (Fondazione X, Banco X, Hôpital X).
ORG_LEAD_WORDS = frozenset(
    """
    fondazione fundación fundação fondation stiftung banco banca banque hôpital hospital ospedale klinikum klinik
    université universidad universidade università universität instituto istituto institut domaine bodega cantina
    compagnie compañía companhia società gesellschaft verein ifk fc sc ac
    agence agencia agenzia agência ministère ministerio ministero conseil consejo consiglio comité comitato syndicat
    sindicato cooperativa cooperative coopérative cooperatieve sociedad sociedade société associazione asociación
    associação federación fédération federazione unión unione centro centrum instytut uniwersytet politechnika
    escuela escola scuola école lycée colegio hochschule akademie académie academia museo musée muzeum biblioteca
    bibliothèque teatro théâtre banco caja caisse crédit mutuelle groupe grupo gruppo clínica clinique szpital
    krankenhaus stadtwerke landkreis ayuntamiento municipalidad comune
    cyngor comhairle gemeente gmina obec općina občina ysgol prifysgol ysbyty scoil ollscoil ospidéal
    osservatorio observatorio observatoire observatório archivio archivo archives arquivo laboratorio laboratoire
    laboratório consorzio consorcio consórcio azienda ente ufficio oficina bureau cámara camera câmara
    prefeitura prefettura préfecture mairie gemeinde stadtverwaltung hotel hôtel hostal albergo gasthof gasthaus
    dansk danske norsk norske svensk svenska svenske suomen deutsche deutscher österreichische schweizerische
    nederlandse polska polskie česká české slovenská eesti latvijas lietuvos íslenska
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

# --------------------------------------------------------------------------- issue 26: gazetteer-less cues
# Name particles that join capitalised words into one name ("Villaverde del Soto",
# "Joost van Rijckevorsel", "Asociación de Tejedoras de Urubamba").
NAME_PARTICLES = frozenset(
    """
    de del della delle dei degli di da das do dos du des la le les el al van von der den ter ten y i e bin ibn bint
    ben ap ab mac nic ní ó ua na binti binte ferch verch ould
    """.split()
)

# Legal forms of companies in many countries (matched as whole words, case-sensitive as written).
ORG_LEGAL_FORMS = frozenset(
    """
    Inc Ltd LLC LLP PLC plc Corp Co GmbH mbH AG KG OHG UG eG SE SA NV BV VOF AB Oy Oyj AS ASA A/S ApS ehf hf Kft Zrt
    Nyrt Bt SpA Srl SARL SAS SL SLU Ltda Lda Pty Bhd Pte KK Sdn s.r.o a.s d.o.o d.d S.A S.p.A S.r.l S.L e.V Cie
    A.Ş AŞ
    OÜ SIA UAB JSC CJSC OJSC PJSC OOO ZAO PAO TOV EOOD OOD EAD DOOEL Tbk PLLC SRL Sàrl SASU EURL SNC GIE BVBA CVBA
    SPRL VZW ASBL KGaA IVS AMBA Ky Tmi slf ShPK IKE EPE Kkt MChJ Pvt
    """.split()
)

# Word endings that make a capitalised word an institution's name in other languages
# (Stadtwerke, Volksbank, Sparkasse, Genossenschaft, Caritasverband, Båtforening, Ammattiopisto).
ORG_WORD_ENDINGS = (
    "verband", "werke", "werk", "bank", "kasse", "genossenschaft", "gesellschaft", "verein", "stiftung", "anstalt",
    "forening", "förening", "forbund", "förbund", "selskab", "selskap", "kompani", "opisto", "yhtiö", "osuuskunta",
    "kwekerij", "bedrijf", "vereniging", "stichting", "spółdzielnia", "spółdzielczy", "spółka", "szövetkezet",
    "egyesület", "társaság", "družstvo", "společnost", "zadruga", "društvo", "kooperativ", "kooperatif", "şirketi",
    # Turkish names of a trade or industry ("Halıcılık" carpet-making, "Denizcilik" shipping)
    "cılık", "cilik", "culuk", "cülük", "çılık", "çilik", "çuluk", "çülük",
    # Polish institution nouns ("Nadleśnictwo" forest district, "Towarzystwo" society, "Starostwo")
    "ctwo", "stwo",
    # Icelandic institution words ("…gerðin" the works, "…stofnun" institute, "…stofan" office, "…félagið" society)
    "gerðin", "stofnun", "stofan", "félag", "félagið", "sjóður",
    # fourth round, by meaning: hospital and clinic, police and offices, unions and societies, schools, Māori bodies
    "sairaala", "sjukhus", "sykehus", "sygehus", "ziekenhuis", "krankenhaus", "kórház", "nemocnice", "nemocnica",
    "bolnica", "bolnišnica", "ligoninė", "slimnīca", "haigla", "hastanesi", "sjúkrahús", "klinika", "klinikos",
    "klinikka", "kliniek", "poliklinika", "inspektion", "direktion", "präsidium", "verwaltung", "behörde", "ministerium",
    "gericht", "kammer", "poliisi", "policija", "rendőrség", "samband", "sambandet", "liitto", "yhdistys", "ühing",
    "biedrība", "bendrija", "draugija", "sąjunga", "savienība", "yhtymä", "universitet", "yliopisto", "egyetem",
    "universitāte", "universitetas", "ülikool", "gimnazija", "gimnazjum", "mokykla", "iskola", "rūnanga", "rūnaka",
    "wānanga", "wharekura", "kōhanga", "kaunihera",
)

# Endings that make a compound word an institution's name only as part of a longer word
# ("Datacenter", "Bildungszentrum", "Metsäpalvelu", "Dagstidning"): on their own they
# also end place names ("Brooklyn Center"), which ORG_HEAD_WORDS weighs instead.
ORG_COMPOUND_ENDINGS = (
    "center", "centre", "zentrum", "centrum", "senter", "palvelu", "palvelut", "tidning", "tidningen", "zeitung",
    "verlag", "brauerei", "druckerei", "bryggeri", "rederi", "apotheke", "apotek",
    "hütte", "bau",
    "amt", "polizei", "schule", "klinik", "skola", "skolan", "skole", "skolen", "koulu", "lukio", "škola", "szkoła",
    "okulu", "lisesi", "keskus", "fabrik", "fabriek", "gyár", "tehdas", "werkstatt", "werkstätte", "verkstad", "verksted",
)

# Generic nouns that end the name of a place ("Cobble Creek", "Ōtaki Forks", "Ashcombe Magna").
PLACE_HEAD_WORDS = frozenset(
    """
    creek forks fork valley vale hill hills heights lake lakes bay river falls springs junction bridge harbour harbor
    port island islands isle beach mountain mountains mount cove point ridge green downs down marsh moor moors fen
    heath ness glen dale ford crossing landing bend gap hollow meadows magna parva minor regis village town city
    county parish township municipality flats plains sands wells woods rapids narrows cliffs dunes pines oaks
    eystri ytri nyrðri syðri airport airfield
    """.split()
)

# Endings of a word that make it a place name in other languages ("Borgarfjörður",
# "Hardangerfjorden"): counted for a word of more than the ending and three letters.
PLACE_WORD_ENDINGS = ("fjörður", "fjordur", "fjorden", "fjord", "fjärden", "fjärd", "jökull", "vatnet")

# Words that open the name of a place ("Little Ockbury", "Nowe Rzepiska", "Sankt Ilgen").
PLACE_LEAD_WORDS = frozenset(
    """
    upper lower nether great little north south east west new old saint st san santa são sankt bad ober unter nieder
    groß gross klein alt neu nowe nowa nowy stare stara stary horní dolní velké malé veliki mali gornji donji te
    much norra södra östra västra nordre søndre øvre nedre
    ynys ilha isola île insel eilean inis inish lago lac loch lough llyn mynydd cwm sierra monte puerto
    ciudad cidade gut schloss kloster pulau gunung kota motu
    """.split()
)

# Nouns after which "of X" names a place ("the mayor of X", "a village north of X").
PLACE_OF_NOUNS = frozenset(
    """
    village town city hamlet parish county district municipality region province suburb outskirts centre center
    mayor sheriff people residents harbour harbor port market streets north south east west edge heart
    """.split()
)

# Verbs of motion or residence: "from X" / "to X" after them is a place.
MOTION_VERBS = frozenset(
    """
    move moved moves moving fly flew flies flown drive drove drives driven sail sailed sails travel travelled traveled
    travels flee fled flees go went goes gone come came comes return returned returns relocate relocated emigrate
    emigrated commute commutes commuted walk walked ride rode ship shipped ships deliver delivered sent transfer
    transferred head headed arrive arrived arrives migrate migrated evacuate evacuated retire retired retires
    """.split()
)

# Words for a person's relations and belongings after a possessive ("Oduya's brother").
PERSON_POSSESSIONS = frozenset(
    """
    husband wife son daughter brother sister mother father partner cousin uncle aunt niece nephew family children
    child kids parents boss manager deputy lawyer team colleague friend neighbour neighbor phone number flight car
    truck lorry shop house flat birthday funeral wedding card cards account wallet purse bag handbag passport
    luggage suitcase keys bike bicycle dog cat laptop email e-mail letter salary pension appointment diagnosis
    """.split()
)

# More given names, by region (issue 26): a known given name opening a span is evidence of
# a person. Hand-collected common names; names of the held-out planted texts are kept out
# (tests/test_anonymise_planted.py checks that no held-out name is in any word list).
GIVEN_NAMES_WORLD = frozenset(
    """
    abigail adele agnes alice alison amber andrea angus annie audrey beatrice bethany bridget callum carl chloe colin
    connor craig dawn dean derek donna douglas duncan eileen eleanor elsie emma evelyn fiona fraser gavin gemma gordon
    graham hamish harvey hazel heather hugh iain imogen isla jamie janet jasmine jenny joan joyce judith karen kate
    katie keith kirsty lachlan lauren leah lewis lily lorna lucy lydia malcolm martha matilda megan moira molly morag
    muriel neil niall nigel norman olive owen phoebe poppy rhona robbie ross rowan ruby ryan sally scott shona sophia
    stuart tessa theo toby trevor una vera wendy yvonne zara aoife ciara cian conor darragh deirdre eoin eamon fionn
    grainne liam maeve  oisin padraig roisin ruairi seamus sinead siobhan dafydd gwen rhys sian cerys bronwen
    ifan iolo lowri mared elin gethin
    anke annegret axel bernhard dietrich dirk eckhard elke erwin friedrich gisela gudrun gunther günter hannelore
    heike helmut hildegard holger horst ilse jörg jutta kai karsten konrad lars lothar lutz manfred marlies meike
    nils ole rainer reinhard rolf rudolf rüdiger sigrid silke siegfried thorsten torsten ulf ulrich ute uwe volker
    werner wilfried wiebke
    adèle agathe alain amélie anaïs antoine apolline aurélie baptiste bernadette brigitte céline clément colette
    corentin didier élodie émile étienne fabrice florence gaëlle geneviève gilles guillaume hélène hervé inès jacques
    jérôme joël josiane laetitia léa loïc lucien manon marcel margaux mathieu maxime mireille nathalie océane pascal
    rémi romain sandrine solène sylvie thierry valérie yann yannick yves
    adriana alba alfonso almudena amparo araceli begoña blanca cristina dolores eduardo elena esperanza esteban
    fernanda gonzalo guadalupe ignacio inmaculada jaime jimena joaquín lorena lourdes marisol mercedes montserrat
    nerea pilar ramón raquel rocío rodrigo salvador susana teresa vicente ximena
    alessia antonella beatrice carlo chiara cosimo daniele davide elisa emanuele enrico fabio federica filippo
    gianluca giorgia giacomo ilaria ludovica luigi marcello martina matteo michele paolo pietro riccardo rocco
    silvia stefano tommaso vittoria
    afonso bruna caio conceição duarte fábio gonçalo joão leonor lúcia mariana miguel nuno rui tiago vitória
    anouk bram daan femke floor gijs hanneke jeroen joost koen lieke maarten marieke niels pieter sanne sem stijn
    thijs wouter
    agnar anders arne asger birgitta bjarne björn dag einar eirik elin frida gunnar gustav hanne hilde ingeborg
    jens karin kjell knut lasse liv magnus malin mette morten nils oddvar pål ragnhild rasmus sigurd siv 
    stig sune svein terje tor tove trond ulla viggo
    aino eino eero ilkka jukka kaisa kalle lauri leena liisa matti mikko minna pekka pirjo riikka sanna sari seppo
    tapio timo tuomas tuula veikko
    ari birna einar guðrún gunnhildur helga hrafn jón katrín kristín ólafur sigríður stefán þór
    agata agnieszka aleksander andrzej barbara bartosz beata bogdan bożena czesław dariusz dominika dorota ewa
    grażyna  irena jacek  janusz jerzy joanna józef justyna kamil karolina krzysztof krystyna leszek
    łukasz maciej małgorzata marek mariusz marzena michał mirosław monika paweł przemysław rafał renata robert
    ryszard sławomir stanisław tadeusz teresa tomasz urszula wiesław witold wojciech zbigniew zofia zuzana
    alena eliška františek hana ivana jaroslav jiří kateřina libor lucie marie michaela miroslav ondřej pavla petr
    radek tereza vojtěch zdeněk
    alexei alla anastasia andrei anton boris darya denis dmitry ekaterina elena evgeny galina igor inna irina kirill
    ksenia larisa lyudmila maxim mikhail nadezhda natalia nikolai oksana olga pavel polina roman ruslan sergei
    svetlana tatiana valentina vera viktor vladimir yaroslav yulia yuri zinaida
    bohdan halyna hryhoriy iryna kateryna mykola mykhailo oleksandr oleksiy olena petro serhiy taras vasyl volodymyr
    yevhen yuliia
    aleksandar ana bojan dragan goran ivana jelena marija marko milan milica miloš nemanja nikola predrag slobodan
    snežana stefan vesna zoran željko
    ágnes attila balázs csaba dániel erzsébet ferenc gábor györgy ilona istván jános józsef judit katalin lászló
    mária mihály péter sándor tamás zoltán zsófia zsuzsanna
    adriana alexandru andreea bogdan cătălin constantin cristian diana dumitru florin gheorghe ioana ion iulia
    mihai mircea nicoleta radu sorin valentin vasile
    athanasios dimitris eleni georgios ioannis katerina konstantinos maria nikos panagiotis sofia vasiliki yannis
    ahmet ali ayşe burak can cem deniz ebru elif emine emre esra fatma gizem hakan hasan hüseyin ibrahim kemal leyla
    mehmet murat mustafa özlem selin serkan tuğba ümit yasemin zehra
    abdullah abdul ahmad aisha amina amir amal asma bilal fadi farah fatima hamza hana hassan hussein ibrahim karim
    khalid laila layla mahmoud mariam mohamed mohammad mona mustafa nabil nadia naser nour omar rami rana rashid reem
    salim salma samir sara tarek walid yara yousef youssef zainab zeinab ziad
    arash azadeh babak behnaz  farhad farzaneh golnar hamid leila mahsa mehdi mina navid parisa reza roya
    shirin siamak soraya
    aarav aditya amit ananya anil anita anjali arjun deepa deepak divya gaurav kavita kiran krishna lakshmi manish
    meera neha nikhil pooja priya rahul raj rajesh ravi rohan sanjay shreya sunita suresh vijay vikram
    chen fang hui jing jun lei li lin ming ping qiang tao wei xiaoming xin yan yang ying yu zhen
    akira haruki hiroshi kenji mei naoko sakura takeshi yuki yuko yumi
    ji-woo jin min-jun seo-yeon soo-jin young-ho hye-jin
    adebayo adewale ayodele babatunde bukola chidi chinedu chioma chukwuemeka emeka folake funmilayo ifeanyi kemi
    kunle ngozi nkechi obinna olumide oluwaseun segun tunde uchenna yetunde
    abena akosua ama  kwabena kwame kwasi yaw
    amani baraka juma neema rehema wanjiru njeri otieno achieng
    ayanda lerato mpho nomvula palesa sibusiso sipho thabo themba thandiwe zanele
    abebe alemu dawit hanna meron tsion yonas
    aroha hine mere tama wiremu
    aviv avi dana eitan noa shira tamar yael yosef
    """.split()
)

# Business words that make a capitalised name an organisation wherever they stand in it.
ORG_ANY_WORDS = frozenset(
    """
    agro tech pharma bio eco auto telecom invest trans express international global holding holdings industries
    logistik logistics transport transporte trading avia aero
    """.split()
)

# Trade and institution nouns of other languages that name a business when they open or
# end a capitalised name of two words or more ("Molino X", "X Tidning", "X Mobilya";
# Romance names put the noun first, Germanic, Finnish and Turkish names last). Unlike
# ORG_HEAD_WORDS they count only when no known given name opens the name, since some are
# also surnames ("Jean Moulin", "Ana Molino"). Hand-collected by meaning (mill, bakery,
# pharmacy, newspaper, transport, furniture, textiles, water, energy, building, insurance,
# trade, service), not from the benchmark texts.
ORG_TRADE_WORDS = frozenset(
    """
    molino mulino moulin mühle molen panificio panadería padaria boulangerie bäckerei bakkerij bageri leipomo fırın
    farmacia pharmacie apotheke apteekki eczane apteka lékárna
    tidning tidningen avis avisen zeitung krant lehti sanomat gazzetta giornale periódico diario jornal gazeta
    nautica náutica nautique nautik
    trasporti transportes transports transporte transport kuljetus liikenne nakliyat doprava spedition
    linjat linja-autot linjer linien líneas linee
    mobili muebles móveis meubles möbel meubelen møbler möbler huonekalu mobilya meble
    tessile tessuti textil textiles tekstil tekstiili textilwerk
    vesi acqua aguas wasser vatten vand energia energie energi sähkö
    costruzioni construcciones construções construction bau byggeri bygg rakennus inşaat budownictwo stavby
    assicurazioni seguros assurances versicherung forsikring försäkring vakuutus sigorta ubezpieczenia
    commercio comercio commerce handel kauppa ticaret sanayi servizi servicios serviços palvelu palvelut hizmetleri
    alimentari alimentos alimentaire lebensmittel gıda ristorante restaurante trattoria osteria albergo hostal
    tipografia imprimerie druckerei drukarnia matbaa editorial edizioni éditions verlag uitgeverij förlag forlag
    cantiere astillero chantier werft varvet verft telecomunicazioni telecomunicaciones
    młyn młyny mlýn mlyn malom mylly kvarn mølle pekarnia piekarnia pekárna pekara pékség kepykla maiznīca
    talleres taller officina atelier ateliers dílna warsztat korjaamo hermanos hnos fratelli frères irmãos gebrüder
    gebroeders brødrene bröderna hijos figli filhos söhne zonen
    """.split()
)

# Phrases (accents folded) that open an organisation's name where one word would not
# ("Truong Dai Hoc …" university, "Benh Vien …" hospital, "Rumah Sakit …" hospital): Vietnamese
# and Malay/Indonesian institution nouns, whose single words are also surnames or common words.
ORG_LEAD_PHRASES = (
    "truong dai hoc", "truong tieu hoc", "truong trung hoc", "truong mam non", "truong cao dang", "dai hoc", "benh vien",
    "cong ty", "ngan hang", "hop tac xa", "nha may", "uy ban", "trung tam", "rumah sakit", "sekolah", "yayasan",
    "koperasi", "universitas", "perusahaan", "kantor",
)

# Words between a place and an institution word in the name of a body named after the
# place ("X Parish Council", "X District Health Board"): X alone is then a place.
ADMIN_AREA_WORDS = frozenset(
    """
    parish town city district county borough municipal regional village rural urban township shire
    """.split()
)
