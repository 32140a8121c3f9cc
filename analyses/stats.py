"""Bootstrap intervals over units and verdicts from them (issue 27). Pure numpy, no I/O.

Every interval here is a seeded percentile bootstrap over the unit a number averages (sentences,
windows, documents, held-out blocks, contexts). A resample is a row of multinomial counts
``W[b, u]`` (how often unit u is drawn in resample b), so B resamples of a mean of per-unit values
cost one matrix product ``W @ values / n``. The counts depend only on (n, resamples, seed): two
models whose results list the same units in the same order and use the same seed are resampled
alike, so the difference of their replicates is the PAIRED bootstrap of the difference
(:func:`difference_replicates`); with other units the replicates are decoupled by a seeded shuffle
(an unpaired bootstrap).

    >>> W = resample_weights(len(x), 1000, seed=0)
    >>> interval(W @ x / len(x))         # 95% percentile interval of the mean of x
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

RESAMPLES = 1000  # default number of bootstrap resamples
LEVEL = 0.95  # default two-sided interval level
SEED = 0  # default bootstrap seed

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
SEEDS_DISAGREE, CROSSES_ZERO = "seeds disagree", "the interval crosses zero"

# A model trained again with another seed is registered as ``<model>-seed1``, ``<model>-seed2``; seed 0
# keeps the plain name.
SEED_SUFFIX = re.compile(r"^(?P<base>.+)-seed(?P<seed>\d+)$")


def seed_of(name: str) -> tuple[str, int]:
    """(model, seed): ``bert-small-seed2`` -> ("bert-small", 2); a plain name is seed 0."""
    m = SEED_SUFFIX.match(str(name))
    return (m["base"], int(m["seed"])) if m else (str(name), 0)


def resample_weights(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """(resamples, n) float64 multinomial counts: row b says how often each of n units is drawn in
    resample b (each row sums to n). Depends only on (n, resamples, seed)."""
    if n < 1:
        raise ValueError(f"a bootstrap needs at least one unit, got {n}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng([int(seed), int(n)])
    return rng.multinomial(n, np.full(n, 1.0 / n), size=int(resamples)).astype(np.float64)


def interval(replicates, level: float = LEVEL) -> np.ndarray:
    """Percentile interval of bootstrap replicates along axis 0: (2,) for (B,), (2, k) for (B, k).
    Non-finite replicates (a degenerate resample) are left out."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    r = np.asarray(replicates, dtype=np.float64)
    a = (1 - level) / 2
    if r.ndim == 1:
        r = r[np.isfinite(r)]
        return np.quantile(r, [a, 1 - a]) if r.size else np.full(2, np.nan)
    return np.nanquantile(np.where(np.isfinite(r), r, np.nan), [a, 1 - a], axis=0)


def mean_replicates(values, weights: np.ndarray) -> np.ndarray:
    """Bootstrap replicates of the mean of per-unit ``values`` ((n,) or (n, k)) under ``weights`` (B, n)."""
    v = np.asarray(values, dtype=np.float64)
    return weights @ v / weights.sum(axis=1).reshape((-1,) + (1,) * (v.ndim - 1))


