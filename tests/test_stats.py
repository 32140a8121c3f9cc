"""analyses.stats: seeded bootstrap intervals over units, paired differences, the interval over seeds and the
verdict rule."""

import dataclasses

import numpy as np
import pytest

from analyses import stats


def test_weights_are_seeded_multinomial_counts():
    W = stats.resample_weights(50, 200, seed=3)
    assert W.shape == (200, 50) and (W.sum(1) == 50).all() and (W >= 0).all()
    assert np.array_equal(W, stats.resample_weights(50, 200, seed=3))
    assert not np.array_equal(W, stats.resample_weights(50, 200, seed=4))


def _mean_interval(x, resamples=1000, seed=0):
    return stats.interval(stats.mean_replicates(x, stats.resample_weights(len(x), resamples, seed)))


def test_mean_interval_is_deterministic_under_a_seed():
    x = np.random.default_rng(0).normal(size=80)
    a, b = _mean_interval(x, 500, seed=7), _mean_interval(x, 500, seed=7)
    assert np.array_equal(a, b) and a[0] < x.mean() < a[1]


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
    lo, hi = _mean_interval(x, 2000)
    assert (hi - lo) == pytest.approx(2 * 1.96 * x.std() / np.sqrt(len(x)), rel=0.1)


def test_paired_interval_is_narrower_when_units_are_correlated():
    rng = np.random.default_rng(3)
    unit = rng.normal(0, 3, size=200)  # what a unit does to both models
    a, b = unit + rng.normal(0.2, 0.3, size=200), unit + rng.normal(0.0, 0.3, size=200)
    block = stats.bootstrap_block("sentence", 200, units_id="sha256:same")
    sa, sb = stats.Sample.of_mean(a.mean(), a, block), stats.Sample.of_mean(b.mean(), b, block)
    paired = stats.difference(sa, sb)
    unpaired = stats.difference(sa, stats.Sample.of_mean(b.mean(), b,
                                                            dataclasses.replace(block, units_id="sha256:other")))
    assert paired.paired and not unpaired.paired and paired.point == pytest.approx(unpaired.point)
    width = lambda d: d.interval()[1] - d.interval()[0]  # noqa: E731
    assert width(paired) < 0.3 * width(unpaired)
    assert paired.interval()[0] > 0  # the planted +0.2 is resolved only when paired
    assert unpaired.interval()[0] < 0 < unpaired.interval()[1]


def test_difference_replicates_pair_by_common_weights():
    rng = np.random.default_rng(4)
    unit = rng.normal(0, 3, size=150)
    a, b = unit + 0.2 + rng.normal(0, 0.3, 150), unit + rng.normal(0, 0.3, 150)
    W = stats.resample_weights(150, 1000, seed=0)
    ra, rb = stats.mean_replicates(a, W), stats.mean_replicates(b, W)
    paired = stats.interval(stats.difference_replicates(ra, rb, paired=True))
    assert np.allclose(paired, stats.interval(stats.mean_replicates(a - b, W)))
    unpaired = stats.interval(stats.difference_replicates(ra, rb, paired=False))
    assert unpaired[1] - unpaired[0] > 3 * (paired[1] - paired[0])


def test_an_interval_of_mostly_undefined_resamples_is_none():
    """Two sentences: half the resamples draw one sentence twice, where a mean cosine over pairs of distinct
    sentences does not exist. Dropping them left a zero-width interval that missed the point estimate."""
    X = np.random.default_rng(8).normal(size=(2, 16))
    W = stats.resample_weights(2, 1000, seed=0)
    rep = stats.cosine_replicates(X, np.arange(2), 2, W)
    assert 0.3 < np.mean(~np.isfinite(rep)) < 0.7
    assert np.isnan(stats.interval(rep)).all()
    assert np.isnan(stats.interval(np.stack([rep, rep], 1))).all()
    assert stats.Sample(0.5, rep, 2, "sentence").interval() is None
    few = np.r_[np.full(10, np.nan), np.linspace(0, 1, 990)]  # 1% undefined: within one tail's 2.5%
    assert np.allclose(stats.interval(few), np.quantile(few[10:], [0.025, 0.975]))
    assert np.isfinite(stats.interval(np.stack([few, rep], 1))[:, 0]).all()


def test_min_units_matches_its_reason():
    """At MIN_UNITS units the plug-in normal interval of a mean covers about 93% (nominal 95%); below, less."""
    from scipy.stats import t

    cover = lambda n: 2 * t.cdf(1.96 * np.sqrt((n - 1) / n), n - 1) - 1  # noqa: E731
    assert 0.92 < cover(stats.MIN_UNITS) < 0.94 and cover(10) < 0.91 and cover(2) < 0.61


def test_ratio_replicates_at_unit_weights_is_the_pooled_ratio():
    num, den = np.array([3.0, 5.0, 10.0]), np.array([1.0, 2.0, 4.0])
    assert stats.ratio_replicates(num, den, np.ones((1, 3)))[0] == pytest.approx(18 / 7)


