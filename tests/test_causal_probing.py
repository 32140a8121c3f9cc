"""Causal probing (analyses.causal_probing): LEACE equals the concept-erasure package's eraser; the erasers remove
what they should and their random controls do not; a property a tiny LM is trained to use costs it far more loss to
lose than a random subspace of the same rank, and one it does not use costs nothing; and the analysis runs from
Python and the command line on the tiny registry models."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from analyses import causal_probing
from analyses.causal_probing import erasers
from analyses.summary.findings import sentences
from probes.errors import ProbeError

TEXTS = [f"The {a} saw {n} {b} near the {c} today." for a in ("cat", "dog", "man", "girl") for n in ("two", "nine")
         for b in ("birds", "cars", "trees") for c in ("river", "house")]


def _planted(n=600, d=24, k=4, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 3 * np.eye(k)[y] @ rng.normal(size=(k, d))
    return X, y


@pytest.mark.parametrize("shrinkage", [True, False])
@pytest.mark.parametrize("n, d, k", [(600, 24, 4), (80, 48, 3), (1000, 16, 2)])
def test_leace_equals_the_concept_erasure_package(n, d, k, shrinkage):
    ce = pytest.importorskip("concept_erasure", reason="the reference package (pip install -e .[reference])")
    X, y = _planted(n, d, k)
    ours = erasers.leace(X, y, shrinkage=shrinkage)
    fitter = ce.LeaceFitter(d, k, dtype=torch.float64, shrinkage=shrinkage, constrain_cov_trace=False)
    theirs = fitter.update(torch.tensor(X), torch.nn.functional.one_hot(torch.tensor(y), k).double()).eraser
    np.testing.assert_allclose(ours.matrix(), theirs.P.numpy(), atol=1e-6)
    np.testing.assert_allclose(ours.bias, theirs.bias.numpy(), atol=1e-6)
    np.testing.assert_allclose(ours.apply_numpy(X), theirs(torch.tensor(X)).numpy(), atol=1e-6)
    assert ours.rank == k - 1


def _train_accuracy(X, y):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=500).fit(X, y).score(X, y)


def test_erasers_remove_the_concept_and_their_controls_do_not():
    X, y = _planted()
    majority = np.bincount(y).max() / len(y)
    assert _train_accuracy(X, y) > 0.9
    leace = erasers.leace(X, y)
    assert _train_accuracy(leace.apply_numpy(X), y) < majority + 0.05  # no linear classifier beats a constant
    fit = erasers.inlp(X, y, np.arange(len(y)) // 3, iterations=20)
    assert fit.eraser is not None and fit.dev_accuracy[-1] <= fit.dev_majority + 0.01
    spectrum = erasers.Spectrum.of(X)
    for e in (leace, fit.eraser):
        control = erasers.matched_random(spectrum, e.rank, erasers.removed_share(e, X), 0).eraser
        assert _train_accuracy(control.apply_numpy(X), y) > 0.8  # a random subspace of that size leaves it
    np.testing.assert_allclose(leace.apply_numpy(X).mean(0), X.mean(0), atol=1e-9)  # the mean is kept
    with pytest.raises(ProbeError, match="two classes"):
        erasers.leace(X, np.zeros(len(X), int))


def _cyclic_lm():
    """A tiny GPT-2 trained on a language where the next word is a fixed function of the current one (w_i is
    followed by w_{i+3 mod 10}, from a random first word): it must read the current word's identity, and a word's
    position says nothing about what follows."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(10)]
    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(words)}},
                                         unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]")
    rng = np.random.default_rng(0)
    texts = [" ".join(words[(int(start) + 3 * j) % 10] for j in range(12)) for start in rng.integers(0, 10, 300)]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=12, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                       bos_token_id=None, eos_token_id=None))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = torch.tensor([tok(t)["input_ids"] for t in texts])
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        batch = ids[torch.randint(len(ids), (16,), generator=g)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1  # it learned the successor function
    return model.eval(), tok, texts[:200]


def test_a_property_the_model_uses_costs_more_loss_than_a_random_erasure():
    model, tok, texts = _cyclic_lm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small sample's notes
        r = causal_probing.run(model, texts, tokenizer=tok, name="cyclic", task=["token_identity", "position"],
                               layer=[2], cache_dir=None, n_boot=200, max_items=1000, cv_folds=2, cs=[1.0],
                               inlp_iterations=5)
    assert r.objective.objective == "next-token" and r.seeds == [0, 1, 2]
    used, unused = ({t.task: t.layers[0] for t in r.tasks}[k] for k in ("token_identity", "position"))
    for m in ("leace", "inlp"):
        u, n = used.method(m), unused.method(m)
        # erasing the word it reads costs more than erasing as much of the states at random, in every seed (the
        # states are mostly the word: a control of the same share of variance costs nearly as much; at layer 1,
        # where they are the word and little else, the two cost the same)
        assert u.excess_loss_ci[0] > 0.02 and u.delta_loss > 1.0
        assert u.verdict == "used" and u.used_in == 3 and len(u.seeds) == 3
        for entry in u.seeds + n.seeds:  # every control removes the eraser's share of variance
            np.testing.assert_allclose(entry.random_removed_variance, entry.removed_variance, rtol=0.011)
    assert used.accuracy > 0.95 and used.leace.accuracy < used.majority + 0.1  # readable, then gone
    assert used.leace.rank == 9  # K - 1 for the 10 words
    assert abs(unused.leace.excess_loss) < 0.05  # position: erasing it costs nearly nothing the random one does not
    assert causal_probing.used_layers(r, "token_identity") == [2]
    (identity, _) = sentences("causal_probing", [r])
    assert "token_identity" in identity and "cyclic: 2." in identity


def test_runs_from_python_on_tiny_models_and_says_when_it_has_no_objective(tmp_path):
    from transformers import BertConfig, BertModel

    from probes.checkpoints.names import get_spec
    from probes.models.hf import hf_tokenizer

    kw = dict(task=["position"], layer=[0, -1], seeds=1, n_boot=20, max_items=200, cv_folds=2, cs=[1.0], random_draws=1,
              inlp_iterations=2, min_per_class=3, cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = causal_probing.run("tiny-slstm", TEXTS, **kw)  # (a causal LM's objective: the planted test above)
        assert r.objective.objective == "masked-LM" and [row.layer for row in r.tasks[0].layers] == [0, 2]
        assert r.tasks[0].layers[0].leace.delta_loss is not None
        assert r.corpus["source"] == "texts given by the caller" and "corpus" not in r.config
        bare = BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64))
        r = causal_probing.run(bare, TEXTS, tokenizer=hf_tokenizer(get_spec("tiny-bert")), name="bare", **kw)
    assert "no language-model head" in (r.objective.skipped or "")
    assert r.tasks[0].layers[0].leace.delta_loss is None and "LEACE" in r.headline()["position"]
    assert r.headline_numbers() == {} and causal_probing.used_layers(r, "position") is None


