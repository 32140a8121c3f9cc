"""An intervention's identity and what it applies cannot part: an edit's arrays are read-only copies (a caller's
array changed afterwards changes nothing; writing into the edit's own is an error), an Edit subclass that does not
declare what it reads is never keyed, and bad settings (a non-finite scale, a float layer, integer states from a
function) are one error line. Patches: one target text with several sources pairs by row (by token ids it is
refused), sources of another model are refused; positions patch only the tokens chosen. Tiny BERT, seconds."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import probes
from probes.errors import ProbeError
from probes.intervention import AddVector, Edit, Erase, Function, Intervention, Patch, ProjectOut, hooked

TEXTS = ["The cat sat on the mat.", "A much longer sentence about the weather and the sea today.", "Hi there."]
D = 32  # tiny-bert's width


def _x(texts=TEXTS, **kw):
    return probes.extract("tiny-bert", texts, progress=False, cache_dtype="float32", **kw)


def _h(acts, layer):
    return np.asarray(acts.layer_hidden(layer), np.float64)


@pytest.mark.parametrize("make", [
    lambda: np.random.default_rng(0).normal(size=D) * 3,
    lambda: torch.from_numpy(np.random.default_rng(0).normal(size=D) * 3),  # float64 tensor: shared memory
    lambda: torch.from_numpy(np.random.default_rng(0).normal(size=D) * 3).float(),
])
def test_changing_the_callers_array_after_use_changes_neither_key_nor_states(make, tmp_path):
    v = make()
    iv = Intervention(1, AddVector(v))
    first = _x(cache_dir=tmp_path, intervention=iv)
    v *= -1  # a steering sweep that rescales its array in place
    again = _x(cache_dir=tmp_path, intervention=iv)
    assert again.meta["key"] == first.meta["key"]
    np.testing.assert_array_equal(_h(again, 1), _h(first, 1))
    new = _x(cache_dir=tmp_path, intervention=Intervention(1, AddVector(np.array(v, np.float64))))
    fresh = _x(cache_dir=None, intervention=Intervention(1, AddVector(np.array(v, np.float64))))
    assert new.meta["key"] != first.meta["key"]
    np.testing.assert_allclose(_h(new, 1), _h(fresh, 1), atol=1e-6)


def test_an_edits_arrays_are_read_only_copies():
    left = np.random.default_rng(1).normal(size=(D, 2))
    center = np.ones(D)
    erase = Erase(left, np.linalg.pinv(left), center)
    project = ProjectOut(np.random.default_rng(2).normal(size=(2, D)), center)
    before = erase.identity(), project.identity()
    left[:] = 0
    center[:] = 5
    assert (erase.identity(), project.identity()) == before
    add = AddVector(np.ones(D))
    patch = Patch({(1, 2, 3): np.ones((3, D))})
    for array in (*erase.arrays(), *project.arrays(), add.vector, *patch.sources.values()):
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
    with pytest.raises(TypeError):
        patch.sources[(4, 5)] = np.zeros((2, D))  # the mapping is read-only too
    assert add.identity() == AddVector(np.ones(D, np.float32)).identity() == AddVector(torch.ones(D)).identity()
    assert AddVector(torch.ones(D, dtype=torch.bfloat16)).identity() == add.identity()


def test_an_edit_subclass_is_keyed_only_when_it_declares_what_it_reads(tmp_path):
    class Zero(Edit):
        def apply(self, h, batch):
            return h * 0.0

    class Double(Edit):
        def apply(self, h, batch):
            return h * 2.0

    class Scaled(AddVector):  # inherits AddVector's kind and arrays, but applies something else
        def apply(self, h, batch):
            return h * self.scale

    class Declared(Edit):
        kind = "shift"

        def __init__(self, v):
            self.v = v

        def apply(self, h, batch):
            return h + self._on(self.v, h)

        def settings(self):
            return {}

        def arrays(self):
            return (self.v,)

    assert Zero().identity() is None and Double().identity() is None and Scaled(np.ones(D)).identity() is None
    assert Intervention(1, Zero()).describe() == {"layer": 1, "edit": "custom", "class": Zero().describe()["class"]}
    assert "Zero" in Zero().describe()["class"]
    with pytest.warns(UserWarning, match="no key can see"):
        _x(cache_dir=tmp_path, intervention=Intervention(1, Zero()))
    with pytest.warns(UserWarning, match="no key can see"):
        doubled = _x(cache_dir=tmp_path, intervention=Intervention(1, Double()))
    assert not (tmp_path / "tiny-bert").exists()
    np.testing.assert_allclose(_h(doubled, 1), 2 * _h(_x(cache_dir=None), 1), rtol=1e-5, atol=1e-5)
    ident = Declared(np.ones(D)).identity()
    assert ident is not None and ident["edit"] == "shift" and "Declared" in ident["class"]
    assert AddVector(np.ones(D)).identity() == {"edit": "add", "scale": 1.0, "sha256": ident["sha256"]}


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -np.inf, "big"])
def test_a_non_finite_scale_is_refused(scale):
    with pytest.raises(ProbeError, match="scale must be"):
        AddVector(np.ones(D), scale)


def test_numpy_integer_layers_are_whole_numbers_and_integer_states_are_refused():
    iv = Intervention(np.int64(1), AddVector(np.ones(D)))
    assert iv.layer == 1 and type(iv.layer) is int
    assert iv.identity() == Intervention(1, AddVector(np.ones(D))).identity()
    for bad in (1.0, True, np.bool_(True), "1"):
        with pytest.raises(ProbeError, match="whole number"):
            Intervention(bad, AddVector(np.ones(D)))
    with pytest.raises(ProbeError, match="floating-point"):
        _x(cache_dir=None, intervention=Intervention(1, Function(lambda h: h.long(), name="int")))


def test_one_target_with_several_sources_pairs_by_row_and_identical_pairs_are_kept():
    target = _x([TEXTS[0], TEXTS[0]], cache_dir=None)
    sources = _x([TEXTS[1], TEXTS[2]], cache_dir=None)
    with pytest.raises(ProbeError, match="tokenize alike"):
        Patch.from_activations(target, sources, layer=1, pair="tokens")
    assert Patch.from_activations(target, sources, layer=1).by_row  # tests/test_intervention_patch.py: the states
    same = Patch.from_activations(target, _x([TEXTS[1], TEXTS[1]], cache_dir=None), layer=1)
    assert len(same.sources) == 1 and not same.by_row


def test_sources_of_another_model_are_refused():
    target = _x(TEXTS[:1], cache_dir=None)
    other = probes.extract("tiny-albert", TEXTS[1:2], cache_dir=None, progress=False)  # also 32 wide
    assert _h(other, 1).shape[1] == D
    with pytest.raises(ProbeError, match="another fingerprint"):
        Patch.from_activations(target, other, layer=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Patch.from_activations(target, probes.extract("tiny-bert?sentence=mean", TEXTS[1:2], cache_dir=None,
                                                       progress=False), layer=1)  # the same weights


def test_a_patch_at_positions_replaces_those_tokens_only():
    a, b = "the cat sat on the mat", "a dog ran in the park"
    target, source = _x([a], cache_dir=None), _x([b], cache_dir=None)
    n = len(target.token_ids)
    assert n == len(source.token_ids)
    for positions, chosen in (([1, -2], [1, n - 2]), (np.arange(n) == 3, [3]), (torch.tensor([2]), [2])):
        patch = Patch.from_activations(target, source, layer=1, positions=positions)
        got = _h(_x([a], cache_dir=None, intervention=Intervention(1, patch)), 1)
        rest = np.setdiff1d(np.arange(n), chosen)
        np.testing.assert_allclose(got[chosen], _h(source, 1)[chosen], atol=1e-5)
        np.testing.assert_array_equal(got[rest], _h(target, 1)[rest])
    whole = Patch.from_activations(target, source, layer=1, pair="tokens")
    assert "positions" not in whole.identity() and whole.identity() != patch.identity()
    with pytest.raises(ProbeError, match="position 40"):
        _x([a], cache_dir=None, intervention=Intervention(1, Patch(dict(whole.sources), positions=[40])))
    with pytest.raises(ProbeError, match="mask is for inputs of 3 tokens"):
        _x([a], cache_dir=None, intervention=Intervention(1, Patch(dict(whole.sources), positions=[True, False,
                                                                                                    True])))
    with pytest.raises(ProbeError, match="token indices"):
        Patch(dict(whole.sources), positions=[0.5])


def test_a_float64_model_applies_the_read_only_array_without_a_warning():
    from probes.models.lm import load_lm

    lm = load_lm("tiny-gpt2")
    ids = torch.tensor([lm.encode("the cat sat on the mat")])
    lm.model.double()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.no_grad(), hooked(lm, Intervention(1, AddVector(np.ones(lm.base.config.hidden_size)))):
                lm.model(input_ids=ids)
    finally:
        lm.model.float()
