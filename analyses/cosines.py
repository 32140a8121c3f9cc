"""Cosine statistics of point clouds, in bounded memory: every pairwise cosine of a cloud (:func:`pairwise_cosines`,
rows i < j in row-major order, never the whole n x n matrix at once), their summary with a fixed-bin histogram on
[-1, 1] (:func:`cosine_summary`: exact quantiles up to ``exact_limit`` pairs, streamed above), and Ethayarajh's
(2019) statistics of token occurrences: self-similarity, intra-sentence similarity and the maximum explainable
variance. :mod:`analyses.anisotropy` computes them per layer.

A cosine with a zero vector is undefined: zero vectors are left out of every statistic and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyses.records import omitted
from probes.errors import ProbeError

QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
BLOCK_ELEMENTS = 2**23  # gram-matrix block size (floats) for the streaming paths: 32 MiB
SUMMARY_BLOCK = 2**21  # cosines taken to float64 at once for the exact summary's histogram and moments: 16 MiB
CHUNK_ELEMENTS = 2**21  # a layer's states read at once (rows of whole sentences x d floats): 8 MiB in float32


# ----------------------------------------------------------------------------- pairwise cosines


def _unit_rows(X) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of X scaled to unit length, float32; (n,) bool: the rows that have a direction). A zero row
    (Euclidean norm 0 in float32) has no direction, so its cosine with anything is undefined: it stays zero
    here, and every statistic leaves it out (and counts it). A row whose float32 norm overflows or underflows
    (numbers beyond about 1e19, or below 1e-19, which a float32 cache holds) is scaled in float64 instead: a
    cosine does not depend on the scale."""
    X = np.asarray(X, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore"):  # such rows are redone below
        norms = np.linalg.norm(X, axis=1, keepdims=True)
    unit = X / np.where(norms > 0, norms, 1)
    # rows whose squares left float32's range: an infinite norm (every cosine would be 0) or a norm of 0 or below
    # 1e-30 for a row with numbers in it (no direction, or one rounded away); a row holding NaN or inf stays NaN
    redo = np.flatnonzero(((norms[:, 0] == np.inf) | (norms[:, 0] < 1e-30)) & np.isfinite(X).all(1) & X.any(1))
    if len(redo):
        wide = X[redo].astype(np.float64)
        wide_norms = np.linalg.norm(wide, axis=1, keepdims=True)
        unit[redo] = (wide / wide_norms).astype(np.float32)
        norms[redo] = 1.0  # has a direction
    return unit, norms[:, 0] > 0


def _upper_blocks(Xn: np.ndarray):
    """Yield the upper-triangle cosines (i < j) of the unit rows Xn row by row in blocks, never the full n x n."""
    n = len(Xn)
    start = 0
    while start < n - 1:
        rows = max(1, min(n - 1 - start, BLOCK_ELEMENTS // max(n - start, 1)))
        G = Xn[start:start + rows] @ Xn[start:].T  # (rows, n - start)
        np.clip(G, -1.0, 1.0, out=G)  # two unit rows of one direction can round to 1.0000001: a cosine is <= 1
        yield start, [G[r, r + 1:] for r in range(rows)]
        start += rows


def _upper_cosines(Xn: np.ndarray) -> np.ndarray:
    """All C(n,2) cosines of the unit rows Xn (n, d), i < j in row-major order. (C(n,2),) float32"""
    n = len(Xn)
    out = np.empty(n * (n - 1) // 2, dtype=np.float32)
    pos = 0
    for _, rows in _upper_blocks(Xn):
        for r in rows:
            out[pos:pos + len(r)] = r
            pos += len(r)
    return out


def _pieces(rows: list[np.ndarray], size: int):
    """Yield consecutive ``rows`` (1-D) joined into float64 arrays of at most ``size`` values (a longer row
    alone), so a block of cosines is taken to float64 a piece at a time."""
    piece: list[np.ndarray] = []
    k = 0
    for r in rows:
        if piece and k + len(r) > size:
            yield np.concatenate(piece, dtype=np.float64)
            piece, k = [], 0
        piece.append(r)
        k += len(r)
    if piece:
        yield np.concatenate(piece, dtype=np.float64)


def pairwise_cosines(X: np.ndarray) -> np.ndarray:
    """All C(n,2) cosines of the rows of X (n, d), for i < j in row-major order (i, then j); a pair with a
    zero row has no cosine (NaN). (C(n,2),) float32"""
    Xn, nonzero = _unit_rows(X)
    if not nonzero.all():
        Xn[~nonzero] = np.nan  # undefined: NaN in every pair of that row
    return _upper_cosines(Xn)


def exact_quantiles(c: np.ndarray, probs) -> np.ndarray:
    """``np.quantile(c.astype(np.float64), probs)`` (linear interpolation, numpy's default method), bit for bit,
    without the float64 copy: ``c`` (any float dtype; finite) is partitioned in place around the order
    statistics the quantiles need, which are then interpolated in float64 as numpy does. (len(probs),)"""
    n = len(c)
    virtual = (n - 1) * np.asarray(probs, dtype=np.float64)
    prev = np.floor(virtual)
    above = virtual >= n - 1  # numpy takes the last value there
    lo = np.where(above, n - 1, prev).astype(np.intp)
    hi = np.where(above, n - 1, prev + 1).astype(np.intp)
    gamma = virtual - np.where(above, -1.0, prev)
    c.partition(np.unique(np.concatenate([lo, hi])))
    a, b = c[lo].astype(np.float64), c[hi].astype(np.float64)
    diff = b - a
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


@dataclass(kw_only=True)
class CosineSummary:
    """Distribution of pairwise cosines (a record: saved and read back by :mod:`analyses.records`)."""

    n_vectors: int  # vectors given
    # of these, zero vectors: their cosines are undefined, so they are left out of every pair (None: a file written
    # before they were counted)
    n_zero_vectors: int | None = omitted()
    n_pairs: int  # C(n_vectors - n_zero_vectors, 2)
    mean: float
    std: float
    frac_negative: float
    quantiles: dict  # {"0.5": value, ...}
    quantile_method: str  # "exact" or "histogram (resolution 2/bins)"
    counts: list  # (bins,) histogram counts on edges linspace(-1, 1, bins + 1)


def cosine_summary(X: np.ndarray, bins: int = 100, exact_limit: int = 50_000_000) -> CosineSummary:
    """Histogram and moments of all pairwise cosines of X (n, d), zero rows left out (a cosine with a zero
    vector is undefined; fewer than two non-zero rows: no pairs, every statistic NaN). Streams in bounded
    memory; quantiles are exact while C(n,2) <= exact_limit (the cosines kept in float32, 4 bytes a pair),
    else read off a fine histogram."""
    n_given = len(X)
    if n_given < 2:
        raise ProbeError(f"need at least 2 vectors for pairwise cosines, got {n_given}")
    Xn, nonzero = _unit_rows(X)
    if not nonzero.all():
        Xn = Xn[nonzero]
    n = len(Xn)
    n_pairs = n * (n - 1) // 2
    counted = {"n_vectors": n_given, "n_zero_vectors": n_given - n, "n_pairs": n_pairs}
    if n_pairs == 0:
        nan = float("nan")
        return CosineSummary(**counted, mean=nan, std=nan, frac_negative=nan,
                             quantiles={str(p): nan for p in QUANTILES},
                             quantile_method="none (fewer than 2 non-zero vectors)", counts=[0] * bins)
    if n_pairs <= exact_limit:
        c = _upper_cosines(Xn)  # (C(n,2),) float32: the only copy; the rest goes in float64 blocks
        del Xn
        counts = np.zeros(bins, np.int64)
        total, neg = 0.0, 0
        for s in range(0, n_pairs, SUMMARY_BLOCK):
            block = c[s:s + SUMMARY_BLOCK].astype(np.float64)
            counts += np.histogram(np.clip(block, -1, 1), bins=bins, range=(-1.0, 1.0))[0]  # uniform bins: no sort
            total, neg = total + float(block.sum()), neg + int((block < 0).sum())
        mean = total / n_pairs
        sq = 0.0
        for s in range(0, n_pairs, SUMMARY_BLOCK):
            block = c[s:s + SUMMARY_BLOCK].astype(np.float64) - mean
            sq += float((block * block).sum())
        q = exact_quantiles(c, QUANTILES) if np.isfinite(mean) else np.full(len(QUANTILES), np.nan)
        return CosineSummary(**counted, mean=mean, std=float(np.sqrt(sq / n_pairs)), frac_negative=neg / n_pairs,
                             quantiles={str(p): float(v) for p, v in zip(QUANTILES, q)}, quantile_method="exact",
                             counts=counts.tolist())
    fine = np.linspace(-1.0, 1.0, 20_001)  # quantile resolution 1e-4
    fine_counts = np.zeros(len(fine) - 1, np.int64)
    total = dev = dev2 = 0.0
    neg = 0
    shift = None
    for _, rows in _upper_blocks(Xn):
        for c in _pieces(rows, SUMMARY_BLOCK):  # (about SUMMARY_BLOCK,) float64
            fine_counts += np.histogram(np.clip(c, -1, 1), bins=len(fine) - 1, range=(-1.0, 1.0))[0]
            # the variance from deviations around a value near the mean (the first piece's): one pass without
            # the cancellation of E[c^2] - E[c]^2 when the cosines barely vary (a layer of identical vectors)
            shift = float(c.mean()) if shift is None else shift
            d = c - shift
            total, dev, dev2 = total + c.sum(), dev + d.sum(), dev2 + (d * d).sum()
            neg += int((c < 0).sum())
    mean = total / n_pairs
    # quantile = the point where the histogram's piecewise-linear CDF reaches p (within one bin)
    cdf = np.concatenate([[0.0], np.cumsum(fine_counts) / n_pairs])
    read = [float(np.interp(p, cdf, fine)) for p in QUANTILES]
    counts = fine_counts.reshape(bins, -1).sum(1) if 20_000 % bins == 0 else \
        np.histogram(fine[:-1] + 1e-4 / 2, bins=np.linspace(-1.0, 1.0, bins + 1), weights=fine_counts)[0]
    return CosineSummary(**counted, mean=mean, std=float(np.sqrt(max(dev2 / n_pairs - (dev / n_pairs) ** 2, 0.0))),
                         frac_negative=neg / n_pairs, quantiles={str(p): v for p, v in zip(QUANTILES, read)},
                         quantile_method="histogram (resolution 1e-4)",
                         counts=np.asarray(counts).astype(int).tolist())


# ----------------------------------------------------------------------------- Ethayarajh's statistics


def _by_size(groups: list[np.ndarray]):
    """Yield (positions, stack): the groups of each size k stacked as one (m, k, d) array, with their
    positions in ``groups``, so a statistic of many small groups is a few batched operations."""
    sizes = np.array([len(g) for g in groups])
    for k in np.unique(sizes):
        where = np.flatnonzero(sizes == k)
        yield where, np.stack([np.asarray(groups[i]) for i in where])


def self_similarity(groups: list[np.ndarray]) -> float:
    """Mean over token types of the mean pairwise cosine among that type's occurrences (k_i, d)
    (float32 cosines, as :func:`pairwise_cosines`; groups of one size at once). Zero vectors are left out
    of their group (their cosines are undefined), and a group left with fewer than two vectors drops out;
    NaN when none is left."""
    if not groups:
        return float("nan")
    # one pass over all occurrences: each row is scaled on its own, so this is group by group, bit for bit
    Xn, nonzero = _unit_rows(np.concatenate(groups))
    bounds = np.cumsum([len(g) for g in groups])[:-1]
    unit = [g[keep] for g, keep in zip(np.split(Xn, bounds), np.split(nonzero, bounds))]
    unit = [g for g in unit if len(g) >= 2]
    if not unit:
        return float("nan")
    means = np.empty(len(unit))
    for where, Gn in _by_size(unit):  # Gn: (m, k, d) unit rows
        k = Gn.shape[1]
        iu = np.triu_indices(k, 1)
        cos = np.clip((Gn @ Gn.transpose(0, 2, 1))[:, iu[0], iu[1]], -1.0, 1.0)  # (m, k(k-1)/2), rounding cut
        means[where] = cos.mean(1)  # (m,) float32 means
    return float(np.mean(means))


def max_explainable_variance(groups: list[np.ndarray]) -> float:
    """Mean over groups of sigma_1^2 / sum sigma_i^2 of the uncentred occurrence matrix (k_i, d). (A zero row
    adds nothing to the singular values, so it needs no exclusion here.)"""
    vals = np.empty(len(groups))
    for where, G in _by_size(groups):
        # sigma_i^2 are the eigenvalues of the small (k, k) Gram matrices: cheaper than an SVD
        G = G.astype(np.float64)
        ok = np.isfinite(G).all((1, 2))  # NaN states (a broken model): no value, written as null and listed in nulls
        vals[where[~ok]] = np.nan
        if ok.any():
            eig = np.linalg.eigvalsh(G[ok] @ G[ok].transpose(0, 2, 1))  # (m, k) ascending
            vals[where[ok]] = eig[:, -1] / eig.sum(1)
    return float(np.mean(vals))


def _sentence_runs(offsets: np.ndarray, rows: int):
    """Yield (t0, t1): consecutive runs of whole texts t0..t1-1 holding at most ``rows`` tokens (a longer
    text is a run of its own)."""
    T = len(offsets) - 1
    t0 = 0
    while t0 < T:
        t1 = int(np.searchsorted(offsets, offsets[t0] + rows, side="right")) - 1
        t1 = min(max(t1, t0 + 1), T)
        yield t0, t1
        t0 = t1


def intra_sentence(H, offsets: np.ndarray, keep: np.ndarray,
                   chunk_elements: int = CHUNK_ELEMENTS) -> tuple[float, int]:
    """(intra-sentence similarity, the number of zero vectors among the kept tokens). The similarity: the mean
    over sentences of the mean cosine between each kept token and the mean of the sentence's kept tokens.
    A zero vector has no cosine: it is left out (of its sentence's mean too); a sentence counts when at least
    two of its kept tokens are non-zero and their mean is non-zero (NaN when none does).

    H (N, d): any array a row range of which reads as an array (a memory map, a float32 view of float16
    storage); it is read in runs of whole sentences of about ``chunk_elements`` floats, so memory stays
    bounded whatever N. offsets (T+1,); keep (N,) bool."""
    T = len(offsets) - 1
    per_text, used = np.zeros(T), np.zeros(T, bool)
    n_zero = 0
    for t0, t1 in _sentence_runs(offsets, max(1, int(chunk_elements) // max(int(H.shape[1]), 1))):
        a, b = int(offsets[t0]), int(offsets[t1])
        rows = np.flatnonzero(keep[a:b])
        if not len(rows):
            continue
        X = np.asarray(H[a:b])[rows]  # (n, d) the run's kept tokens
        text = np.repeat(np.arange(t1 - t0), np.diff(offsets[t0:t1 + 1]))[rows]  # (n,) sentence in the run
        Xn, nonzero = _unit_rows(X)
        if not nonzero.all():
            n_zero += int((~nonzero).sum())
            X, Xn, text = X[nonzero], Xn[nonzero], text[nonzero]
        counts = np.bincount(text, minlength=t1 - t0)
        sums = np.zeros((t1 - t0, X.shape[1]))
        present, first = np.unique(text, return_index=True)  # text is sorted: each sentence's tokens are a run
        sums[present] = np.add.reduceat(X.astype(np.float64), first, axis=0)  # float64 sums, in token order
        centre, has_direction = _unit_rows(sums / np.maximum(counts, 1)[:, None])  # (t, d) unit mean directions
        cos = np.clip(np.einsum("nd,nd->n", Xn, centre[text]), -1.0, 1.0)  # (n,) float32, rounding cut
        per_text[t0:t1] = np.bincount(text, weights=cos, minlength=t1 - t0) / np.maximum(counts, 1)
        used[t0:t1] = (counts >= 2) & has_direction
    return (float(per_text[used].mean()) if used.any() else float("nan")), n_zero


def intra_sentence_similarity(H, offsets: np.ndarray, keep: np.ndarray) -> float:
    """Mean over sentences of the mean cosine between each kept token and the sentence's mean of kept tokens
    (zero vectors left out: see :func:`intra_sentence`). H (N, d); offsets (T+1,); keep (N,) bool."""
    return intra_sentence(H, offsets, keep)[0]
