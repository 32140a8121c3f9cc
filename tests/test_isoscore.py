"""IsoScore (analyses.isoscore): the paper's algorithm equal to the ``isoscore`` package (Rudman et al. 2022) on
the same points and the planted extremes (isotropic Gaussian ~1, a rank-one cloud ~0, a k-dimensional isotropic
subspace (k - 1) / (n - 1)); the unbiased estimate and its resamples equal the average over 4-tuples of
different sentences written out, and the CLI on a tiny model (coverage: tests/test_isoscore_coverage.py)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from analyses import isoscore as iso
from probes.config import run_main

RNG = np.random.default_rng(0)
CLOUDS = {
    "gaussian": RNG.normal(size=(400, 12)),
    "skewed": RNG.normal(size=(300, 10)) @ RNG.normal(size=(10, 10)) + 3.0,
    "wide": RNG.normal(size=(40, 60)) * np.linspace(0.1, 2, 60),  # fewer points than dimensions
    "rank_one": np.outer(RNG.normal(size=200), RNG.normal(size=8)) + 1e-3 * RNG.normal(size=(200, 8)),
}


def paper_transcription(X) -> float:
    """Rudman et al. (2022), Algorithm 1, step by step with scikit-learn's PCA for the reorientation."""
    from sklearn.decomposition import PCA

    n = X.shape[1]
    rotated = PCA(n_components=min(X.shape)).fit_transform(X)  # step 1: PCA reorientation
    var = np.var(rotated, axis=0, ddof=1)  # step 2: the variance vector (zeros beyond the rank)
    var = np.concatenate([var, np.zeros(n - len(var))])
    var = np.sqrt(n) * var / np.linalg.norm(var)  # step 3
    delta = np.linalg.norm(var - 1) / np.sqrt(2 * (n - np.sqrt(n)))  # step 4
    k = (n - delta**2 * (n - np.sqrt(n)))**2 / n  # step 5
    return (n * (k / n) - 1) / (n - 1)  # step 6


@pytest.mark.parametrize("name", CLOUDS)
def test_equals_the_isoscore_package(name):
    ref = pytest.importorskip("IsoScore.IsoScore", reason="the isoscore package (test extra 'reference') is "
                                                           "not installed")
    X = CLOUDS[name]
    # the package mixes float32 constants (torch.sqrt of an integer tensor) into float64: agreement ~1e-8
    assert abs(iso.isoscore(X) - float(ref.IsoScore(X))) < 1e-6


@pytest.mark.parametrize("name", CLOUDS)
def test_equals_the_papers_steps_and_the_participation_ratio(name):
    X = CLOUDS[name]
    assert abs(iso.isoscore(X) - paper_transcription(X)) < 1e-9
    lam = np.linalg.eigvalsh(np.cov(X, rowvar=False))
    assert abs(iso.isoscore(X) - (iso.participation_ratio(lam) - 1) / (X.shape[1] - 1)) < 1e-9


def test_planted_extremes():
    rng = np.random.default_rng(1)
    assert iso.isoscore(rng.normal(size=(20000, 10))) > 0.98  # isotropic
    line = np.outer(rng.normal(size=500), rng.normal(size=16))
    assert iso.isoscore(line + 1e-6 * rng.normal(size=line.shape)) < 1e-6  # rank one
    k, n = 4, 20  # an isotropic 4-dimensional subspace of R^20 uses 4 of 20 dimensions: (k - 1) / (n - 1)
    Q = np.linalg.qr(rng.normal(size=(n, k)))[0]
    assert abs(iso.isoscore(rng.normal(size=(40000, k)) @ Q.T) - (k - 1) / (n - 1)) < 0.01
    # a shared offset (what makes random cosines large) changes nothing
    X = rng.normal(size=(500, 8))
    assert abs(iso.isoscore(X + 100.0) - iso.isoscore(X)) < 1e-9


def four_tuples(X, unit, w) -> float:
    """The unbiased IsoScore written out: over ordered 4-tuples (u, v, t, r) of different units with weight
    w_u w_v w_t w_r, the sums over their points of |a - b|^2 |c - e|^2 and ((a - b) . (c - e))^2; PR is their
    ratio."""
    groups = {u: X[unit == u] for u in np.unique(unit)}
    num = den = 0.0
    for u, v, t, r in itertools.permutations(groups, 4):
        ab = (groups[u][:, None] - groups[v][None]).reshape(-1, X.shape[1])  # every a - b
        ce = (groups[t][:, None] - groups[r][None]).reshape(-1, X.shape[1])
        num += w[u] * w[v] * w[t] * w[r] * (ab**2).sum() * (ce**2).sum()
        den += w[u] * w[v] * w[t] * w[r] * ((ab @ ce.T) ** 2).sum()
    return (num / den - 1) / (X.shape[1] - 1) if den > 0 else np.nan  # fewer than 4 sentences drawn: none


