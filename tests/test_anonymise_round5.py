"""The fifth round of the ``ner`` strategy (issue 26, fault 3): the kinds of miss that
heldout3 showed (tests/data/pii_planted/README.md), each on fresh sentences written for
this file (in no benchmark text, no name of any planted set). Every sentence here was
left partly readable, cut into pieces, swallowed a neighbouring word or was typed wrongly
before the round.

Rules: postcodes of more shapes, street words of more languages, a lower-case street word
before the number, a house number before the street ("No. 5,") or a hyphenated one with no
street word, a postcode after the town, a town with particles
(resources/privacy/anonymise/spans.py); an international telephone number with a one-digit
group (resources/privacy/anonymise/patterns.py); dotted legal forms, connectors of other
languages, an acronym opening a name, an apposition naming a body, a verb whose object is
a body, a name after "the", a heading noun before "for" (resources/privacy/anonymise/structure.py);
plural days, patronymic particles, legal forms and a rare adjective that is a given name.
"""

from __future__ import annotations

import pytest

from resources.privacy.anonymise import build_anonymiser
from resources.privacy.anonymise import structure
from resources.privacy.anonymise.ner import _without_sentence_opener, heading_word
from resources.privacy.anonymise.patterns import DeterministicRecogniser


@pytest.fixture(scope="module")
def ner():
    return build_anonymiser(["ner"])


@pytest.mark.parametrize(("text", "sent"), [
    # postcodes of three and two digits, and a lower-case street word of another language
    ("Ondrej Kubaliak lives at Dlhá 48, 917 01 Trnava and walks to work.",
     "[PERSON_1] lives at [LOCATION_1], [LOCATION_2] and walks to work."),
    ("Send the forms to Ermou 71, 105 63 Athina before June.", "Send the forms to [LOCATION_1], [LOCATION_2] before June."),
    ("Meelis Aruoja moved to Pargi tee 7, 72711 Paide last year.", "[PERSON_1] moved to [LOCATION_1], [LOCATION_2] last year."),
    # a house number with no street word after "at", hyphenated blocks, a postcode after the town
    ("Ailsa Dalgleish lives at 7 Heather Knowe, Glenmorrin, with two dogs.",
     "[PERSON_1] lives at [LOCATION_1], [LOCATION_2], with two dogs."),
    ("Mr Kenji Hoshino lives at 3-14-2 Sakuragaoka, Machida 194-0013, near the station.",
     "Mr [PERSON_1] lives at [LOCATION_1], [LOCATION_2], near the station."),
    # a house number before a street of another language
    ("Faridah Osman lives at No. 5, Jalan Kenanga 2, 43000 Kajang.", "[PERSON_1] lives at [LOCATION_1], [LOCATION_2]."),
    # a town after its postcode with a name particle in it
    ("Write to Plaça Nova 2, 17176 Sant Esteve de Llémena for the tickets.", "Write to [LOCATION_1], [LOCATION_2] for the tickets."),
    # dotted legal forms, lower or upper case, the closing dot included
    ("Arben Muça founded Vlora Peshk sh.p.k. last year.", "[PERSON_1] founded [ORGANIZATION_1] last year."),
    ("Nikos Alexiou sells feta to Epirus Galaktokomiki A.E. every week.", "[PERSON_1] sells feta to [ORGANIZATION_1] every week."),
    ("Jelle Bakker left Groningen Zaden B.V. in May.", "[PERSON_1] left [ORGANIZATION_1] in May."),
    # legal forms of more countries
    ("Tõnu Ruusmaa founded Saaremaa Kivi OÜ in 2015.", "[PERSON_1] founded [ORGANIZATION_1] in 2015."),
    ("Gor Sahakyan sells rugs for Masis Stone CJSC.", "[PERSON_1] sells rugs for [ORGANIZATION_1]."),
    # a connector of another language inside a body's name (Tagalog "ng", Yoruba "ti")
    ("Lakan Dimasalang volunteers with Kapisanan ng Mangingisda ng Batangas on weekends.",
     "[PERSON_1] volunteers with [ORGANIZATION_1] on weekends."),
    ("Bolaji Akinwande leads Egbe Agbe ti Iseyin with his cousin.", "[PERSON_1] leads [ORGANIZATION_1] with his cousin."),
    # an acronym opening a name: a club, a company
    ("Tomislav Jurić plays for HNK Sloga Mravince every Sunday.", "[PERSON_1] plays for [ORGANIZATION_1] every Sunday."),
    ("Ketut Wirawan works for PT Sinar Kelapa Jaya in Denpasar.", "[PERSON_1] works for [ORGANIZATION_1] in [LOCATION_1]."),
    # an apposition that names a body, a verb whose object is a body
    ("Mele Tupou runs Koloa Tapa Fale, a women's cooperative in Hihifo.",
     "[PERSON_1] runs [ORGANIZATION_1], a women's cooperative in [LOCATION_1]."),
    ("Abdi Warsame coordinates Biyo Nadiif, an NGO in Garowe.", "[PERSON_1] coordinates [ORGANIZATION_1], an NGO in [LOCATION_1]."),
    ("Lerato Ntsekhe works for Thaba Pele Mabone in Maseru.", "[PERSON_1] works for [ORGANIZATION_1] in [LOCATION_1]."),
    # "the" before a name of several words: a body, no person
    ("Pau Rovira plays in the Cobla Mediterrània de Reus.", "[PERSON_1] plays in the [ORGANIZATION_1]."),
    ("Ane Urrutia dances in the Dantzari Talde Zaharra every Friday.", "[PERSON_1] dances in the [ORGANIZATION_1] every Friday."),
    # an institution word spelt with a hyphen; a place after "above"
    ("Kiviuq Arnaq sells prints through Pangnirtung Weavers Co-operative.", "[PERSON_1] sells prints through [ORGANIZATION_1]."),
    ("The hut stands above Sertig, said Corsin Bundi.", "The hut stands above [LOCATION_1], said [PERSON_1]."),
    # a preposition of another language between two names does not join them
    ("Solène Morvan tient la Boulangerie du Port à Lorient.", "[PERSON_1] tient la [ORGANIZATION_1] à [LOCATION_1]."),
    # a plural day is no part of a name; a patronymic particle joins one
    ("On Fridays Radka Holubová opens the shop early.", "On Fridays [PERSON_1] opens the shop early."),
    ("Siti Aisyah binti Kamal works in Ipoh.", "[PERSON_1] works in [LOCATION_1]."),
])
def test_round_five_kinds_are_masked_and_typed(ner, text, sent):
    assert ner.anonymise(text).text == sent


