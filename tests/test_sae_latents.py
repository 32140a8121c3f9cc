"""An SAE's latents as the states the probing protocol reads: the latents are the SAE's encoding of the layer's
states, probing runs on them with its control task, and a dictionary that says nothing probes at the majority
baseline while a trained one carries the tokens' positions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_sae import synthetic_acts

import probes
from analyses import probing
from analyses.sae.latents import latent_name, latents
from analyses.sae.model import SAE, SaeShape
from analyses.sae.train import TrainSettings, train_sae
from probes.errors import ProbeError

WORDS = ["cat", "dog", "sea", "river", "house", "lamp", "road", "song", "city", "book", "tree", "cloud"]


@pytest.fixture(scope="module")
def acts():
    rng = np.random.default_rng(0)
    texts = [" ".join(["The", *rng.choice(WORDS, size=int(rng.integers(4, 9))), "today."]) for _ in range(80)]
    return probes.extract("tiny-bert", texts, cache_dir=None, progress=False)


@pytest.fixture(scope="module")
def trained(acts):
    X = np.asarray(acts.layer_hidden(1), np.float32)
    return train_sae(X, SaeShape("topk", X.shape[1], 64, 8), TrainSettings(steps=60, batch=128, seed=0)).sae


def test_the_latents_are_the_sae_encoding_of_the_layer_and_of_its_sentence_vectors(acts, trained):
    lat = latents(acts, trained, -2)  # layer 1 of 2
    with torch.no_grad():
        z = trained.encode(torch.from_numpy(np.asarray(acts.layer_hidden(1), np.float32))).numpy()
        s = trained.encode(torch.from_numpy(np.asarray(acts.sentence[1], np.float32))).numpy()
    assert lat.hidden.shape == (1, len(acts.token_ids), 64) and lat.n_layers == 0
    assert np.array_equal(lat.layer_hidden(0), z) and np.array_equal(lat.sentence[0], s)
    assert ((lat.layer_hidden(0) > 0).sum(1) <= 8).all()
    assert lat.meta["model"]["name"] == latent_name("tiny-bert", 1) == "tiny-bert+sae@1"
    assert lat.meta["sae"]["layer"] == 1 and lat.meta["sae"]["width"] == 64
    assert acts.meta["model"]["name"] == "tiny-bert"  # the model's own activations are untouched


def test_probing_runs_on_the_latents_with_its_control_task(acts, trained):
    cfg = probing.Config(task=["position"], n_boot=50, max_items=800)
    rows = probing.table_rows(probing.compute(cfg, acts=latents(acts, trained, 1)))
    assert [r["layer"] for r in rows] == [0]
    row = rows[0]
    assert row["accuracy"] > row["majority"] + 0.2  # the positions are in the dictionary's features
    assert "control_accuracy" in row and np.isclose(row["selectivity"], row["accuracy"] - row["control_accuracy"])
    silent = SAE(SaeShape("topk", 32, 64, 8))
    with torch.no_grad():
        silent.W_enc.zero_()
        silent.b_enc.fill_(-1.0)  # no latent ever fires: nothing to read
    row = probing.table_rows(probing.compute(cfg, acts=latents(acts, silent, 1)))[0]
    assert row["accuracy"] == pytest.approx(row["majority"])


def test_latents_refuse_another_width_nan_states_and_a_missing_layer(trained):
    hidden = np.random.default_rng(0).normal(size=(3, 100, 32))
    with pytest.raises(ProbeError, match="layer 5 is out of range"):
        latents(synthetic_acts(hidden, 10), trained, 5)
    with pytest.raises(ProbeError, match="width 16, but the SAE reads states of width 32"):
        latents(synthetic_acts(hidden[..., :16], 10), trained, 1)
    bad = hidden.copy()
    bad[2, 4, 0] = np.inf
    with pytest.raises(ProbeError, match="layer 2 token states: 1 of 100 states hold NaN or inf"):
        latents(synthetic_acts(bad, 10), trained, 2)