def test_pairwise_cosine_replicates_reproduce_the_point_and_a_resample():
    rng = np.random.default_rng(5)
    X = rng.normal(0.5, 1, size=(40, 6))
    X[7] = 0  # a zero vector: no cosine with anything, left out of every pair
    nz = np.arange(40) != 7
    unit_of = np.sort(rng.integers(0, 9, size=40))
    S, q, c = stats.grouped_unit_sums(X, unit_of, 9)
    U = X / np.where(np.linalg.norm(X, axis=1, keepdims=True) > 0, np.linalg.norm(X, axis=1, keepdims=True), 1)
    G = U @ U.T
    point = G[np.ix_(nz, nz)][np.triu_indices(39, 1)].mean()
    assert stats.pairwise_cosine_replicates(S, q, c, np.ones((1, 9)))[0] == pytest.approx(point)
    # one explicit resample: units 0, 0, 2, 5, ... -> the mean over pairs of distinct (copy, vector)
    w = np.array([2, 0, 1, 0, 3, 1, 0, 1, 1], float)
    rows = np.concatenate([np.repeat(np.flatnonzero((unit_of == u) & nz), int(w[u])) for u in range(9)])
    copy = np.concatenate([np.tile(np.arange(int(w[u])), ((unit_of == u) & nz).sum()) if w[u] else []
                           for u in range(9)])
    ids = [(r, k) for r, k in zip(rows, np.asarray(copy, int))]
    Gr = U[rows] @ U[rows].T
    distinct = np.array([[rows[i] != rows[j] for j in range(len(ids))] for i in range(len(ids))])
    expect = Gr[distinct].mean()
    assert stats.pairwise_cosine_replicates(S, q, c, w[None])[0] == pytest.approx(expect)


@pytest.mark.parametrize("points, intervals, sign, expect", [
    ([0.3, 0.2, 0.4], [(0.1, 0.5), (0.05, 0.3), (0.2, 0.6)], 1, (stats.HOLDS, None)),
    ([-0.3, -0.2], [(-0.5, -0.1), (-0.3, -0.1)], 1, (stats.INCONCLUSIVE, stats.ACROSS_CROSSES)),  # t_1 = 12.7
    ([-0.3, -0.31, -0.29], [(-0.5, -0.1), (-0.4, -0.2), (-0.4, -0.2)], 1, (stats.FAILS, None)),
    ([-0.3, -0.31, -0.29], [(-0.5, -0.1), (-0.4, -0.2), (-0.4, -0.2)], -1, (stats.HOLDS, None)),
    ([0.3], [(0.1, 0.5)], 1, (stats.INCONCLUSIVE, stats.ONE_SEED)),
    ([0.3, -0.2], [(0.1, 0.5), (-0.3, -0.1)], 1, (stats.INCONCLUSIVE, stats.SEEDS_DISAGREE)),
    ([0.1], [(-0.1, 0.3)], 1, (stats.INCONCLUSIVE, stats.CROSSES_ZERO)),
    ([0.3, 0.1], [(0.1, 0.5), (-0.1, 0.3)], 1, (stats.INCONCLUSIVE, stats.CROSSES_ZERO + " in 1 of 2 seeds")),
    ([0.3, -0.1], [(0.1, 0.5), (-0.3, 0.1)], 1, (stats.INCONCLUSIVE, stats.SEEDS_DISAGREE)),
    ([0.3, 0.31, 0.29], [None, None, None], 1, (stats.HOLDS, "point difference")),
    ([0.3], [None], 1, (stats.INCONCLUSIVE, stats.ONE_SEED)),
])
def test_decide_over_seeds(points, intervals, sign, expect):
    d = stats.decide(points, intervals, sign)
    assert d.verdict == expect[0]
    if expect[1] is not None:
        assert expect[1] in d.reason
    assert d.mean == pytest.approx(np.mean(points)) and (d.across is None) == (len(points) < 2)


def test_decide_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.decide([0.1], [(0, 1)], 0)
    with pytest.raises(ValueError):
        stats.decide([], [], 1)
    with pytest.raises(ValueError):
        stats.decide([0.1, 0.2], [(0, 1), None], 1)
    assert stats.decide([np.nan], [(np.nan, np.nan)], 1).verdict == stats.INCONCLUSIVE


def test_seed_interval_is_the_t_interval():
    d = [0.1, 0.3, 0.2]
    lo, hi = stats.seed_interval(d)
    assert (lo + hi) / 2 == pytest.approx(0.2) and (hi - lo) / 2 == pytest.approx(4.302653 * 0.1 / np.sqrt(3))
    assert stats.seed_interval([0.1]) is None and stats.seed_interval([0.1, np.nan]) is None


def test_combine_says_which_comparison_decides():
    H, F, N, U = stats.HOLDS, stats.FAILS, stats.INCONCLUSIVE, stats.UNTESTED
    assert stats.combine([H, H]) == (H, 0)
    assert stats.combine([H, N, F]) == (F, 2)
    assert stats.combine([H, U, N]) == (U, 1)
    assert stats.combine([H, N]) == (N, 1)
    assert str(F) == "does not hold" and str(U) == "not testable"


def test_units_id_and_rounding():
    assert stats.units_id(["a", "b"]) == stats.units_id(["a", "b"]) != stats.units_id(["b", "a"])
    assert stats.rounded([0.123456789, np.nan]) == [0.123457, pytest.approx(np.nan, nan_ok=True)]


def test_a_bootstrap_over_fewer_than_min_units_says_its_interval_is_rough():
    import warnings

    with pytest.warns(UserWarning, match="over 2 sentences .* cover less than 95%"):
        block = stats.bootstrap_block("sentence", 2)
    assert "about 60% at 2 units" in block.note
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats.bootstrap_block("sentence", stats.MIN_UNITS).note is None
