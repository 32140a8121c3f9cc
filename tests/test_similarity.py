"""analyses.similarity against known answers: CKA/SVCCA/RSA invariances, the debiased estimator's
zero on independent data, streamed sums = explicit Grams, word alignment, files, CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

from analyses import similarity as sim
from analyses.similarity import measures as sm
from analyses.similarity import words as wd
from probes.capture.activations import Activations
from probes.errors import ProbeError


def rotation(d, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q * np.sign(np.diag(r))


@pytest.fixture()
def X():
    return np.random.default_rng(0).normal(size=(300, 20)) @ np.diag(np.linspace(0.2, 3.0, 20))


# ----------------------------------------------------------------------------- CKA


def test_cka_of_a_matrix_with_itself_is_one(X):
    assert sm.linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)
    assert sm.linear_cka(X, X, debiased=False) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("debiased", [True, False])
def test_cka_invariant_to_orthogonal_maps_and_isotropic_scaling_not_to_invertible_maps(X, debiased):
    Y = np.tanh(X @ np.random.default_rng(1).normal(size=(20, 12)))  # related to X, not linearly
    base = sm.linear_cka(X, Y, debiased=debiased)
    assert 0.1 < base < 0.99
    Q, R = rotation(20, 2), rotation(12, 3)  # float32 products: invariant to 1e-6
    assert sm.linear_cka(X @ Q, Y, debiased=debiased) == pytest.approx(base, abs=1e-6)
    assert sm.linear_cka(X, Y @ R * 7.5, debiased=debiased) == pytest.approx(base, abs=1e-6)
    assert sm.linear_cka(0.01 * X @ Q, 3 * Y @ R, debiased=debiased) == pytest.approx(base, abs=1e-6)
    A = np.diag(np.linspace(0.1, 10, 20)) @ rotation(20, 4)  # invertible, not orthogonal x scalar
    assert abs(sm.linear_cka(X @ A, Y, debiased=debiased) - base) > 0.02
    assert abs(sm.linear_cka(X @ A, X, debiased=debiased) - 1.0) > 0.02


def test_cka_invariant_to_translation(X):
    Y = X[:, :7] ** 2
    assert sm.linear_cka(X + 100.0, Y - 5.0) == pytest.approx(sm.linear_cka(X, Y), abs=1e-6)


def test_debiased_cka_of_independent_gaussians_is_near_zero_biased_is_not():
    rng = np.random.default_rng(0)
    deb, bia = [], []
    for _ in range(20):
        A, B = rng.normal(size=(200, 50)), rng.normal(size=(200, 50))
        deb.append(sm.linear_cka(A, B))
        bia.append(sm.linear_cka(A, B, debiased=False))
    assert max(abs(v) for v in deb) < 0.02
    assert abs(np.mean(deb)) < 0.005
    # biased: about d / sqrt(d^2 + ...) ~ 0.2 for n = 200, d = 50 (Kornblith's estimator on pure noise)
    assert 0.17 < min(bia) and max(bia) < 0.23


@pytest.mark.parametrize("debiased", [True, False])
def test_streamed_sums_equal_the_explicit_gram_formula(debiased):
    rng = np.random.default_rng(5)
    A = rng.normal(size=(157, 13)) + rng.normal(size=13)  # non-zero means: the shift must not matter
    B = np.c_[A[:, :4] @ rng.normal(size=(4, 6)), rng.normal(size=(157, 3))]
    want = sm.linear_cka_explicit(A, B, debiased=debiased)
    for batch in (1, 7, 64, 4096):  # many batch boundaries, and one batch
        # the analysis's float32 products within 1e-6; exact float64 sums within 1e-10
        assert sm.linear_cka(A, B, debiased=debiased, batch_rows=batch) == pytest.approx(want, abs=1e-6)
        assert sm.linear_cka(A, B, debiased, batch, dtype=np.float64) == pytest.approx(want, abs=1e-10)


def test_hsic_from_sums_equals_explicit_unbiased_hsic():
    rng = np.random.default_rng(6)
    A, B = rng.normal(size=(40, 5)), rng.normal(size=(40, 4))
    K, L = A @ A.T, B @ B.T
    n = 40
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    want = (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * one @ Kt @ Lt @ one) / (n * (n - 3))  # Song et al. (2012), Theorem 2
    la, lb = sm.Layer.of(A, 8), sm.Layer.of(B, 8)
    assert sm.hsic(sm.pair_sums(la, lb, 8)) == pytest.approx(want, rel=1e-10)


def test_streamed_cka_memory_is_bounded_by_the_batch_not_by_n():
    import tracemalloc

    n, d, batch = 40_000, 32, 500
    A = np.random.default_rng(8).normal(size=(n, d)).astype(np.float32)
    B = A[:, ::-1] ** 2
    tracemalloc.start()
    sm.linear_cka(A, B, batch_rows=batch)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # a few float64 batches (batch x d) and d x d sums; a float64 copy of A alone would be 10 MB, its Gram 12.8 GB
    assert peak < 1_000_000


def test_constant_and_zero_columns_give_defined_values():
    rng = np.random.default_rng(7)
    A = rng.normal(size=(100, 6))
    with_const = np.c_[A, np.full(100, 3.7), np.zeros(100)]
    assert sm.linear_cka(with_const, A) == pytest.approx(1.0, abs=1e-12)  # dropped, same value
    assert sm.svcca(with_const, A) == pytest.approx(1.0, abs=1e-9)
    Z, C = np.zeros((100, 5)), np.full((100, 5), 2.0)
    for Y in (Z, C):
        assert sm.linear_cka(A, Y) == 0.0 and sm.linear_cka(Y, A) == 0.0 and sm.linear_cka(Y, Y) == 0.0
        assert sm.svcca(A, Y) == 0.0
        assert sm.rsa(A, Y) == 0.0
    out = sm.similarity_matrices([A, Z, with_const], None)
    for m in sm.MEASURES:
        assert np.isfinite(out[m]).all()
        assert out["undefined"][m][1].all() and out["undefined"][m][:, 1].all()  # Z: undefined, with itself too
        assert not out["undefined"][m][np.ix_([0, 2], [0, 2])].any()
    assert out["constant"][0] == [[], [0, 1, 2, 3, 4], [6, 7]]


def test_bad_inputs_are_clear_errors(X):
    with pytest.raises(ProbeError, match="different numbers of units"):
        sm.linear_cka(X, X[:-1])
    with pytest.raises(ProbeError, match="NaN"):
        sm.linear_cka(np.where(X > 2.5, np.nan, X), X)
    with pytest.raises(ProbeError, match="n >= 4"):
        sm.linear_cka(X[:3], X[:3])
    with pytest.raises(ProbeError, match="unknown measure"):
        sm.similarity_matrices([X], [X], ["cca"])


# ----------------------------------------------------------------------------- SVCCA and RSA


def test_svcca_of_a_rotated_copy_is_one(X):
    assert sm.svcca(X, X @ rotation(20, 8)) == pytest.approx(1.0, abs=1e-9)
    # with every direction kept, CCA is invariant to any invertible map; the 99% truncation is not
    M = np.random.default_rng(9).normal(size=(20, 20))
    assert sm.svcca(X, X @ M, variance=1.0) == pytest.approx(1.0, abs=1e-9)


def test_svcca_matches_svd_then_qr_cca_reference():
    rng = np.random.default_rng(10)
    A = rng.normal(size=(400, 15)) @ np.diag(np.geomspace(5, 0.01, 15))
    B = np.c_[A[:, :5] + 0.5 * rng.normal(size=(400, 5)), rng.normal(size=(400, 8))]

    def reduce(M):
        Mc = M - M.mean(0)
        U, s, _ = np.linalg.svd(Mc, full_matrices=False)
        k = int(np.searchsorted(np.cumsum(s**2) / (s**2).sum(), 0.99)) + 1
        return U[:, :k] * s[:k]

    qa, _ = np.linalg.qr(reduce(A))
    qb, _ = np.linalg.qr(reduce(B))
    rho = np.linalg.svd(qa.T @ qb, compute_uv=False)
    assert sm.svcca(A, B) == pytest.approx(rho.mean(), abs=1e-8)
    assert sm.similarity_matrices([A], [B], ["svcca"])["svcca_dims"] == ([reduce(A).shape[1]], [reduce(B).shape[1]])


def test_svcca_of_independent_noise_is_low_and_of_shared_subspace_high():
    rng = np.random.default_rng(11)
    A, B = rng.normal(size=(2000, 10)), rng.normal(size=(2000, 10))
    assert sm.svcca(A, B) < 0.1
    assert sm.svcca(A, np.c_[A[:, :5], rng.normal(size=(2000, 5))]) == pytest.approx(0.5, abs=0.05)


def test_svcca_chance_level_matches_independent_gaussians():
    rng = np.random.default_rng(13)
    n, kx, ky = 300, 40, 25
    vals = [sm.svcca(rng.normal(size=(n, kx)), rng.normal(size=(n, ky)), variance=1.0) for _ in range(10)]
    sq = [np.mean(np.linalg.svd(np.linalg.qr(A - A.mean(0))[0].T @ np.linalg.qr(B - B.mean(0))[0],
                                compute_uv=False) ** 2)
          for A, B in ((rng.normal(size=(n, kx)), rng.normal(size=(n, ky))) for _ in range(10))]
    chance = sim.svcca_chance([kx], [ky], n)[0, 0]
    assert np.mean(sq) == pytest.approx(chance**2, rel=0.05)  # E mean rho^2 = max(k) / (n - 1)
    assert 0.8 * chance < np.mean(vals) < chance
    assert sim.svcca_chance([0, 3], [4], 10).tolist() == [[0.0], [np.sqrt(4 / 9)]]


def test_rsa_of_identical_inputs_is_one_and_matches_scipy(X):
    assert sm.rsa(X, X) == pytest.approx(1.0, abs=1e-12)
    assert sm.rsa(X, 4 * X @ rotation(20, 12)) == pytest.approx(1.0, abs=1e-9)  # cosine RDM unchanged
    Y = np.tanh(X[:, :5]) + 0.3
    for dist in sm.DISTANCES:
        assert sm.rdm(X, dist) == pytest.approx(pdist(X, dist), abs=1e-12)
        assert sm.rsa(X, Y, dist) == pytest.approx(spearmanr(pdist(X, dist), pdist(Y, dist))[0], abs=1e-12)


def test_rsa_leaves_zero_vectors_out_and_counts_them():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    np.testing.assert_array_equal(np.isnan(sm.rdm(X)), [True, True, False])  # undefined, not distance 1
    rng = np.random.default_rng(9)
    A, B = rng.normal(size=(60, 7)), rng.normal(size=(60, 5))
    B[:, 0] += A[:, 0]  # some shared structure
    A0, B0 = A.copy(), B.copy()
    A0[[3, 17]] = 0.0  # planted zero vectors: unit 3 and 17 in A, unit 40 in B
    B0[40] = 0.0
    keep = np.setdiff1d(np.arange(60), [3, 17, 40])
    for dist in sm.DISTANCES:
        if dist == "correlation":
            B0[40] = 2.5  # a constant row has no direction for the correlation distance
        out = sm.similarity_matrices([A0, A], [B0, B], ["rsa"], distance=dist)
        assert out["rsa"][0, 0] == pytest.approx(sm.rsa(A[keep], B[keep], dist), abs=1e-12)
        assert out["rsa"][1, 0] == pytest.approx(sm.rsa(np.delete(A, 40, 0), np.delete(B, 40, 0), dist), abs=1e-12)
        assert out["rsa"][1, 1] == sm.rsa(A, B, dist)  # no zero vector: every unit, as before
        assert out["rsa_zero"] == ([2, 0], [1, 0])
    assert sm.rsa(A, np.zeros((60, 5))) == 0.0  # no unit left: no ranking (RSA 0, as for an RDM of equal entries)


def test_self_matrix_is_symmetric_with_unit_diagonal(X):
    layers = [X, X[:, :10] ** 2, np.tanh(X)]
    out = sm.similarity_matrices(layers, None)
    full = sm.similarity_matrices(layers, [L.copy() for L in layers])
    for m in sm.MEASURES:
        np.testing.assert_allclose(out[m], out[m].T)
        np.testing.assert_allclose(np.diag(out[m]), 1.0, atol=1e-9)
        np.testing.assert_allclose(out[m], full[m], atol=1e-6)  # float32 products: different roundings


# ----------------------------------------------------------------------------- words


def test_segment_words_in_three_tokenizer_schemes():
    sp = [1, 0, 0, 0, 0, 0, 0, 1]
    wp = wd.segment_words(["[CLS]", "her", "fond", "##ly", ",", "café", "!", "[SEP]"], sp, "wordpiece")
    assert [w for w, _ in wp] == ["her", "fondly", ",", "cafe", "!"]
    assert [i for _, i in wp] == [[1], [2, 3], [4], [5], [6]]
    spm = wd.segment_words(["<s>", "▁Her", "▁fond", "ly", ",", "▁café", "!", "</s>"], sp, "sentencepiece")
    assert [w for w, _ in spm] == ["her", "fondly", ",", "cafe", "!"]
    g = wd.segment_words(["Her", "Ġfond", "ly", ",", "ĠcafÃ©", "!"], [0] * 6, "bytebpe")  # GPT-2 byte alphabet
    assert [w for w, _ in g] == ["her", "fondly", ",", "cafe", "!"]
    assert [i for _, i in g] == [[0], [1, 2], [3], [4], [5]]


def test_tokenizer_scheme_from_markers():
    assert wd.tokenizer_scheme([["a", "##b"], ["c"]]) == "wordpiece"
    assert wd.tokenizer_scheme([["▁a", "b"], ["▁c"]]) == "sentencepiece"
    assert wd.tokenizer_scheme([["a", "Ġb"]]) == "bytebpe"
    assert wd.tokenizer_scheme([["a", "b"]]) == "wordpiece"


def fake_acts(name, tokens, special, d, seed, L=2, texts=None):
    rng = np.random.default_rng(seed)
    lengths = [len(t) for t in tokens]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    N = int(offsets[-1])
    hidden = rng.normal(size=(L + 1, N, d)).astype(np.float32)
    meta = {"model": {"name": name, "sentence_vector": "mean"}, "key": name, "n_texts": len(tokens),
            "n_tokens": N, "truncated_texts": []}
    return Activations(meta=meta, texts=texts or [f"t{i}" for i in range(len(tokens))], tokens=tokens,
                       offsets=offsets, token_ids=np.zeros(N, np.int64),
                       special=np.array([s for ss in special for s in ss], bool), hidden=hidden,
                       sentence=rng.normal(size=(L + 1, len(tokens), d)).astype(np.float32))


def test_word_alignment_averages_subwords_and_drops_disagreeing_texts():
    ta = [["[CLS]", "fond", "##ly", "said", "[SEP]"], ["[CLS]", "a", "b", "[SEP]"], ["[CLS]", "x", "##y", "[SEP]"]]
    tb = [["▁fond", "ly", "▁said"], ["▁a", "▁c"], ["▁x", "y"]]  # text 1 disagrees ("b" vs "c")
    a = fake_acts("a", ta, [[1, 0, 0, 0, 1], [1, 0, 0, 1], [1, 0, 0, 1]], 4, 0)
    b = fake_acts("b", tb, [[0, 0, 0], [0, 0], [0, 0]], 3, 1)
    words = wd.align_words(a, b)
    assert (words.n_texts_kept, words.n_texts_dropped, words.schemes) == (2, 1, ("wordpiece", "sentencepiece"))
    assert words.tokens_a.tolist() == [1, 2, 3, 10, 11] and words.starts_a.tolist() == [0, 2, 3]
    assert words.tokens_b.tolist() == [0, 1, 2, 5, 6] and words.starts_b.tolist() == [0, 2, 3]
    Ha = wd.word_states(a.hidden, words.tokens_a, words.starts_a)  # (L+1, 3, 4)
    np.testing.assert_allclose(Ha[1, 0], a.hidden[1, 1:3].mean(0), rtol=1e-6)
    np.testing.assert_allclose(Ha[2, 2], a.hidden[2, 10:12].mean(0), rtol=1e-6)
    sub = words.select(np.array([0, 2]))
    assert sub.tokens_a.tolist() == [1, 2, 10, 11] and sub.starts_a.tolist() == [0, 2]


def test_compute_on_planted_layers_recovers_the_copy():
    """B's layer 1 is a rotated, scaled copy of A's layer 2: every measure puts its maximum there."""
    n = 400
    a = fake_acts("a", [["[CLS]", "w", "[SEP]"]] * n, [[1, 0, 1]] * n, 8, 0)
    b = fake_acts("b", [["w"]] * n, [[0]] * n, 8, 1, L=3)
    b.sentence[1] = 5 * a.sentence[2] @ rotation(8, 4)
    b.sentence[0] = 1.0  # a constant layer: its similarities are undefined (null), itself included
    res = sim.compute(sim.Config(model=["a", "b"], n_sentences=n, rsa_units=200), acts_a=a, acts_b=b)
    for m in sim.MEASURES:
        ab = res.matrix(m, "ab")
        assert ab.shape == (3, 4)
        assert np.unravel_index(np.nanargmax(ab), ab.shape) == (2, 1) and ab[2, 1] == pytest.approx(1.0, abs=1e-6)
        assert np.isnan(ab[:, 0]).all() and np.isnan(res.matrix(m, "bb")[0]).all()
        assert np.isfinite(ab[:, 1:]).all() and np.isfinite(res.matrix(m, "bb")[1:, 1:]).all()
        assert res.matrices.of(m).bb[0][0] is None  # null in the result file
        assert res.matrix(m, "aa").shape == (3, 3) and res.matrix(m, "bb").shape == (4, 4)
    assert res.constant_columns.b is not None and res.constant_columns.b[0] == 8
    assert res.n_units == n and res.n_rsa_units == 200
    assert sim.Result.from_json(json.loads(json.dumps(res.to_json()))) == res


def test_one_model_alone_gives_its_self_similarity():
    a = fake_acts("a", [["w"]] * 50, [[0]] * 50, 6, 0, L=3)
    res = sim.compute(sim.Config(n_sentences=50), acts_a=a, acts_b=a)
    assert res.name == "a__a__sentence"
    for m in sim.MEASURES:
        np.testing.assert_array_equal(res.matrix(m, "ab"), res.matrix(m, "aa"))
        np.testing.assert_allclose(np.diag(res.matrix(m, "aa")), 1.0, atol=1e-9)


def test_float16_storage_is_read_layer_by_layer_with_the_same_numbers_and_zero_units_counted():
    import dataclasses

    from probes.precision import Float32View

    a = fake_acts("a", [["w"]] * 80, [[0]] * 80, 6, 0, L=2)
    b = fake_acts("b", [["w"]] * 80, [[0]] * 80, 5, 1, L=1)
    b.sentence[1, [4, 9]] = 0.0  # two zero sentence vectors in B's last layer
    stored = a.sentence.astype(np.float16)
    as_float32 = sim.compute(sim.Config(model=["a", "b"], n_sentences=80),
                             acts_a=dataclasses.replace(a, sentence=stored.astype(np.float32)), acts_b=b)
    viewed = dataclasses.replace(a, sentence=Float32View(stored))  # as the cache hands float16 entries out
    assert all(isinstance(x, Float32View) for x in sim.sentence_layers(viewed))
    res = sim.compute(sim.Config(model=["a", "b"], n_sentences=80), acts_a=viewed, acts_b=b)
    assert res.matrices == as_float32.matrices
    assert res.rsa_zero_vectors == sim.Sides(a=[0, 0, 0], b=[0, 2])
    assert res.to_json()["rsa_zero_vectors"] == {"a": [0, 0, 0], "b": [0, 2]}  # the saved keys
    assert sim.Result.from_json(json.loads(json.dumps(res.to_json()))) == res


def test_texts_must_match():
    a = fake_acts("a", [["w"]] * 10, [[0]] * 10, 4, 0)
    b = fake_acts("b", [["w"]] * 10, [[0]] * 10, 4, 1, texts=[f"other{i}" for i in range(10)])
    with pytest.raises(ProbeError, match="same texts"):
        sim.compute(sim.Config(n_sentences=10), acts_a=a, acts_b=b)


def test_plot_draws_the_matrices():
    import matplotlib

    matplotlib.use("Agg")
    n = 60
    a = fake_acts("a", [["w"]] * n, [[0]] * n, 6, 0)
    b = fake_acts("b", [["w"]] * n, [[0]] * n, 5, 1, L=4)
    res = sim.compute(sim.Config(n_sentences=n, measure=["cka", "rsa"]), acts_a=a, acts_b=b)
    fig = sim.plot([sim.Result.from_json(res.to_json())])
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 6  # 2 measures x (A x A, A x B, B x B)
    np.testing.assert_allclose(heat[1].images[0].get_array(), res.matrix("cka", "ab"))
    np.testing.assert_allclose(heat[5].images[0].get_array(), res.matrix("rsa", "bb"))
    assert [t.get_text() for t in heat[1].get_xticklabels()] == ["0", "0.25", "0.5", "0.75", "1"]
    over = sim.plot_overview([res])
    drawn = [ax for ax in over.axes if ax.images]  # A x A, A x B (top row), B x B (below A x B)
    assert len(drawn) == 3
    for ax, blk in zip(drawn, ("aa", "ab", "bb")):
        np.testing.assert_allclose(ax.images[0].get_array(), res.matrix("cka", blk))


# ----------------------------------------------------------------------------- CLI (tiny random models)


@pytest.fixture()
def registry(tiny_slstm_registry):
    """tiny-bert (2 layers) and a 3-layer tiny-slstm: models of different depths."""
    return tiny_slstm_registry(num_layers=3, max_positions=512)


@pytest.mark.slow
def test_cli_end_to_end_tiny_bert_vs_tiny_slstm_byte_identical(tmp_path, registry, drawn):
    args = ["--model", "tiny-bert", "--model", "tiny-slstm", "--unit", "token", "--n-sentences", "40",
            "--rsa-units", "100", "--batch-rows", "64"]
    sim.main([*args, "--out", str(tmp_path / "out")])
    path = tmp_path / "out/results/similarity/tiny-bert__tiny-slstm__token.json"
    doc = json.loads(path.read_text())
    res = sim.Result.from_json(doc)
    assert (res.n_layers_a, res.n_layers_b) == (2, 3)  # different depths
    assert res.matrix("cka").shape == (3, 4) and res.matrix("svcca", "bb").shape == (4, 4)
    assert res.alignment.n_texts_dropped == 0 and res.alignment.schemes == ["wordpiece", "wordpiece"]
    assert res.config["n_sentences"] == 40 and "out" not in res.config
    # the saved keys are the Result's fields in order (write_result adds analysis, model_name, provenance);
    # read back and written again, the file is the same
    assert list(doc) == ["analysis", *res.to_json(), "provenance"]
    from analyses.common import write_result

    rewritten, _ = write_result(tmp_path / "rewritten", "similarity", res.name, res, sim.table_rows(res))
    assert rewritten.read_bytes() == path.read_bytes()
    with pytest.raises(KeyError, match="matrices"):
        sim.Result.from_json({k: v for k, v in doc.items() if k != "matrices"})
    # the saved figure draws the saved matrices: one row per measure, A x A, A x B, B x B
    stem = "similarity-tiny-bert__tiny-slstm__token"
    assert (tmp_path / f"out/figures/{stem}.png").is_file()
    heat = [ax for ax in drawn[stem].axes if ax.images]
    assert len(heat) == 3 * len(res.measures)
    for row, measure in enumerate(res.measures):
        for ax, blk in zip(heat[3 * row:3 * row + 3], ("aa", "ab", "bb")):
            np.testing.assert_allclose(ax.images[0].get_array(), res.matrix(measure, blk))
    from analyses.summary.figures import redraw

    redrawn = redraw(str(tmp_path / "out"))  # from the saved results alone
    names = {p.name for p in redrawn}
    assert {"similarity-tiny-bert__tiny-slstm__token.png", "similarity-tiny-bert__token.png"} <= names
    sim.main([*args, "--no-figures", "--out", str(tmp_path / "again")])  # cached activations differ in place only
    for ext in ("json", "csv"):
        assert (tmp_path / f"again/results/similarity/tiny-bert__tiny-slstm__token.{ext}").read_bytes() == \
            path.with_suffix(f".{ext}").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--model", "tiny-bert", "--measure", "cca"], "argument --measure: invalid choice: 'cca'"),
    (["--model", "tiny-bert", "--unit", "char"], "argument --unit: invalid choice: 'char'"),
    (["--model", "tiny-bert", "--n-sentences", "2"], "--n-sentences must be >= 4, got 2"),
    (["--model", "tiny-bert", "--svcca-variance", "1.5"], "--svcca-variance must be <= 1.0"),
    (["--model", "no-such-model"], "no-such-model"),
])
def test_bad_inputs_exit_2_with_one_line(tmp_path, registry, capsys, args, message):
    from analyses.common import run_main

    with pytest.raises(SystemExit) as exit_:
        run_main(sim.main, [*args, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


@pytest.mark.integration
def test_bad_input_exit_status_from_the_command_line(tmp_path, registry):
    proc = subprocess.run([sys.executable, "-m", "analyses.similarity", "--model", "tiny-bert", "--unit", "char",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == \
        ["error: argument --unit: invalid choice: 'char' (choose from 'sentence', 'token') (see --help)"]


def test_stacked_float32_sums_equal_the_float64_closed_form():
    """All layer pairs from one pass over the stacked centred layers (float32 products, float64 accumulation)
    equal the explicit float64 Gram-matrix CKA to 1e-6, with and without a second model, also when the
    cross-products are bounded (several passes)."""
    rng = np.random.default_rng(5)

    def model(n_layers, d, shift):
        h, out = rng.standard_normal((600, d)), []
        for _ in range(n_layers):
            h = np.tanh(h @ rng.standard_normal((d, d)) / np.sqrt(d) + 0.3 * rng.standard_normal((600, d)))
            out.append((h * rng.uniform(0.2, 3, d) + shift).astype(np.float32))
        return out

    xs, ys = model(3, 24, 50.0), model(2, 16, -7.0)  # far-off means: the centring matters
    for a, b in ((xs, None), (xs, ys)):
        want = np.array([[sm.linear_cka_explicit(x, y) for y in (b or a)] for x in a])
        assert np.abs(sm.similarity_matrices(a, b, ["cka"])["cka"] - want).max() < 1e-6
        for debiased in (False,):
            biased = np.array([[sm.linear_cka_explicit(x, y, debiased=False) for y in (b or a)] for x in a])
            got = sm.similarity_matrices(a, b, ["cka"], debiased=debiased)["cka"]
            assert np.abs(got - biased).max() < 1e-6
    small = sm.MAX_CROSS
    try:
        sm.MAX_CROSS = 24 * 3 * 20  # ys one layer a pass
        grouped = sm.similarity_matrices(xs, ys, ["cka", "svcca"])
    finally:
        sm.MAX_CROSS = small
    whole = sm.similarity_matrices(xs, ys, ["cka", "svcca"])
    np.testing.assert_allclose(grouped["cka"], whole["cka"], atol=1e-6)
    np.testing.assert_allclose(grouped["svcca"], whole["svcca"], atol=1e-6)


def test_a_repeated_model_is_computed_once_as_in_every_analysis():
    cfg = sim.Config(model=["tiny-bert", "tiny-slstm", "tiny-bert", "tiny-slstm"])
    units = sim.ANALYSIS.inputs.units
    assert units(cfg) == [("tiny-bert", "tiny-slstm")]
    assert units(sim.Config(model=["tiny-bert", "tiny-bert"])) == [("tiny-bert", "tiny-bert")]


def test_an_undefined_similarity_is_never_drawn_or_reported_as_a_number(tmp_path):
    """A constant layer's cells (its self-similarity diagonal too) read back from the drawn figure: hatched, grey,
    "n/a" written in them, never "0.00"; the report's similarity table says n/a as well."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import Rectangle

    from analyses.summary import findings

    n = 60
    a = fake_acts("a", [["[CLS]", "w", "[SEP]"]] * n, [[1, 0, 1]] * n, 8, 0)
    b = fake_acts("b", [["w"]] * n, [[0]] * n, 8, 1, L=3)
    b.sentence[0] = 1.0
    res = sim.compute(sim.Config(model=["a", "b"], n_sentences=n, rsa_units=40), acts_a=a, acts_b=b)
    fig = sim.plot([res])
    for ax, block in zip(fig.axes, sim.BLOCKS):  # per measure: A x A | A x B | B x B
        M = res.matrix("cka", block)
        cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
        hatched = {(round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in ax.patches
                   if isinstance(p, Rectangle) and p.get_hatch()}
        image = ax.images[0].get_array()
        for (i, j), v in np.ndenumerate(M):
            if np.isnan(v):
                assert cells[i, j] == "n/a" and (i, j) in hatched and np.ma.is_masked(image[i, j]), (block, i, j)
            else:
                assert cells[i, j] == f"{v:.2f}" and (i, j) not in hatched
    assert any(np.isnan(res.matrix("cka", "bb")[0, 0]) for _ in [0])  # B's self-similarity diagonal is undefined
    one = res.plot(block="bb")
    assert [t.get_text() for t in one.texts if t.get_position() == (0, 0)] == ["n/a"]
    b.sentence[-1] = 1.0  # the last layers constant too: the report's "last x last" is n/a
    res_last = sim.compute(sim.Config(model=["a", "b"], n_sentences=n, rsa_units=40), acts_a=a, acts_b=b)
    row = findings.TABLES["similarity"]([res_last])["rows"][0]
    assert row[3] == "n/a" and "0.000" not in row[3]
    assert "n/a (undefined)" in res_last.headline()["CKA last x last layer"]
