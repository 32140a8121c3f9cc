"""Causal probing on the caller's own labels (analyses.causal_probing.labels): sentence labels, token labels and a
function of the text run end to end on tiny-bert and are named in the result; a token labelling misaligned with the
activations' tokens is one error line naming the text; the labelled word states come out with their shapes; and
the public erasers erase (a linear probe on LEACE's output is at chance on planted data)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import probes
from analyses import causal_probing
from analyses.causal_probing import inlp, leace, word_states
from probes.errors import ProbeError

TEXTS = [f"The {a} saw {n} {b}{', sadly,' if (i + j) % 2 else ''} near the {c} today."
         for i, a in enumerate(("cat", "dog", "man", "girl")) for j, n in enumerate(("two", "nine"))
         for b in ("birds", "cars", "trees") for c in ("river", "house")]
SMALL = dict(layer=[1], seeds=1, n_boot=20, max_items=200, cv_folds=2, cs=[1.0], random_draws=1, inlp_iterations=2,
             min_per_class=3)
ANIMALS = {"cat", "dog", "birds"}


def _run(texts, tmp_path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small sample's notes
        return causal_probing.run("tiny-bert", texts, cache_dir=tmp_path, **SMALL, **kw)


def _acts(tmp_path):
    return probes.extract("tiny-bert", TEXTS, cache_dir=tmp_path)


def test_sentence_labels_run_end_to_end_and_name_the_task(tmp_path):
    comma = np.array(["," in t for t in TEXTS])
    r = _run(TEXTS, tmp_path, labels=comma, label_name="comma")
    assert [t.task for t in r.tasks] == ["comma"]  # only the caller's task unless task= asks for more
    entry = r.tasks[0]
    assert entry.classes == ["False", "True"] and entry.notes["level"] == "sentence"
    assert entry.notes["source"] == "labels given by the caller" and len(entry.notes["labels_sha256"]) == 64
    row = entry.layers[0]
    assert row.layer == 1 and row.leace.rank == 1 and row.leace.excess_loss is not None
    assert 0.0 <= row.leace.accuracy <= 1.0 and "comma" in r.headline()
    both = _run(TEXTS, tmp_path, labels=comma, task=["position"], position_bins=2)
    assert [t.task for t in both.tasks] == ["position", "labels"]


def test_token_labels_and_a_function_of_the_text(tmp_path):
    acts = _acts(tmp_path)
    token_labels = [[tok in ANIMALS for tok in toks] for toks in acts.tokens]
    r = _run(TEXTS, tmp_path, labels=token_labels)
    entry = r.tasks[0]
    assert entry.task == "labels" and entry.notes["level"] == "token" and entry.n_classes == 2
    # every real token is an item (the cap of 200 aside), special tokens never
    assert entry.n_items == min(200, int((~np.asarray(acts.special, bool)).sum()))
    f = _run(TEXTS, tmp_path, labels=lambda text: "," in text, label_name="comma")
    given = _run(TEXTS, tmp_path, labels=["," in t for t in TEXTS], label_name="comma")
    assert f.tasks == given.tasks  # a function of the text is its values


def test_labelled_word_states_have_the_documented_shapes(tmp_path):
    acts = _acts(tmp_path)
    s = word_states(acts, -1, labels=[("," in t) for t in TEXTS], name="comma")
    n, d = s.X.shape
    assert s.name == "comma" and s.layer == acts.n_layers and d == acts.sentence.shape[-1]
    assert s.y.shape == s.groups.shape == s.tokens.shape == (n,) and s.classes == ["False", "True"]
    np.testing.assert_array_equal(s.groups, acts.text_index()[s.tokens])
    np.testing.assert_array_equal(s.y, [("," in TEXTS[g]) for g in s.groups])
    np.testing.assert_allclose(s.X, np.asarray(acts.layer_hidden(-1, s.tokens), np.float64))
    assert not np.asarray(acts.special, bool)[s.tokens].any()
    p = word_states(acts, 0, "position", config=causal_probing.Config(position_bins=2))
    assert p.name == "position" and p.X.shape[0] == p.y.shape[0] and set(p.y.tolist()) == {0, 1}


def test_misaligned_or_malformed_labels_are_one_error_line(tmp_path):
    acts = _acts(tmp_path)
    token_labels = [[0] * len(toks) for toks in acts.tokens]
    token_labels[3] = token_labels[3][:-1]
    with pytest.raises(ProbeError, match=r"labels= for text 3 .* has \d+ token labels") as e:
        causal_probing.compute(acts=acts, labels=token_labels)
    assert "\n" not in str(e.value)
    with pytest.raises(ProbeError, match="labels= gives 2 labels for 48 texts"):
        causal_probing.compute(acts=acts, labels=[0, 1])
    with pytest.raises(ProbeError, match="distinct label"):
        causal_probing.compute(acts=acts, labels=[1] * len(TEXTS))
    with pytest.raises(ProbeError, match="built-in task"):
        causal_probing.compute(causal_probing.Config(task=["position"]), acts=acts, labels=[0, 1] * 24,
                               label_name="position")


def _planted(n=1200, d=16, k=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 3 * np.eye(k)[y] @ rng.normal(size=(k, d))
    return X, y


def test_the_public_erasers_erase():
    from sklearn.linear_model import LogisticRegression

    X, y = _planted()
    train, test = np.arange(800), np.arange(800, 1200)
    chance = np.bincount(y[train]).argmax() == y[test]

    def probe(Z):
        return LogisticRegression(max_iter=1000).fit(Z[train], y[train]).score(Z[test], y[test])

    assert probe(X) > 0.9
    e = leace(X[train], y[train])
    assert e.rank == 2 and e.left.shape == (16, 2) and e.right.shape == (2, 16) and e.bias.shape == (16,)
    erased = e.apply_numpy(X)
    assert erased.shape == X.shape
    assert abs(probe(erased) - chance.mean()) < 0.08  # at chance on held-out items, within sampling noise
    fit = inlp(X[train], y[train], np.arange(800) // 4, iterations=20)
    assert fit.eraser is not None and probe(fit.eraser.apply_numpy(X)) < chance.mean() + 0.1
    assert leace.__doc__ and "(n, d)" in leace.__doc__ and inlp.__doc__ and "(n, d)" in inlp.__doc__
