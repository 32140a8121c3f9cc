"""Cheaper forms of two estimators, with the same numbers: IsoScore's unbiased estimate of a sample in its
O(N n^2) closed forms (analyses.isoscore.isoscore_estimate) against the Gram-block route the bootstrap uses, and
intrinsic dimension's random halves taken in batches (analyses.intrinsic_dimension.halves_se) against the
split-by-split computation they replace, kept here as the reference."""

from __future__ import annotations

import numpy as np
import pytest

from analyses import intrinsic_dimension as idim
from analyses import isoscore as iso


@pytest.mark.parametrize("n_units, n_points, dim", [(7, 16, 4), (8, 8, 5), (40, 120, 12), (300, 300, 24),
                                                    (60, 400, 3), (5, 40, 30)])
def test_the_closed_forms_equal_the_gram_route(n_units, n_points, dim):
    rng = np.random.default_rng(n_units + dim)
    unit = rng.permutation(np.arange(n_points) % n_units)  # every unit holds points, in no order
    X = rng.normal(size=(n_points, dim)) * rng.uniform(0.1, 3, dim) + rng.normal(size=dim) * 4
    want = iso.isoscore_estimates(X, unit, np.ones((1, n_units)))[0]
    assert iso.isoscore_estimate(X, unit) == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_the_closed_forms_keep_the_estimators_limits(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    assert np.isnan(iso.isoscore_estimate(X, np.arange(30) % 3))  # 3 sentences: no 4-tuple of different ones
    assert np.isnan(iso.isoscore_estimate(X[:, :1], np.arange(30) % 5))  # one dimension
    monkeypatch.setattr(iso, "BLOCK_ELEMENTS", 4)  # the pairs within a unit a few at a time
    unit = np.arange(30) % 6
    assert iso.isoscore_estimate(X, unit) == pytest.approx(iso.isoscore_estimates(X, unit, np.ones((1, 6)))[0],
                                                           rel=1e-10)


def halves_se_one_split_at_a_time(X, dist, idx, units, cfg):
    """The random halves' standard errors as computed before: one split at a time (the reference)."""
    present, unit = np.unique(units, return_inverse=True)
    kk = max(cfg.mle_k, 2)
    sq = []
    for half in idim.random_halves(len(present), cfg.resamples, cfg.seed):
        group = half[unit]
        near = idim.nearest_in_group(X, dist, idx, group, kk)
        est = np.array([[idim.twonn(idim.twonn_ratios(near[g]), cfg.twonn_discard),
                         idim.mle(idim.mle_inverse(near[g], cfg.mle_k), cfg.mle_combine)] for g in (group, ~group)])
        sq.append((est[0] - est[1]) ** 2 / 4)
    sq_ = np.array(sq)
    ok = np.isfinite(sq_).all(1)
    return (np.sqrt(sq_[ok].mean(0)) if ok.any() else np.full(2, np.nan)), float(1 - ok.mean())


@pytest.mark.parametrize("n_points, n_units, listed, combine", [
    (400, 400, None, "mackay-ghahramani"), (400, 90, None, "mean"), (120, 30, 21, "mackay-ghahramani"),
    (50, 10, None, "mackay-ghahramani")])
def test_batched_halves_give_the_numbers_of_one_split_at_a_time(n_points, n_units, listed, combine, monkeypatch):
    """Bit for bit, on clustered points; 21-long lists make most rows fall back to searching their half, and 50
    points in 10 sentences leave halves too small for some splits."""
    rng = np.random.default_rng(n_points + n_units)
    units = np.sort(rng.integers(0, n_units, n_points))
    X = rng.normal(size=(n_points, 4)) @ rng.normal(size=(4, 16)) + 0.1 * rng.normal(size=(n_points, 16))
    X += 3 * rng.normal(size=(n_units, 16))[units]  # the tokens of a sentence near each other
    cfg = idim.Config(resamples=40, mle_combine=combine)
    dist, idx = idim.nearest_neighbours(X, min(n_points - 1, listed or idim.neighbour_list_length(cfg.mle_k)))
    want = halves_se_one_split_at_a_time(X, dist, idx, units, cfg)
    got = idim.halves_se(X, dist, idx, units, cfg)
    assert got[1] == want[1] and np.array_equal(got[0], want[0], equal_nan=True)
    monkeypatch.setattr(idim, "BLOCK_ELEMENTS", 1)  # one split per batch
    got = idim.halves_se(X, dist, idx, units, cfg)
    assert got[1] == want[1] and np.array_equal(got[0], want[0], equal_nan=True)


def test_twonn_rows_equal_twonn_on_each_rows_points():
    rng = np.random.default_rng(5)
    mu = 1 + rng.exponential(size=(6, 50))
    mu[2, 7] = np.nan  # a row with a NaN ratio stays NaN
    rows = rng.random((6, 50)) < 0.5
    rows[2, 7] = True
    got = idim.twonn_rows(mu, rows, 0.1)
    want = [idim.twonn(m[r], 0.1) for m, r in zip(mu, rows)]
    assert np.array_equal(got, want, equal_nan=True) and np.isnan(got[2])
