"""Held-out evaluation streamed from a TokenSource: the same per-sentence sums (so the same statistics and intervals)
as from the states in memory, reading no more than one block of tokens at a time."""

from __future__ import annotations

import numpy as np
import torch

from analyses.sae import metrics
from analyses.sae.metrics import estimates, explained_variance, held_out_sums, legacy_explained_variance
from analyses.sae.model import SAE, SaeShape
from analyses.sae.stream import TokenSource


def test_streamed_held_out_sums_equal_the_in_memory_ones_and_read_one_block_at_a_time():
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(1000, 10)) * 2 + 3).astype(np.float32)
    unit_of = np.sort(rng.integers(0, 37, size=1000))
    sae = SAE(SaeShape("topk", 10, 30, 4), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        sae.b_dec.copy_(torch.from_numpy(X.mean(0)))
    reads: list[int] = []

    def read(start: int, stop: int) -> np.ndarray:
        reads.append(stop - start)
        return X[start:stop]

    in_memory = held_out_sums(sae, X, unit_of, 37, block=128)
    streamed = held_out_sums(sae, TokenSource(n=1000, d=10, read=read), unit_of, 37, block=128)
    assert max(reads) == 128 and sum(reads) == 2 * 1000  # two passes: the mean, then the sums
    for name in ("tokens", "sq_error", "sq_norm", "x_sum", "l0", "cosine", "l2_ratio", "hat_sq", "dot", "legacy",
                 "fires"):
        np.testing.assert_allclose(getattr(streamed, name), getattr(in_memory, name), rtol=1e-12, atol=1e-12)
    a, b = estimates(in_memory, 50, 0), estimates(streamed, 50, 0)
    assert a["explained_variance"].value == b["explained_variance"].value
    with torch.no_grad():
        x_hat = sae(torch.from_numpy(X))[0].numpy()
    assert b["explained_variance"].value is not None and b["explained_variance_legacy"].value is not None
    assert abs(b["explained_variance"].value - explained_variance(X, x_hat)) < 1e-9
    assert abs(b["explained_variance_legacy"].value - legacy_explained_variance(X, x_hat)) < 1e-9


def test_latent_counts_get_no_interval_that_would_lie_beside_them():
    """dead and dense count latents over every held-out token; a resample of sentences silences more latents, so a
    percentile interval of the count would exclude it: they are reported without one (the means keep theirs)."""
    rng = np.random.default_rng(0)
    n_units, m = 40, 6
    fires = np.zeros((n_units, m))
    fires[0, 0] = 1.0  # latent 0 fires on one sentence only; latents 1..5 on every sentence
    fires[:, 1:] = 5.0
    tokens = np.full(n_units, 10.0)
    d = 3
    sums = metrics.HeldOutSums(tokens=tokens, x_sum=rng.normal(size=(n_units, d)), fires=fires,
                               **{k: rng.random(n_units) + 1 for k in ("sq_error", "sq_norm", "l0", "cosine",
                                                                       "l2_ratio", "hat_sq", "dot", "legacy")})
    est = metrics.estimates(sums, resamples=200, seed=0)
    assert est["dead"].value == 0.0 and est["dead"].ci is None and est["dense"].ci is None
    assert est["l0"].ci is not None and est["l0"].ci[0] <= est["l0"].value <= est["l0"].ci[1]
