"""Interventions (probes.intervention): a planted edit of layer l is read back exactly in the states the capture
records for layer l (and nowhere before it), in every family of model; in a causal LM's outputs; and the
activation cache keys on it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import probes
from probes.errors import ProbeError
from probes.intervention import AddVector, Function, Intervention, Patch, ProjectOut, hooked, intervening

TEXTS = ["The cat sat on the mat.", "A much longer sentence about the weather and the sea today.", "Hi there."]


def _h(acts, layer):
    return np.asarray(acts.layer_hidden(layer), np.float64)


# tiny-albert: one layer module shared by every layer (counted calls); tiny-mpnet: layers run by a loop that records
# hidden[0] itself; tiny-gpt2: hidden[L] after the final norm; tiny-slstm, tiny-mog: the suite's own architectures
@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-albert", "tiny-mpnet", "tiny-slstm", "tiny-mog"])
def test_added_vector_is_read_back_at_its_layer_only(name):
    clean = probes.extract(name, TEXTS, cache_dir=None, progress=False)
    L, d = clean.n_layers, clean.hidden.shape[-1]
    v = np.random.default_rng(0).normal(size=d)
    for layer in range(L + 1):
        edited = probes.extract(name, TEXTS, cache_dir=None, progress=False,
                                intervention=Intervention(layer, AddVector(v)))
        np.testing.assert_allclose(_h(edited, layer) - _h(clean, layer), np.broadcast_to(v, (len(clean.token_ids), d)),
                                   atol=1e-5)
        for before in range(layer):
            np.testing.assert_array_equal(_h(edited, before), _h(clean, before))
        if layer < L:  # the later layers compute from the edited states
            assert np.abs(_h(edited, L) - _h(clean, L)).max() > 1e-3
        assert edited.meta["intervention"][0]["layer"] == layer


def test_projected_out_directions_are_gone_from_the_states():
    clean = probes.extract("tiny-bert", TEXTS, cache_dir=None, progress=False)
    basis = np.random.default_rng(1).normal(size=(3, clean.hidden.shape[-1]))
    edited = probes.extract("tiny-bert", TEXTS, cache_dir=None, progress=False,
                            intervention=Intervention(1, ProjectOut(basis)))
    assert np.abs(_h(edited, 1) @ basis.T).max() < 1e-4  # nothing left along the basis
    assert np.abs(_h(clean, 1) @ basis.T).max() > 0.1
    q = np.linalg.qr(basis.T)[0]  # what is orthogonal to it is kept
    np.testing.assert_allclose(_h(edited, 1), _h(clean, 1) - _h(clean, 1) @ q @ q.T, atol=1e-5)


def test_cache_key_covers_the_intervention(tmp_path):
    d = 32
    iv = Intervention(1, AddVector(np.ones(d)))
    clean = probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False)
    edited = probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False, intervention=iv)
    again = probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False,
                           intervention=Intervention(1, AddVector(np.ones(d))))  # an equal edit: the same entry
    other = probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False,
                           intervention=Intervention(1, AddVector(2 * np.ones(d))))
    keys = [a.meta["key"] for a in (clean, edited, again, other)]
    assert keys[1] == keys[2] and len({keys[0], keys[1], keys[3]}) == 3
    assert len(list((tmp_path / "tiny-bert").iterdir())) == 3
    np.testing.assert_allclose(_h(again, 1) - _h(clean, 1), 1.0, atol=2e-3)  # read back from the float16 cache
    with intervening(iv):  # the context reaches extract the same way
        assert probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False).meta["key"] == keys[1]


def test_a_function_edit_bypasses_the_cache_with_one_warning(tmp_path):
    iv = Intervention(1, Function(lambda h: h * 0.5, name="halve"))
    with pytest.warns(UserWarning, match="no key can see"):
        acts = probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path, progress=False, intervention=iv)
    assert not (tmp_path / "tiny-bert").exists()
    assert acts.meta["intervention"] == [{"layer": 1, "edit": "function", "function": "halve"}]


def test_edits_in_a_causal_lm_reach_its_outputs():
    from probes.models.lm import load_lm

    lm = load_lm("tiny-gpt2")
    ids = torch.tensor([lm.encode("the cat sat on the mat and the dog")])
    L, d = lm.base.config.num_hidden_layers, lm.base.config.hidden_size
    v = torch.randn(d, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        clean = lm.model(input_ids=ids).logits
        with hooked(lm, Intervention(L, AddVector(v.numpy()))):  # after the final norm: the head reads it as it is
            edited = lm.model(input_ids=ids).logits
        after = lm.model(input_ids=ids).logits  # the hooks are gone again
    W = lm.model.get_output_embeddings().weight
    torch.testing.assert_close(edited - clean, (v @ W.T).expand_as(clean), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(after, clean)


def test_a_patch_makes_the_lm_see_the_other_input():
    from probes.models.lm import load_lm

    a, b = "the cat sat on the mat", "a dog ran in the park"
    acts = probes.extract("tiny-gpt2", [a, b], cache_dir=None, progress=False)
    n = np.diff(acts.offsets)
    assert n[0] == n[1]  # same length: every position is patched
    patch = Patch.from_activations(acts, probes.extract("tiny-gpt2", [b, a], cache_dir=None, progress=False), 1)
    lm = load_lm("tiny-gpt2")
    with torch.no_grad():
        want = lm.model(input_ids=torch.tensor([lm.encode(b)])).logits
        with hooked(lm, Intervention(1, patch)):
            got = lm.model(input_ids=torch.tensor([lm.encode(a)])).logits
            with pytest.raises(ProbeError, match="no states for an input"):
                lm.model(input_ids=torch.tensor([lm.encode("something else entirely")]))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_an_analysis_runs_and_records_its_intervention(tmp_path):
    from analyses import anisotropy, perplexity

    iv = Intervention(-1, AddVector(np.full(32, 3.0)))
    r = anisotropy.run("tiny-bert", TEXTS * 4, n_tokens=20, cache_dir=tmp_path, intervention=iv)
    assert r.activations["intervention"] == [iv.identity()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few blocks: the interval's coverage warning
        clean = perplexity.run("tiny-gpt2", TEXTS, window=16, overlap=[0])
        edited = perplexity.run("tiny-gpt2", TEXTS, window=16, overlap=[0], intervention=iv)
    assert edited.model.intervention == [iv.identity()] and clean.model.intervention is None
    assert edited.headline() != clean.headline()  # the scoring ran under the edit


def test_bad_interventions_are_one_error_line():
    with pytest.raises(ProbeError, match="layers 0..2"):
        probes.extract("tiny-bert", TEXTS, cache_dir=None, progress=False,
                       intervention=Intervention(5, AddVector(np.ones(32))))
    with pytest.raises(ProbeError, match="32"):
        probes.extract("tiny-bert", TEXTS, cache_dir=None, progress=False,
                       intervention=Intervention(1, AddVector(np.ones(7))))
    with pytest.raises(ProbeError, match="Intervention"):
        probes.extract("tiny-bert", TEXTS, cache_dir=None, progress=False, intervention="layer 2")
    with pytest.raises(ProbeError, match="NaN"):
        AddVector([np.nan, 1.0])