def ratio_replicates(numerators, denominators, weights: np.ndarray) -> np.ndarray:
    """Replicates of sum(num) / sum(den) over resampled units (e.g. NLL sums / token counts per document)."""
    num = weights @ np.asarray(numerators, dtype=np.float64)
    den = weights @ np.asarray(denominators, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def pairwise_cosine_replicates(unit_sums, unit_sq, unit_counts, weights: np.ndarray) -> np.ndarray:
    """Replicates of the mean cosine over all pairs i != j of vectors grouped in units (sentences),
    resampling units. ``unit_sums`` (n, d): per unit the sum of its unit-normalised vectors;
    ``unit_sq`` (n,): the sum of their squared norms (1 each, 0 for a zero vector); ``unit_counts``
    (n,): how many vectors. With weight w_u per unit, the mean over ordered pairs of distinct
    (copy, vector) is (|sum_u w_u S_u|^2 - sum_u w_u^2 q_u) / ((sum_u w_u c_u)^2 - sum_u w_u^2 c_u);
    all ones gives exactly the mean of the C(N, 2) pairwise cosines. (B,)"""
    S = np.asarray(unit_sums, dtype=np.float64)
    V = weights @ S  # (B, d)
    W2 = weights * weights
    num = np.einsum("bd,bd->b", V, V) - W2 @ np.asarray(unit_sq, dtype=np.float64)
    c = np.asarray(unit_counts, dtype=np.float64)
    den = (weights @ c) ** 2 - W2 @ c
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def grouped_unit_sums(X: np.ndarray, unit_of: np.ndarray, n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sums (n_units, d), squared norms (n_units,), counts (n_units,)) of the unit-normalised rows of X
    grouped by ``unit_of`` (each row's unit index); a zero row stays zero (cosine 0 with anything)."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    U = X / np.where(norms > 0, norms, 1)
    unit_of = np.asarray(unit_of, dtype=np.int64)
    order = np.argsort(unit_of, kind="stable")
    counts = np.bincount(unit_of, minlength=n_units)
    sums = np.zeros((n_units, X.shape[1]))
    if len(order):
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        has = counts > 0
        sums[has] = np.add.reduceat(U[order], starts[has], axis=0)
    sq = np.bincount(unit_of, weights=(norms[:, 0] > 0).astype(float), minlength=n_units)
    return sums, sq, counts.astype(float)


def cosine_replicates(X, unit_of, n_units: int, weights: np.ndarray) -> np.ndarray:
    """Replicates of the mean pairwise cosine of the rows of X (N, d), row i in unit ``unit_of[i]``,
    resampling units with ``weights`` (B, n_units). (B,)"""
    return pairwise_cosine_replicates(*grouped_unit_sums(X, unit_of, n_units), weights)


def difference_replicates(rep_a, rep_b, paired: bool, seed: int = SEED) -> np.ndarray:
    """Replicates of a - b from each side's replicates. ``paired``: both were drawn with the same
    weights over the same units (same order, same seed), so replicate b of each is the same resample;
    else b's replicates are shuffled (seeded) so the two sides are resampled independently."""
    a, b = np.asarray(rep_a, dtype=np.float64), np.asarray(rep_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"replicates differ in shape: {a.shape} vs {b.shape}")
    if not paired:
        b = b[np.random.default_rng([int(seed), 1]).permutation(len(b))]
    return a - b


def paired_difference(a, b, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED) -> dict:
    """Mean of a - b over units both saw (a, b aligned (n,)): point, interval, replicates."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values must align: {a.shape} vs {b.shape}")
    W = resample_weights(len(a), resamples, seed)
    rep = mean_replicates(a - b, W)
    return {"point": float(np.mean(a - b)), "interval": interval(rep, level).tolist(), "replicates": rep}


def unpaired_difference(a, b, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED) -> dict:
    """Mean of a minus mean of b, resampling each side's units independently."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rep_a = mean_replicates(a, resample_weights(len(a), resamples, seed))
    rep_b = mean_replicates(b, resample_weights(len(b), resamples, seed + 1))
    rep = rep_a - rep_b
    return {"point": float(a.mean() - b.mean()), "interval": interval(rep, level).tolist(), "replicates": rep}


def mean_interval(values, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED) -> dict:
    """Point mean of per-unit values and its percentile interval."""
    v = np.asarray(values, dtype=np.float64)
    rep = mean_replicates(v, resample_weights(len(v), resamples, seed))
    return {"point": v.mean(axis=0), "interval": interval(rep, level), "replicates": rep}


def bootstrap_block(unit: str, n_units: int, resamples: int = RESAMPLES, level: float = LEVEL,
                    seed: int = SEED, units_id: str | None = None) -> dict:
    """The ``bootstrap`` block a result saves beside its intervals."""
    block = {"resamples": int(resamples), "level": float(level), "unit": unit, "n_units": int(n_units),
             "seed": int(seed), "method": "percentile"}
    if units_id is not None:
        block["units_id"] = units_id
    return block


def units_id(units) -> str:
    """A short fingerprint of the ordered unit identities (texts, names, ids): equal fingerprints mean
    the same units in the same order, so two results can be paired."""
    h = hashlib.sha256()
    for u in units:
        h.update(repr(u).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return "sha256:" + h.hexdigest()[:16]  # a prefix: never text that reads as a number


def rounded(x, digits: int = 6) -> list:
    """Replicates as JSON-ready lists, rounded to ``digits`` significant digits (keeps result files small)."""
    a = np.asarray(x, dtype=np.float64)
    out = np.array([float(f"{v:.{digits}g}") if np.isfinite(v) else np.nan for v in a.ravel()]).reshape(a.shape)
    return out.tolist()


# ----------------------------------------------------------------------------- verdicts


def verdict(point_diffs, intervals, claimed_sign: int) -> tuple[str, str]:
    """(verdict, reason) over seeds. ``point_diffs`` (one per seed), ``intervals`` ((lo, hi) per
    seed) of the compared difference; ``claimed_sign`` +1 (the claim says the difference is > 0) or
    -1 (< 0). HOLDS when every seed's interval excludes the opposite direction (lies strictly on the
    claimed side of 0), FAILS when every seed's interval excludes the claimed direction, else
    INCONCLUSIVE with the reason: seeds disagree (some seed's evidence points the other way from
    another's), or the interval crosses zero."""
    if claimed_sign not in (1, -1):
        raise ValueError(f"claimed_sign must be +1 or -1, got {claimed_sign}")
    ivs = [tuple(map(float, iv)) for iv in intervals]
    pts = [float(p) for p in point_diffs]
    if not ivs or len(ivs) != len(pts):
        raise ValueError("need one point difference and one interval per seed")
    if any(not (np.isfinite(lo) and np.isfinite(hi)) for lo, hi in ivs) or not np.isfinite(pts).all():
        return INCONCLUSIVE, "an interval or difference is not a finite number"
    side = [1 if lo > 0 else -1 if hi < 0 else 0 for lo, hi in ivs]  # +1 above 0, -1 below, 0 crosses
    claimed = [s == claimed_sign for s in side]
    opposite = [s == -claimed_sign for s in side]
    n = f" ({len(ivs)} seeds)" if len(ivs) > 1 else ""
    if all(claimed):
        return HOLDS, f"every interval excludes the opposite direction{n}"
    if all(opposite):
        return FAILS, f"every interval excludes the claimed direction{n}"
    signs = {int(np.sign(p)) for p in pts}
    if any(claimed) and any(opposite) or len(signs - {0}) > 1:
        return INCONCLUSIVE, SEEDS_DISAGREE
    k = sum(s == 0 for s in side)
    return INCONCLUSIVE, CROSSES_ZERO + (f" in {k} of {len(ivs)} seeds" if len(ivs) > 1 else "")
