"""analyses.stats: seeded bootstrap intervals over units, paired differences and the verdict rule."""

import numpy as np
import pytest

from analyses import stats


def test_weights_are_seeded_multinomial_counts():
    W = stats.resample_weights(50, 200, seed=3)
    assert W.shape == (200, 50) and (W.sum(1) == 50).all() and (W >= 0).all()
    assert np.array_equal(W, stats.resample_weights(50, 200, seed=3))
    assert not np.array_equal(W, stats.resample_weights(50, 200, seed=4))


def test_mean_interval_is_deterministic_under_a_seed():
    x = np.random.default_rng(0).normal(size=80)
    a, b = stats.mean_interval(x, 500, seed=7), stats.mean_interval(x, 500, seed=7)
    assert np.array_equal(a["interval"], b["interval"]) and a["point"] == pytest.approx(x.mean())
    assert a["interval"][0] < x.mean() < a["interval"][1]


def test_percentile_interval_covers_the_planted_mean():
    rng = np.random.default_rng(1)
    trials, n, hits = 300, 60, 0
    W = stats.resample_weights(n, 1000, seed=0)
    for _ in range(trials):
        x = rng.normal(2.0, 1.5, size=n)
        lo, hi = stats.interval(stats.mean_replicates(x, W))
        hits += lo <= 2.0 <= hi
    assert 0.89 <= hits / trials <= 0.99  # nominal 0.95; the percentile bootstrap runs a little narrow at n = 60


def test_interval_width_matches_the_standard_error():
    x = np.random.default_rng(2).normal(0, 1, size=400)
    lo, hi = stats.mean_interval(x, 2000)["interval"]
    assert (hi - lo) == pytest.approx(2 * 1.96 * x.std() / np.sqrt(len(x)), rel=0.1)


def test_paired_interval_is_narrower_when_units_are_correlated():
    rng = np.random.default_rng(3)
    unit = rng.normal(0, 3, size=200)  # what a unit does to both models
    a = unit + rng.normal(0.2, 0.3, size=200)
    b = unit + rng.normal(0.0, 0.3, size=200)
    p = stats.paired_difference(a, b)
    u = stats.unpaired_difference(a, b)
    assert p["point"] == pytest.approx(u["point"])
    width = lambda d: d["interval"][1] - d["interval"][0]  # noqa: E731
    assert width(p) < 0.3 * width(u)
    assert p["interval"][0] > 0  # the planted +0.2 is resolved only when paired
    assert u["interval"][0] < 0 < u["interval"][1]


def test_difference_replicates_pair_by_common_weights():
    rng = np.random.default_rng(4)
    unit = rng.normal(0, 3, size=150)
    a, b = unit + 0.2 + rng.normal(0, 0.3, 150), unit + rng.normal(0, 0.3, 150)
    W = stats.resample_weights(150, 1000, seed=0)
    ra, rb = stats.mean_replicates(a, W), stats.mean_replicates(b, W)
    paired = stats.interval(stats.difference_replicates(ra, rb, paired=True))
    assert np.allclose(paired, stats.paired_difference(a, b)["interval"])
    unpaired = stats.interval(stats.difference_replicates(ra, rb, paired=False))
    assert unpaired[1] - unpaired[0] > 3 * (paired[1] - paired[0])


def test_ratio_replicates_at_unit_weights_is_the_pooled_ratio():
    num, den = np.array([3.0, 5.0, 10.0]), np.array([1.0, 2.0, 4.0])
    assert stats.ratio_replicates(num, den, np.ones((1, 3)))[0] == pytest.approx(18 / 7)


def test_pairwise_cosine_replicates_reproduce_the_point_and_a_resample():
    rng = np.random.default_rng(5)
    X = rng.normal(0.5, 1, size=(40, 6))
    X[7] = 0  # a zero vector: cosine 0 with anything
    unit_of = np.sort(rng.integers(0, 9, size=40))
    S, q, c = stats.grouped_unit_sums(X, unit_of, 9)
    U = X / np.where(np.linalg.norm(X, axis=1, keepdims=True) > 0, np.linalg.norm(X, axis=1, keepdims=True), 1)
    G = U @ U.T
    point = G[np.triu_indices(40, 1)].mean()
    assert stats.pairwise_cosine_replicates(S, q, c, np.ones((1, 9)))[0] == pytest.approx(point)
    # one explicit resample: units 0, 0, 2, 5, ... -> the mean over pairs of distinct (copy, vector)
    w = np.array([2, 0, 1, 0, 3, 1, 0, 1, 1], float)
    rows = np.concatenate([np.repeat(np.flatnonzero(unit_of == u), int(w[u])) for u in range(9)])
    copy = np.concatenate([np.tile(np.arange(int(w[u])), (unit_of == u).sum()) if w[u] else [] for u in range(9)])
    ids = [(r, k) for r, k in zip(rows, np.asarray(copy, int))]
    Gr = U[rows] @ U[rows].T
    distinct = np.array([[rows[i] != rows[j] for j in range(len(ids))] for i in range(len(ids))])
    expect = Gr[distinct].mean()
    assert stats.pairwise_cosine_replicates(S, q, c, w[None])[0] == pytest.approx(expect)


@pytest.mark.parametrize("points, intervals, sign, expect", [
    ([0.3], [(0.1, 0.5)], 1, (stats.HOLDS, None)),
    ([0.3, 0.2, 0.4], [(0.1, 0.5), (0.05, 0.3), (0.2, 0.6)], 1, (stats.HOLDS, None)),
    ([-0.3, -0.2], [(-0.5, -0.1), (-0.3, -0.1)], 1, (stats.FAILS, None)),
    ([-0.3, -0.2], [(-0.5, -0.1), (-0.3, -0.1)], -1, (stats.HOLDS, None)),
    ([0.3, -0.2], [(0.1, 0.5), (-0.3, -0.1)], 1, (stats.INCONCLUSIVE, stats.SEEDS_DISAGREE)),
    ([0.1], [(-0.1, 0.3)], 1, (stats.INCONCLUSIVE, stats.CROSSES_ZERO)),
    ([0.3, 0.1], [(0.1, 0.5), (-0.1, 0.3)], 1, (stats.INCONCLUSIVE, stats.CROSSES_ZERO + " in 1 of 2 seeds")),
    ([0.3, -0.1], [(0.1, 0.5), (-0.3, 0.1)], 1, (stats.INCONCLUSIVE, stats.SEEDS_DISAGREE)),
])
def test_verdict_over_seeds(points, intervals, sign, expect):
    v, reason = stats.verdict(points, intervals, sign)
    assert v == expect[0]
    if expect[1] is not None:
        assert reason == expect[1]


def test_verdict_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.verdict([0.1], [(0, 1)], 0)
    with pytest.raises(ValueError):
        stats.verdict([], [], 1)
    assert stats.verdict([np.nan], [(np.nan, np.nan)], 1)[0] == stats.INCONCLUSIVE


def test_units_id_and_rounding():
    assert stats.units_id(["a", "b"]) == stats.units_id(["a", "b"]) != stats.units_id(["b", "a"])
    assert stats.rounded([0.123456789, np.nan]) == [0.123457, pytest.approx(np.nan, nan_ok=True)]
