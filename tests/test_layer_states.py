"""The Hugging Face encoder hands its hidden states to the capture one tensor per layer (LayerStates), never copied
into one stacked tensor; whatever reads them as a stacked (L+1, B, n, d) tensor still can. The capture reads them
layer by layer and zeroes, in place, the rows a mean leaves out once they are stored: two layers that share one
tensor must not see each other's zeros."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

import probes
from probes.models.encoder import LayerStates

TEXTS = ["The cat sat on the mat.", "Padding never reaches a real token.", "Short."]


def test_hf_forward_returns_the_layers_as_the_model_gave_them(tiny_bert):
    ids = torch.tensor([[101, 2023, 2003, 102], [101, 2460, 102, 0]])
    mask = (ids != 0).long()
    out = tiny_bert.forward(ids, mask)
    assert isinstance(out.hidden, LayerStates) and len(out.hidden) == tiny_bert.num_layers + 1
    with torch.inference_mode():
        ref = tiny_bert.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    for got, want in zip(out.hidden, ref, strict=True):
        assert isinstance(got, torch.Tensor) and torch.equal(got, want)
    stacked = torch.stack(tuple(ref))
    assert out.hidden.shape == stacked.shape and out.hidden.dtype == stacked.dtype
    assert torch.equal(out.hidden[:, 1], stacked[:, 1]) and torch.equal(out.hidden[-1], stacked[-1])
    copy = out.hidden.clone()  # what a stacked tensor has, on the stacked tensor
    assert isinstance(copy, torch.Tensor) and torch.equal(copy, stacked)


def test_layers_that_share_a_tensor_are_pooled_from_their_own_states(monkeypatch):
    enc = probes.load("tiny-bert?sentence=mean")
    inner = enc.forward

    def forward(input_ids, attention_mask, maps=False):  # layer 2 is layer 1's tensor itself
        out = inner(input_ids, attention_mask, maps=maps)
        layers = [h.clone() for h in out.hidden]
        layers[2] = layers[1]
        return dataclasses.replace(out, hidden=LayerStates(layers))

    monkeypatch.setattr(enc, "forward", forward)
    acts = probes.extract(enc, TEXTS, cache_dir=None, progress=False)
    hidden, sentence = np.asarray(acts.hidden), np.asarray(acts.sentence)
    np.testing.assert_array_equal(hidden[2], hidden[1])  # [CLS] and [SEP] rows too: not zeroed by layer 1's mean
    assert np.abs(hidden[1][acts.special]).min() > 0
    np.testing.assert_array_equal(sentence[2], sentence[1])
    for t in range(acts.n_texts):
        rows = acts.text_hidden(t)[1][~acts.special[acts.offsets[t]:acts.offsets[t + 1]]]
        np.testing.assert_allclose(sentence[1, t], rows.mean(0), rtol=0, atol=1e-6)