@pytest.mark.parametrize(("text", "number"), [
    ("call +374 10 5 62 91 after six", "+374 10 5 62 91"),
    ("ring 0049 40 3 12 88 70 tomorrow", "0049 40 3 12 88 70"),
    ("the office: +421 2 5 47 93 10", "+421 2 5 47 93 10"),
])
def test_an_international_number_with_a_one_digit_group_is_one_phone_number(text, number):
    found = DeterministicRecogniser().find(text)
    assert [(e.type, e.text) for e in found] == [("PHONE_NUMBER", number)]


def test_no_phone_number_in_pages_and_dates():
    assert DeterministicRecogniser().find("Page 3 of 12 was printed on 12 3 2020.") == []


def test_two_people_with_vs_between_stay_two(ner):
    assert ner.anonymise("Dana Ruiz vs Carla Moss ended in a draw.").text == "[PERSON_1] vs [PERSON_2] ended in a draw."


def test_a_heading_noun_and_its_preposition_are_no_part_of_a_name():
    text = "Invoice for Gayane Petrosyan, paid on Friday."
    # the tagger may read the heading as a proper noun: the rule holds whatever it says
    assert _without_sentence_opener(text, (0, 28), lambda offset: True) == (12, 28)
    assert _without_sentence_opener("Ministry for Gender Affairs", (0, 27), lambda offset: True) == (0, 27)
    assert heading_word("Invoice") and not heading_word("Ministry")


def test_dotted_abbreviations_that_are_no_legal_form():
    text = "Maria Lopez e.g. wrote"
    assert structure.dotted_form_end(text, 0, 11) == 11
    assert structure.dotted_form_evidence("Delta Foods B.V.") == 4.0
    assert structure.is_connector("ng") and not structure.is_connector("of") and not structure.is_connector("run")
    assert not structure.is_connector("à") and not structure.is_connector("en")
