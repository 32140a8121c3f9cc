"""analyses.anisotropy against planted structure: known angles, known spectra, known cones."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from analyses import anisotropy as an
from analyses import cosines, stats
from analyses.common import write_result
from analyses.style import model_color
from probes.capture.activations import Activations
from probes.errors import ProbeError


def renamed(res, name: str, **changes):
    """``res`` under another model name (its identity's), with ``changes`` to its other fields."""
    return dataclasses.replace(res, identity=dataclasses.replace(res.identity, model_name=name), **changes)

def brute_force_cosines(X):
    X = np.asarray(X, np.float64)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    G = Xn @ Xn.T
    i, j = np.triu_indices(len(X), k=1)  # row-major: i ascending, then j
    return G[i, j]


@pytest.mark.parametrize("block", [cosines.BLOCK_ELEMENTS, 7, 64])
def test_pairwise_cosines_matches_brute_force_in_row_major_order(monkeypatch, block):
    monkeypatch.setattr(cosines, "BLOCK_ELEMENTS", block)  # small blocks: many block boundaries
    X = np.random.default_rng(1).normal(size=(37, 5))
    got = an.pairwise_cosines(X)
    assert got.shape == (37 * 36 // 2,)
    np.testing.assert_allclose(got, brute_force_cosines(X), atol=1e-6)


def test_pairwise_cosines_known_angles():
    angles = np.array([0.0, np.pi / 3, np.pi / 2, np.pi])
    X = np.stack([np.cos(angles), np.sin(angles)], 1) * np.array([[1.0], [2.0], [0.5], [3.0]])  # norms differ
    want = [np.cos(angles[j] - angles[i]) for i in range(4) for j in range(i + 1, 4)]
    np.testing.assert_allclose(an.pairwise_cosines(X), want, atol=1e-6)


def test_zero_vectors_have_no_cosine_and_are_left_out_and_counted():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(an.pairwise_cosines(X), [np.nan, np.nan, 0], atol=1e-7)  # undefined, not 0
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(40, 6)) + 0.5
    with_zeros = np.insert(Y, [0, 7, 7, 40], 0.0, axis=0)  # four zero rows among the 40
    got, want = an.cosine_summary(with_zeros, bins=20), an.cosine_summary(Y, bins=20)
    assert (got.n_vectors, got.n_zero_vectors, got.n_pairs) == (44, 4, 40 * 39 // 2)
    assert dataclasses.replace(got, n_vectors=40, n_zero_vectors=0) == want
    none = an.cosine_summary(np.zeros((5, 3)), bins=4)  # no pair left: every statistic undefined
    assert none.n_pairs == 0 and none.n_zero_vectors == 5 and np.isnan(none.mean) and none.counts == [0] * 4


def test_exact_quantiles_are_numpys_bit_for_bit():
    rng = np.random.default_rng(2)
    for n in (2, 3, 7, 100, 1001, 65_537):
        c = rng.normal(size=n).astype(np.float32)
        want = np.quantile(c.astype(np.float64), an.QUANTILES)
        np.testing.assert_array_equal(an.exact_quantiles(c.copy(), an.QUANTILES), want)
    ties = np.repeat(np.float32([0.25, -1.0, 0.5]), 11)
    np.testing.assert_array_equal(an.exact_quantiles(ties.copy(), (0.0, 0.3, 0.5, 1.0)),
                                  np.quantile(ties.astype(np.float64), (0.0, 0.3, 0.5, 1.0)))


def test_exact_summary_in_blocks_matches_the_whole_array(monkeypatch):
    monkeypatch.setattr(cosines, "SUMMARY_BLOCK", 1000)  # many blocks
    X = np.random.default_rng(4).normal(size=(300, 8)) + 0.2
    c = an.pairwise_cosines(X).astype(np.float64)
    s = an.cosine_summary(X, bins=30)
    assert s.mean == pytest.approx(c.mean(), abs=1e-13) and s.std == pytest.approx(c.std(), abs=1e-13)
    assert s.frac_negative == (c < 0).mean()
    assert s.counts == np.histogram(np.clip(c, -1, 1), bins=30, range=(-1, 1))[0].tolist()
    assert list(s.quantiles.values()) == np.quantile(c, an.QUANTILES).tolist()


def test_isotropic_gaussian_is_centred_on_zero():
    d = 256
    X = np.random.default_rng(0).normal(size=(1500, d))
    s = an.cosine_summary(X, bins=50)
    assert abs(s.mean) < 0.01
    assert s.std == pytest.approx(1 / np.sqrt(d), rel=0.05)  # cosine of random directions ~ N(0, 1/d)
    assert s.frac_negative == pytest.approx(0.5, abs=0.02)
    assert sum(s.counts) == s.n_pairs == 1500 * 1499 // 2
    assert s.quantiles["0.5"] == pytest.approx(0.0, abs=0.01)


def test_narrow_cone_is_near_one():
    rng = np.random.default_rng(0)
    d, a = 64, 8.0  # a shared direction of length a plus unit noise: cos ~ a^2 / (a^2 + d) = 0.5
    u = np.zeros(d)
    u[0] = a
    X = u + rng.normal(size=(800, d))
    s = an.cosine_summary(X)
    assert s.mean == pytest.approx(a**2 / (a**2 + d), abs=0.03)
    assert s.frac_negative < 0.01


def test_streaming_path_agrees_with_exact(monkeypatch):
    monkeypatch.setattr(cosines, "BLOCK_ELEMENTS", 500)  # force many blocks in the streaming path too
    monkeypatch.setattr(cosines, "SUMMARY_BLOCK", 97)  # and many float64 pieces of each block
    X = np.random.default_rng(3).normal(size=(300, 16)) + 0.3
    exact = an.cosine_summary(X, bins=40)
    stream = an.cosine_summary(X, bins=40, exact_limit=0)
    assert exact.quantile_method == "exact" and stream.quantile_method.startswith("histogram")
    assert stream.mean == pytest.approx(exact.mean, abs=1e-6)
    assert stream.std == pytest.approx(exact.std, abs=1e-5)
    assert stream.frac_negative == pytest.approx(exact.frac_negative, abs=1e-9)
    assert stream.counts == exact.counts
    same = np.tile(np.random.default_rng(3).normal(size=64).astype(np.float32), (400, 1))  # one direction
    # cosines equal up to float32 rounding: the one-pass std has no cancellation, it is the two-pass one
    assert an.cosine_summary(same, exact_limit=0).std == pytest.approx(an.cosine_summary(same).std, abs=1e-15)
    c = an.pairwise_cosines(X)
    for q in exact.quantiles:
        assert exact.quantiles[q] == pytest.approx(np.quantile(c.astype(np.float64), float(q)), abs=1e-7)
        # the histogram's quantile lies within one fine bin (1e-4) of the order statistic it selects
        order_stat = np.quantile(c, float(q), method="inverted_cdf")
        assert stream.quantiles[q] == pytest.approx(order_stat, abs=1.01e-4)


def test_cosine_summary_needs_two_vectors():
    with pytest.raises(ProbeError, match="at least 2"):
        an.cosine_summary(np.ones((1, 3)))


def test_mev_known_spectra():
    v = np.random.default_rng(0).normal(size=10)
    rank_one = np.outer([1.0, -2.0, 3.0], v)  # one direction: all variance in sigma_1
    assert an.max_explainable_variance([rank_one]) == pytest.approx(1.0)
    k = 4
    assert an.max_explainable_variance([np.eye(k, 10)]) == pytest.approx(1 / k)  # equal singular values
    planted = np.diag([3.0, 1.0, 1.0])  # sigma = 3, 1, 1 -> 9 / 11
    assert an.max_explainable_variance([planted]) == pytest.approx(9 / 11)


def test_self_similarity_and_intra_sentence_known_values():
    same = np.tile([1.0, 2.0, 3.0], (5, 1))
    ortho = np.eye(3)
    assert an.self_similarity([same]) == pytest.approx(1.0)
    assert an.self_similarity([same, ortho]) == pytest.approx(0.5)
    # sentence 0: identical tokens (similarity 1); sentence 1: two orthogonal unit tokens (cos 45 deg each)
    H = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    keep = np.ones(4, bool)
    got = an.intra_sentence_similarity(H, np.array([0, 2, 4]), keep)
    assert got == pytest.approx((1.0 + np.cos(np.pi / 4)) / 2)
    # zero vectors have no cosine: a zero token is left out of its type's pairs and of its sentence
    assert an.self_similarity([np.r_[same, np.zeros((2, 3))], ortho]) == pytest.approx(0.5)
    assert np.isnan(an.self_similarity([np.r_[[[1.0, 0, 0]], np.zeros((3, 3))]]))  # no pair left
    H0 = np.r_[H[:2], np.zeros((1, 2)), H[2:]]  # a zero third token in sentence 0
    assert an.intra_sentence(H0, np.array([0, 3, 5]), np.ones(5, bool)) == (pytest.approx(got), 1)


def test_intra_sentence_reads_runs_of_sentences_in_bounded_memory(tmp_path):
    import tracemalloc

    rng = np.random.default_rng(6)
    lengths = rng.integers(1, 30, size=400)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    H = np.lib.format.open_memmap(tmp_path / "h.npy", mode="w+", dtype=np.float32, shape=(int(offsets[-1]), 32))
    H[:] = rng.normal(size=H.shape) + 1.0
    H[::17] = 0.0  # planted zero vectors
    keep = rng.random(len(H)) < 0.9
    want = an.intra_sentence(np.array(H), offsets, keep, chunk_elements=2**30)  # one run: the whole array
    tracemalloc.start()
    got = an.intra_sentence(H, offsets, keep, chunk_elements=64 * 32)  # runs of about 64 tokens
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert got == want and got[1] == int((keep & (np.arange(len(H)) % 17 == 0)).sum())
    assert peak < H.nbytes / 8  # a float64 copy of the layer alone would be 2 x H.nbytes


def planted_activations(n_texts=60, n_tok=8, d=48, seed=0) -> Activations:
    """Layer 0 isotropic, layer 1 a narrow cone; token type t reappears in every sentence."""
    rng = np.random.default_rng(seed)
    N = n_texts * n_tok
    iso = rng.normal(size=(N, d))
    cone = np.zeros(d)
    cone[0] = 10.0
    hidden = np.stack([iso, cone + rng.normal(size=(N, d))]).astype(np.float32)  # (L+1=2, N, d)
    offsets = np.arange(0, N + 1, n_tok)
    special = np.zeros(N, bool)
    special[offsets[:-1]] = True  # a [CLS]-like token at each text start
    token_ids = np.tile(np.arange(n_tok), n_texts)
    sentence = hidden[:, offsets[:-1]]
    meta = {"model": {"name": "planted", "sentence_vector": "cls"}, "key": "k", "n_texts": n_texts,
            "n_tokens": N, "truncated_texts": []}
    return Activations(meta=meta, texts=[f"t{i}" for i in range(n_texts)],
                       tokens=[[str(t) for t in range(n_tok)]] * n_texts, offsets=offsets,
                       token_ids=token_ids, special=special, hidden=hidden, sentence=sentence)


def test_compute_on_planted_activations():
    acts = planted_activations()
    cfg = an.Config(n_tokens=200, seed=0, bins=20, min_occurrences=5)
    res = an.compute(cfg, acts=acts)
    iso, cone = res.layers
    assert len(res.layers) == 2
    assert abs(iso.token.mean) < 0.05 and cone.token.mean > 0.6
    assert iso.token.n_vectors == 200 and sum(iso.token.counts) == 200 * 199 // 2
    assert iso.sentence.n_vectors == 60
    # 7 non-special token types, each in all 60 sentences; capped at max_occurrences
    assert "7 token types" in res.definitions["self_similarity"]
    assert cone.self_similarity > 0.6 and abs(iso.self_similarity_adjusted) < 0.05
    assert res.headline_layer == 1
    assert res.definitions["special_tokens"] == "excluded from token statistics"


def test_planted_zero_vectors_are_left_out_of_every_cosine_and_counted():
    acts = planted_activations()
    rng = np.random.default_rng(3)
    zero = rng.choice(np.flatnonzero(~acts.special), 40, replace=False)
    acts.hidden[1, zero] = 0.0  # 40 kept tokens of layer 1 lose their state
    acts.sentence[1, :5] = 0.0  # and 5 sentence vectors
    cfg = an.Config(n_tokens=200, seed=0, bins=20)
    res = an.compute(cfg, acts=acts)
    sample = an.draw_sample(acts, cfg)  # the same draw: it reads token ids, not states
    hit = np.isin(sample.tokens, zero)
    iso, cone = res.layers
    assert iso.n_zero_tokens == 0 and cone.n_zero_tokens == 40
    assert iso.token.n_zero_vectors == 0 and cone.token.n_zero_vectors == hit.sum() > 0
    assert cone.token.n_vectors == 200 and cone.token.n_pairs == (200 - hit.sum()) * (199 - hit.sum()) // 2
    assert cone.sentence.n_zero_vectors == 5
    left = acts.hidden[1, sample.tokens[~hit]]
    assert cone.token.mean == pytest.approx(brute_force_cosines(left).mean(), abs=1e-6)
    assert cone.sentence.mean == pytest.approx(brute_force_cosines(acts.sentence[1, 5:]).mean(), abs=1e-6)
    # the bootstrap leaves them out too: unit weights give the point estimate, and the interval holds it
    text = acts.text_index()[sample.tokens]
    ones = stats.pairwise_cosine_replicates(*stats.grouped_unit_sums(acts.hidden[1, sample.tokens], text, 60),
                                            np.ones((1, 60)))
    assert ones[0] == pytest.approx(cone.token.mean, abs=1e-6)
    for level in ("token", "sentence"):
        lo, hi = cone.mean_ci(level)
        assert lo < cone.of(level).mean < hi
    assert "zero_vectors" in res.definitions


def test_replicates_from_blocks_of_resamples_equal_the_whole_matrix():
    rng = np.random.default_rng(8)
    X, unit_of = rng.normal(size=(300, 12)) + 0.4, np.sort(rng.integers(0, 50, 300))
    W = stats.resample_weights(50, 200, seed=1)
    sums = stats.grouped_unit_sums(X, unit_of, 50, chunk_elements=12 * 7)  # read in chunks of whole units
    blocks = stats.blockwise_replicates(lambda w: stats.pairwise_cosine_replicates(*sums, w), 50, 200, seed=1,
                                        block_elements=50 * 9)  # blocks of 9 resamples
    # equal to rounding: a BLAS product may sum in another order for a block of 9 rows than for all 200 (the kernel
    # and its threads depend on the shape), 1 ulp apart
    np.testing.assert_allclose(blocks, stats.cosine_replicates(X, unit_of, 50, W), rtol=1e-13, atol=0)
    np.testing.assert_array_equal(np.concatenate(list(stats.resample_weight_blocks(50, 200, 1, 50 * 9))), W)


def test_special_tokens_are_excluded_unless_kept():
    acts = planted_activations()
    cfg = an.Config(n_tokens=10_000)  # more than the pool: uses every eligible token
    sample = an.draw_sample(acts, cfg)
    assert not acts.special[sample.tokens].any()
    assert len(sample.tokens) == (~acts.special).sum()
    kept = an.draw_sample(acts, an.Config(n_tokens=10_000, keep_special=True))
    assert acts.special[kept.tokens].any()


def test_compute_is_deterministic_and_seed_dependent():
    acts = planted_activations()
    a = an.compute(an.Config(n_tokens=100, seed=1), acts=acts)
    b = an.compute(an.Config(n_tokens=100, seed=1), acts=acts)
    c = an.compute(an.Config(n_tokens=100, seed=2), acts=acts)
    assert a.layers[0].token == b.layers[0].token
    assert a.layers[0].token.mean != c.layers[0].token.mean


def test_layer_out_of_range_is_a_clear_error():
    with pytest.raises(ProbeError, match="out of range"):
        an.compute(an.Config(layer=5), acts=planted_activations())


def test_result_json_round_trip(tmp_path):
    res = an.compute(an.Config(n_tokens=100, bins=20), acts=planted_activations())
    path, _ = write_result(tmp_path / "a", "anisotropy", "planted", res, an.table_rows(res))
    doc = json.loads(path.read_text())
    back = an.Result.from_json(doc)
    # the saved keys are the Result's fields, in order, between what write_result adds around them
    assert list(doc) == ["analysis", *back.to_json(), "provenance"]
    assert back.headline_layer == res.headline_layer and back.definitions == res.definitions
    for got, want in zip(back.layers, res.layers):
        assert isinstance(got, an.LayerRow) and isinstance(got.token, an.CosineSummary)
        assert got.token.counts == want.token.counts
        for value in (lambda r: r.baseline_cosine, lambda r: r.self_similarity, lambda r: r.mev,
                      lambda r: r.intra_sentence_similarity):
            assert value(got) == pytest.approx(value(want), abs=1e-8)  # saved to 8 decimals
    again, _ = write_result(tmp_path / "b", "anisotropy", "planted", back, an.table_rows(back))
    assert again.read_bytes() == path.read_bytes()  # read back and written again: the same file
    assert an.table_rows(an.Result.from_json(doc)) == an.table_rows(back)
    with pytest.raises(KeyError, match="layers"):
        an.Result.from_json({k: v for k, v in doc.items() if k != "layers"})


def test_plot_draws_the_histograms_in_the_model_colour():
    import matplotlib
    from matplotlib.colors import to_hex
    from matplotlib.patches import StepPatch

    matplotlib.use("Agg")
    res = an.compute(an.Config(n_tokens=100, bins=20), acts=planted_activations())
    other = renamed(res, "again")
    fig = an.plot([res, an.Result.from_json(other.to_json())])  # a saved document, read back, draws too
    assert len(fig.axes) == 4
    assert fig.axes[0].get_title() == "planted (layer 1)"
    for ax, (name, level) in zip(fig.axes, [("planted", "token"), ("again", "token"), ("planted", "sentence"),
                                            ("again", "sentence")]):
        (patch,) = [p for p in ax.patches if isinstance(p, StepPatch)]
        counts = np.asarray(res.layers[1].of(level).counts, float)
        values, edges = patch.get_data().values, patch.get_data().edges
        np.testing.assert_allclose(edges, np.linspace(-1, 1, 21))
        np.testing.assert_allclose(values * np.diff(edges) * counts.sum(), counts)  # density of the counts
        assert to_hex(patch.get_facecolor()) == model_color(name)


def test_plot_layers_draws_the_statistics_by_depth():
    import matplotlib
    from matplotlib.colors import to_hex

    matplotlib.use("Agg")
    res = an.compute(an.Config(n_tokens=100), acts=planted_activations())
    fig = an.plot_layers([res])
    assert len(fig.axes) == len(an.LAYER_PANELS)
    for ax, (key, _) in zip(fig.axes, an.LAYER_PANELS):
        line = ax.get_lines()[0]
        np.testing.assert_allclose(line.get_ydata(), [an.LAYER_VALUES[key](row) for row in res.layers])
        np.testing.assert_array_equal(line.get_xdata(), [0, 1])  # one depth: layer indices
        assert to_hex(line.get_color()) == model_color("planted") and ax.get_ylabel() == an.LAYER_UNITS[key]
    assert fig.axes[0].get_xlabel() == "layer l (0 = embeddings)"
    # models of different depth share the axis in relative depth l / L
    deep = renamed(res, "deep", layers=res.layers + res.layers)
    fig = an.plot_layers([res, deep])
    lines = fig.axes[0].get_lines()
    np.testing.assert_allclose(lines[0].get_xdata(), [0, 1])
    np.testing.assert_allclose(lines[1].get_xdata(), [0, 1 / 3, 2 / 3, 1])
    assert fig.axes[0].get_xlabel() == "relative depth l / L"
    assert to_hex(lines[1].get_color()) == model_color("deep")


def test_cosines_do_not_depend_on_the_scale_of_the_states():
    """A float32 cache holds states up to 3.4e38: rows whose float32 norm overflows (or underflows) are scaled in
    float64, so their cosines are those of the same directions at ordinary scale, never 0."""
    from analyses.anisotropy import cosine_summary, pairwise_cosines, self_similarity

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 16)).astype(np.float32) + 0.5
    for scale in (4e30, 1e-25):
        Y = X * np.float32(scale)
        np.testing.assert_allclose(pairwise_cosines(Y), pairwise_cosines(X), atol=1e-6)
        assert abs(cosine_summary(Y).mean - cosine_summary(X).mean) < 1e-6
        groups = [Y[:10], Y[10:25], Y[25:]]
        assert abs(self_similarity(groups) - self_similarity([X[:10], X[10:25], X[25:]])) < 1e-6


def test_a_sample_of_one_repeated_direction_has_cosines_of_exactly_1_never_above():
    """Forty copies of one vector (texts that all tokenise alike): every float32 cosine rounds near 1; none may
    exceed it, so the mean is 1 and lies inside its own interval."""
    from analyses.anisotropy import cosine_summary, intra_sentence, pairwise_cosines, self_similarity

    v = np.random.default_rng(3).standard_normal(384).astype(np.float32) * np.float32(0.37)
    X = np.repeat(v[None], 40, axis=0)
    c = pairwise_cosines(X)
    assert c.max() <= 1.0 and c.min() > 0.9999
    assert cosine_summary(X).mean <= 1.0 and self_similarity([X[:20], X[20:]]) <= 1.0
    assert intra_sentence(X, np.array([0, 20, 40]), np.ones(40, bool))[0] <= 1.0


def test_texts_that_all_give_the_same_tokens_are_warned_about():
    import probes

    texts = ["\u200b" * (i + 1) + "." for i in range(5)]  # zero-width spaces: the tokenizer drops them
    with pytest.warns(UserWarning, match=r"the 5 texts all give the same tokens \(\[CLS\] \. \[SEP\]\)"):
        probes.extract("tiny-bert", texts, cache_dir=None, progress=False)
