"""Intrinsic dimension (analyses.intrinsic_dimension): TwoNN and the Levina-Bickel MLE equal to
scikit-dimension on the same points, planted manifolds (a k-dimensional linear subspace, a curved surface, a
sphere) give ~k, the blocked neighbour search equals brute force, duplicates are removed and counted, the
neighbours within a random half of the sentences equal a search in that half, weighted estimators equal
recomputing on the resampled multiset, and the CLI on a tiny model (coverage: tests/test_id_coverage.py)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from analyses import intrinsic_dimension as idim
from probes.config import run_main


def rotated(points, n, seed=0):
    """``points`` (N, k) embedded in R^n by a random orthonormal map."""
    Q = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, points.shape[1])))[0]
    return points @ Q.T


def estimates(X, k=20, combine="mackay-ghahramani", discard=0.1):
    dist, _ = idim.nearest_neighbours(X, max(k, 2))
    return idim.twonn(idim.twonn_ratios(dist), discard), idim.mle(idim.mle_inverse(dist, k), combine)


RNG = np.random.default_rng(0)
CLOUDS = {
    "subspace5_in_40": rotated(RNG.normal(size=(800, 5)), 40),  # > 25 features: scikit-dimension's chunked path
    "gaussian3": RNG.normal(size=(500, 3)),  # <= 25 features: its tree path
    "cube30": RNG.uniform(size=(600, 30)),
}


@pytest.mark.parametrize("name", CLOUDS)
def test_equals_scikit_dimension(name):
    skdim = pytest.importorskip("skdim", reason="scikit-dimension (test extra 'reference') is not installed")
    X = CLOUDS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_twonn = skdim.id.TwoNN().fit(X).dimension_
        ref_mle = skdim.id.MLE().fit(X).dimension_  # comb="mle": the MacKay-Ghahramani combination
        ref_mean = skdim.id.MLE().fit(X, comb="mean").dimension_
        ref_k10 = skdim.id.MLE().fit(X, n_neighbors=10).dimension_
        ref_discard = skdim.id.TwoNN(discard_fraction=0.25).fit(X).dimension_
    twonn, mle = estimates(X)
    assert abs(twonn - ref_twonn) < 1e-6 and abs(mle - ref_mle) < 1e-6
    assert abs(estimates(X, combine="mean")[1] - ref_mean) < 1e-6
    assert abs(estimates(X, k=10)[1] - ref_k10) < 1e-6
    assert abs(estimates(X, discard=0.25)[0] - ref_discard) < 1e-6


def test_equals_the_papers_formulas():
    """Facco et al. (2017): slope of -log(1 - i/N) on log mu_(i) over the kept ratios; Levina and Bickel (2005):
    m_k(x) = [(1/(k-1)) sum_{j<k} log(T_k / T_j)]^-1; MacKay and Ghahramani: 1 / mean of the inverses."""
    X = CLOUDS["cube30"]
    N = len(X)
    D = np.linalg.norm(X[:, None] - X[None], axis=2) + np.diag(np.full(N, np.inf))  # brute force, small N
    T = np.sort(D, axis=1)
    mu = np.sort(T[:, 1] / T[:, 0])[:int(N * 0.9)]
    y = -np.log(1 - np.arange(1, len(mu) + 1) / N)
    twonn = np.sum(np.log(mu) * y) / np.sum(np.log(mu) ** 2)
    k = 20
    m = 1 / (np.log(T[:, k - 1:k] / T[:, :k - 1]).sum(1) / (k - 1))
    twonn_mine, mle_mine = estimates(X, k)
    assert abs(twonn_mine - twonn) < 1e-9 and abs(mle_mine - 1 / np.mean(1 / m)) < 1e-9
    assert abs(estimates(X, k, "mean")[1] - np.mean(m)) < 1e-9


def test_planted_manifolds_give_their_dimension():
    rng = np.random.default_rng(3)
    flat = rotated(rng.normal(size=(3000, 6)), 50)  # a 6-dimensional linear subspace of R^50
    t = rng.uniform(1.5 * np.pi, 4.5 * np.pi, 3000)
    roll = rotated(np.c_[t * np.cos(t), 20 * rng.uniform(size=3000), t * np.sin(t)], 30, 1)  # curved, 2-dim
    sphere = rng.normal(size=(3000, 4))
    sphere = rotated(sphere / np.linalg.norm(sphere, axis=1, keepdims=True), 25, 2)  # S^3: curved, 3-dim
    for X, d in ((flat, 6), (roll, 2), (sphere, 3)):
        twonn, mle = estimates(X)
        assert abs(twonn - d) < 0.12 * d + 0.2 and abs(mle - d) < 0.12 * d + 0.2, (d, twonn, mle)


def test_blocked_neighbour_search_equals_brute_force():
    X = np.random.default_rng(4).normal(size=(97, 6))
    dist, idx = idim.nearest_neighbours(X, 5, block_elements=300)  # blocks of 3 rows, never 97 x 97
    D = np.linalg.norm(X[:, None] - X[None], axis=2) + np.diag(np.full(len(X), np.inf))
    np.testing.assert_array_equal(idx, np.argsort(D, axis=1)[:, :5])
    np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :5], rtol=1e-12)


def test_duplicates_are_removed_and_counted():
    X = np.random.default_rng(5).normal(size=(200, 4))
    twice = np.concatenate([X, X[:50]])  # 50 points appear twice (distance 0: both estimators undefined)
    cfg = idim.Config(resamples=20)
    est = idim.estimate(twice, np.arange(250), cfg, 0.95)
    ref = idim.estimate(X, np.arange(200), cfg, 0.95)
    assert est.duplicates_removed == 50 and est.n_points == 200
    assert est.twonn == ref.twonn and est.mle == ref.mle
    assert est.twonn_ci == ref.twonn_ci and est.mle_ci == ref.mle_ci


def test_neighbours_within_a_half_equal_brute_force():
    """The k nearest neighbours within a random half of the sentences, read from the whole sample's longer
    neighbour lists, are those a search within the half finds; a list too short for some points falls back to
    searching the half again."""
    rng = np.random.default_rng(7)
    X, units = rng.normal(size=(300, 6)), np.repeat(np.arange(100), 3)  # 100 sentences of 3 tokens
    half = idim.random_halves(100, 3, seed=0)
    assert half.shape == (3, 100) and (half.sum(1) == 50).all() and not (half[0] == half[1]).all()
    assert np.array_equal(half, idim.random_halves(100, 3, seed=0))
    group = half[0][units]
    D = np.linalg.norm(X[:, None] - X[None], axis=2) + np.diag(np.full(300, np.inf))
    D[group[:, None] != group[None, :]] = np.inf  # brute force within each half
    for listed in (idim.neighbour_list_length(20), 21):  # 90 neighbours; 21: most points need the fallback
        dist, idx = idim.nearest_neighbours(X, listed)
        np.testing.assert_allclose(idim.nearest_in_group(X, dist, idx, group, 20), np.sort(D, 1)[:, :20], rtol=1e-12)


def test_replicates_equal_recomputing_on_the_resampled_multiset():
    rng = np.random.default_rng(6)
    dist, _ = idim.nearest_neighbours(rng.normal(size=(120, 3)), 20)
    mu, inv = idim.twonn_ratios(dist), idim.mle_inverse(dist, 20)
    W = rng.multinomial(120, np.full(120, 1 / 120), size=5).astype(float)
    twonn, mle = idim.twonn(mu, 0.1, W), idim.mle(inv, "mackay-ghahramani", W)
    for b in range(len(W)):
        copies = W[b].astype(int)
        m = np.sort(np.repeat(mu, copies))[:int(120 * 0.9)]
        y = -np.log(1 - np.arange(1, len(m) + 1) / 120)
        assert abs(twonn[b] - np.sum(np.log(m) * y) / np.sum(np.log(m) ** 2)) < 1e-9
        assert abs(mle[b] - 1 / np.mean(np.repeat(inv, copies))) < 1e-9


def test_cli_on_a_tiny_model_writes_every_layer_with_intervals(tmp_path):
    run_main(idim.main, ["--model", "tiny-bert", "--n-sentences", "40", "--n-tokens", "120", "--mle-k", "8",
                         "--resamples", "50", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "results" / "intrinsic_dimension" / "tiny-bert.json").read_text())
    assert [r["layer"] for r in doc["layers"]] == [0, 1, 2]
    first = doc["layers"][0]["sentence"]  # [CLS] at the embedding layer: one vector for every sentence
    assert first["twonn"] is None and first["n_points"] == 1 and first["duplicates_removed"] == 39
    assert "too few" in first["note"]
    for row in doc["layers"]:
        for level in ("token", "sentence")[:1 if row["layer"] == 0 else 2]:
            s = row[level]
            for est in ("twonn", "mle"):
                lo, hi = s[f"{est}_ci"]
                assert 0 < s[est] < s["dimension"] and 0 < lo < s[est] < hi
                assert hi - s[est] == pytest.approx(s[est] - lo)  # estimate +- z SE
    assert doc["bootstrap"]["method"] == "random halves" and doc["bootstrap"]["resamples"] == 50
    assert doc["config"]["mle_k"] == 8 and (tmp_path / "figures" / "intrinsic-dimension.png").exists()


def test_too_few_sentences_for_k_is_one_error_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(idim.main, ["--model", "tiny-bert", "--n-sentences", "5", "--mle-k", "8", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--mle-k" in err and err.count("\n") == 1
