"""A model's description (analyses.model_info.ModelInfo) and a pair of them: read by one codec that gives back the
saved object key for key and in order (result files keep their schema), read by attribute everywhere."""

from __future__ import annotations

import json

import pytest

from analyses.common import Identity
from analyses.model_info import ModelInfo, ModelPair, model_of

# as probes' Encoder.describe() writes it, then sentence_pooling added by a cache hit of an older entry
SAVED = {"name": "bert-small", "family": "hf", "kind": "encoder", "source": {"hub": "x"},
         "fingerprint": {"weights_sha256": "ab" * 32}, "num_layers": 4, "hidden_size": 512, "max_length": 128,
         "sentence_vector": "cls", "special_tokens_added": True, "final_norm_on_last_hidden": False,
         "sentence_pooling": "the [CLS] token's state"}


def test_a_description_reads_by_attribute_and_writes_back_key_for_key_in_order():
    m = ModelInfo.from_json(SAVED)
    assert (m.name, m.family, m.kind, m.num_layers, m.hidden_size) == ("bert-small", "hf", "encoder", 4, 512)
    assert m.sentence_vector == "cls" and m.final_norm_on_last_hidden is False and m.weights_sha256 == "ab" * 32
    assert m.extra == {"max_length": 128, "special_tokens_added": True, "sentence_pooling": "the [CLS] token's state"}
    assert json.dumps(m.to_json()) == json.dumps(SAVED)  # the same keys, values and order
    assert m.intervention is None and "intervention" not in m.to_json()  # a key never saved is never written


def test_a_renamed_description_keeps_the_rest_and_a_new_field_is_written_after_the_saved_keys():
    m = ModelInfo.from_json({"family": "hf", "name": "a"}).renamed("b")
    assert list(m.to_json().items()) == [("family", "hf"), ("name", "b")]
    assert ModelInfo(name="x", num_layers=2).to_json() == {"name": "x", "num_layers": 2}


def test_a_pair_is_two_descriptions_and_one_model_is_one():
    doc = {"a": {"name": "x", "window": 128}, "b": {"name": "y", "family": "recurrent"}}
    pair = model_of(doc)
    assert isinstance(pair, ModelPair) and pair.a.window == 128 and pair.b.family == "recurrent"
    assert pair.to_json() == doc
    assert isinstance(model_of({"name": "x"}), ModelInfo)
    with pytest.raises(TypeError):
        ModelInfo.from_json(["not", "an", "object"])  # type: ignore[arg-type]


def test_an_identity_written_before_reads_back_and_is_written_again_unchanged():
    doc = {"model_name": "bert-small", "config": {"seed": 0}, "model": SAVED, "corpus": {"name": "c"}}
    ident = Identity.from_json(doc)
    assert isinstance(ident.model, ModelInfo) and ident.info.num_layers == 4 and ident.pair is None
    assert json.dumps(ident.to_json()) == json.dumps(doc)
    pair_doc = {"model_name": "x__y", "config": {}, "model_a": {"name": "x"}, "model_b": {"name": "y"}}
    keys = {"model": ("model_a", "model_b")}
    pair = Identity.from_json(pair_doc, keys)
    assert pair.pair is not None and pair.pair.b.name == "y"
    assert pair.to_json(keys) == {**pair_doc, "corpus": None}
    with pytest.raises(TypeError, match="pair"):
        pair.info  # noqa: B018 - one model's description of a pair's result: an error, not a guess
