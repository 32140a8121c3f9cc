"""An intervention applies everywhere it is said to: the model's own objective (what causal probing scores) runs
under the enclosing ``intervening`` block as an extraction does, and records it; the tuned lens never reuses
translators trained under an edit that no key can see. Tiny BERT and tiny GPT-2, seconds."""

from __future__ import annotations

import numpy as np
import pytest

from probes.capture import tuned_lens as tl
from probes.capture.objective import load_objective
from probes.intervention import AddVector, Function, Intervention, intervening
from probes.models.lm import load_lm

TEXTS = ["The cat sat on the mat today.", "Her Father fondly replied, Ah my dear!", "It rained all day long."] * 2


def test_the_objective_scores_under_the_enclosing_block_and_records_it():
    objective = load_objective("tiny-bert")
    iv = Intervention(1, AddVector(np.random.default_rng(0).normal(size=32) * 50))
    clean, _ = objective.score(TEXTS)
    explicit, _ = objective.score(TEXTS, [iv])
    assert np.abs(explicit - clean).max() > 1e-2
    with intervening(iv):
        inside, _ = objective.score(TEXTS)
        described = objective.describe(0.15, 0)
        both, _ = objective.score(TEXTS, [Intervention(1, AddVector(np.zeros(32)))])  # the block's, then its own
    np.testing.assert_allclose(inside, explicit, rtol=1e-6)
    np.testing.assert_allclose(both, explicit, rtol=1e-6)
    assert described["intervention"] == [iv.identity()]
    assert "intervention" not in objective.describe(0.15, 0)


def test_the_tuned_lens_trains_afresh_under_an_edit_no_key_can_see(tmp_path):
    lm = load_lm("tiny-gpt2")
    docs = [lm.encode("Call me Ishmael. Some years ago, never mind how long precisely, having little money."),
            lm.encode("It is a truth universally acknowledged, that a single man must be in want of a wife.")]
    settings = tl.TrainSettings(window=16, overlap=2, steps=3, tokens_per_step=24, seed=0)
    records = []
    for fn in (lambda h: h * 0.0, lambda h: h):  # two functions of one label
        with intervening(Intervention(1, Function(fn))), pytest.warns(UserWarning, match="temporary folder"):
            translators, record = tl.tuned_translators(lm, docs, {"name": "two"}, settings, tmp_path, progress=False)
        records.append(record)
    assert not any(tmp_path.iterdir())  # nothing kept where a later run could find it
    assert not records[0]["reused"] and not records[1]["reused"]
    assert records[0]["translators_sha256"] != records[1]["translators_sha256"]
    keyed = Intervention(1, AddVector(np.ones(lm.base.config.hidden_size)))
    with intervening(keyed):  # an edit a key can see: kept and reused
        first = tl.tuned_translators(lm, docs, {"name": "two"}, settings, tmp_path, progress=False)[1]
        again = tl.tuned_translators(lm, docs, {"name": "two"}, settings, tmp_path, progress=False)[1]
    assert not first["reused"] and again["reused"] and again["folder"].startswith(str(tmp_path))