@pytest.mark.parametrize("counts", [[1, 3, 2, 1, 4, 2, 1], [1] * 8])  # tokens of sentences; sentence vectors
def test_estimates_equal_the_four_tuples_written_out(counts, monkeypatch):
    rng = np.random.default_rng(2)
    unit = np.repeat(np.arange(len(counts)), counts)
    X = rng.normal(size=(len(unit), 4)) * [1, 2, 0.5, 0.3] + 5.0
    W = np.vstack([np.ones(len(counts)), rng.multinomial(len(counts), np.full(len(counts), 1 / len(counts)),
                                                         size=4)]).astype(float)  # the sample, 4 resamples
    W[1, :2] = 0  # (a resample may leave out sentences)
    direct = [four_tuples(X, unit, w) for w in W]
    shuffled = rng.permutation(len(unit))  # the points in any order
    np.testing.assert_allclose(iso.isoscore_estimates(X[shuffled], unit[shuffled], W), np.clip(direct, 0, 1),
                               rtol=1e-9)
    monkeypatch.setattr(iso, "BLOCK_ELEMENTS", 10)  # Gram blocks of a unit or two, resamples one by one
    monkeypatch.setattr(iso, "REPLICATE_ELEMENTS", 1)
    np.testing.assert_allclose(iso.isoscore_estimates(X, unit, W), np.clip(direct, 0, 1), rtol=1e-9)
    assert np.isnan(iso.isoscore_estimates(X[unit < 3], unit[unit < 3], W)).all()  # 3 sentences: no 4-tuple


def test_cli_on_a_tiny_model_writes_every_layer_with_intervals(tmp_path):
    run_main(iso.main, ["--model", "tiny-bert", "--n-sentences", "30", "--n-tokens", "80", "--resamples", "50",
                        "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "results" / "isoscore" / "tiny-bert.json").read_text())
    assert [r["layer"] for r in doc["layers"]] == [0, 1, 2]
    # tiny-bert's sentence vector is [CLS]: at the embedding layer the same vector for every sentence
    first = doc["layers"][0]["sentence"]
    assert first["isoscore"] is None and first["total_variance"] == 0 and "no variance" in first["note"]
    for row in doc["layers"]:
        for level in ("token", "sentence")[:1 if row["layer"] == 0 else 2]:
            s = row[level]
            assert 0 <= s["isoscore"] <= 1 and s["dimension"] == 32 and "note" not in s
            lo, hi = s["isoscore_ci"]
            assert 0 <= lo <= s["isoscore"] <= hi <= 1
            assert 0 < s["isoscore_plugin"] <= 1 and 4 <= s["n_sentences"] <= 30
    assert doc["layers"][0]["sentence"]["n_points"] == 30 and doc["bootstrap"]["unit"] == "sentence"
    assert (tmp_path / "figures" / "isoscore.png").exists()


def test_too_few_tokens_is_one_error_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(iso.main, ["--model", "tiny-bert", "--n-tokens", "2", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_states_that_hold_nan_give_nulls_with_their_reason_not_a_traceback():
    import warnings

    import probes

    assert np.isnan(iso.isoscore(np.array([[1.0, 2.0], [np.nan, 1.0], [0.5, 0.1]])))
    enc = probes.load("tiny-bert")
    nan = lambda m, i, o: (o[0] * np.nan,) + tuple(o[1:]) if isinstance(o, tuple) else o * np.nan
    handle = enc.model.encoder.layer[0].register_forward_hook(nan, prepend=True)
    texts = [f"Sentence number {i} is here, with a few words." for i in range(12)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the hook (no cache) and the NaN states are each warned about
            acts = probes.extract(enc, texts, cache_dir=None, progress=False)
    finally:
        handle.remove()
    res = iso.compute(iso.Config(n_tokens=60, resamples=20), acts=acts)
    first, nan_layer = res.layers[0].token, res.layers[1].token
    assert first.isoscore is not None
    assert nan_layer.isoscore is None and nan_layer.isoscore_plugin is None and "NaN" in nan_layer.note