@pytest.mark.slow  # tests/test_contract.py runs the declaration's tiny command line in the fast tier
def test_command_line_writes_the_result(tmp_path):
    causal_probing.main(["--model", "tiny-bert", "--n-sentences", "40", "--max-items", "200", "--n-boot", "20",
                         "--task", "position", "--task", "token_identity", "--identity-types", "3", "--layer", "1",
                         "--cv-folds", "2", "--cs", "1.0", "--random-draws", "1", "--inlp-iterations", "2",
                         "--min-per-class", "3", "--seeds", "2", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "results" / "causal_probing" / "tiny-bert.json").read_text())
    assert doc["objective"]["objective"] == "masked-LM" and doc["config"]["layer"] == [1]
    assert doc["seeds"] == [0, 1] and len(doc["tasks"][0]["layers"][0]["leace"]["seeds"]) == 2
    assert {t["task"] for t in doc["tasks"]} == {"position", "token_identity"}
    assert (tmp_path / "figures" / "causal-probing.png").is_file()
    with pytest.raises(SystemExit):  # bigram_shift has no causal version: refused by the flag's choices
        causal_probing.main(["--model", "tiny-bert", "--task", "bigram_shift", "--out", str(tmp_path)])


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-slstm", "tiny-gpt2"])
def test_the_objective_does_not_depend_on_how_texts_are_batched(name):
    import dataclasses

    from probes.capture.objective import load_objective

    objective = load_objective(name)
    padded = objective.score(TEXTS[:12], batch_size=5)
    alone = dataclasses.replace(objective, padding_safe=False).score(TEXTS[:12], batch_size=1)
    np.testing.assert_allclose(padded[0], alone[0], rtol=1e-5)
    np.testing.assert_array_equal(padded[1], alone[1])
    assert (padded[1] >= 1).all()


def test_one_training_sentence_or_an_unknown_method_is_one_error_line():
    kw = dict(task=["position"], layer=[1], n_boot=20, max_items=200, cv_folds=2, cs=[1.0], random_draws=1,
              inlp_iterations=2, min_per_class=1, cache_dir=None, seeds=1)
    with pytest.raises(ProbeError, match="2 training sentences"):
        causal_probing.run("tiny-bert", TEXTS[:2], **kw)
    with pytest.raises(ProbeError, match="2 training sentences"):
        causal_probing.run("tiny-bert", TEXTS[:10], test_size=0.95, **kw)
    X, y = _planted(40, 8, 2)
    with pytest.raises(ProbeError, match="one sentence"):
        erasers.inlp(X, y, np.zeros(len(y), np.int64))
    with pytest.raises(ProbeError, match="leace, inlp"):
        causal_probing.used_layers(causal_probing.Result.__new__(causal_probing.Result), "position", method="bogus")


def test_the_few_sentences_warning_names_the_callers_line():
    kw = dict(task=["position"], layer=[1], n_boot=20, max_items=200, cv_folds=2, cs=[1.0], random_draws=1,
              inlp_iterations=2, min_per_class=1, cache_dir=None, seeds=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        causal_probing.run("tiny-bert", TEXTS[:8], **kw)
    few = [w for w in caught if "bootstrap intervals over" in str(w.message)]
    assert few and all(w.filename == __file__ for w in few)


@pytest.mark.integration
def test_command_line_one_training_sentence_is_one_error_line_and_warnings_print_no_source(tmp_path):
    import subprocess
    import sys

    args = [sys.executable, "-m", "analyses.causal_probing", "--model", "tiny-bert", "--task", "position", "--layer",
            "1", "--max-items", "200", "--min-per-class", "1", "--n-boot", "20", "--cv-folds", "2", "--cs", "1.0",
            "--random-draws", "1", "--inlp-iterations", "2", "--no-figures", "--out", str(tmp_path)]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    one = subprocess.run(args + ["--n-sentences", "2"], capture_output=True, text=True, env=env)
    assert one.returncode == 2 and one.stderr.strip().splitlines()[-1].startswith("error: causal probing needs 2")
    assert "Traceback" not in one.stderr
    few = subprocess.run(args + ["--n-sentences", "3"], capture_output=True, text=True, env=env)
    assert few.returncode == 0 and "bootstrap intervals over 1 sentences" in few.stderr
    assert "stats.bootstrap_block(" not in few.stderr and "/analyses/" not in few.stderr
