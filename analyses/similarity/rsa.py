"""RSA (Kriegeskorte et al. 2008), the third measure of analyses.similarity: on m units, the representational
dissimilarity matrix of each side (1 - cosine, or 1 - Pearson correlation of the rows = cosine of row-centred
rows), and the Spearman correlation of the two RDMs' upper triangles (ranks with ties averaged, then Pearson, as
scipy.stats.spearmanr does). Its degenerate cases are described in analyses.similarity.measures, which computes
every measure for every pair of layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

from analyses.rounding import cosine_distance_tie, same_vectors, within_rounding
from probes.errors import ProbeError

DISTANCES = ("cosine", "correlation")


def _rdm_rows(X: np.ndarray, distance: str) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of X (m, d) in float64 scaled to unit length (row-centred first for the correlation
    distance), (m,) bool: the rows with a direction). A zero row (constant up to rounding for the correlation
    distance) is zero in the first array."""
    if distance not in DISTANCES:
        raise ProbeError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}")
    dtype, X = np.asarray(X).dtype, np.asarray(X, np.float64)
    if distance == "correlation":
        flat = within_rounding(np.ptp(X, 1, keepdims=True), np.abs(X).max(1, keepdims=True), dtype)
        X = np.where(flat, 0.0, X - X.mean(1, keepdims=True))
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0), norms[:, 0] > 0


def _upper(Xn: np.ndarray) -> np.ndarray:
    """1 - cosine of the unit rows Xn, upper triangle (i < j, row-major)."""
    i, j = np.triu_indices(len(Xn), k=1)
    return 1.0 - (Xn @ Xn.T)[i, j]


def rdm(X: np.ndarray, distance: str = "cosine") -> np.ndarray:
    """Upper triangle (i < j, row-major; scipy's pdist order) of the RDM of X (m, d), float64. A pair with a
    zero row (a constant row for the correlation distance) has no cosine: NaN."""
    Xn, ok = _rdm_rows(X, distance)
    if not ok.all():
        Xn[~ok] = np.nan
    return _upper(Xn)


def standard_ranks(d: np.ndarray, tie: float = 0.0) -> np.ndarray | None:
    """Ranks of d (ties averaged), centred and scaled to unit norm; None if d has fewer than two entries or
    all of them are equal (within ``tie``). Entries up to ``tie`` are 0 (ties of the rounding of 1 - cosine
    of one vector with itself: :func:`analyses.rounding.cosine_distance_tie`)."""
    if len(d) < 2 or np.ptp(d) <= tie:
        return None
    r = rankdata(np.where(d <= tie, 0.0, d))
    r -= r.mean()
    norm = np.linalg.norm(r)
    return r / norm if norm > 0 else None


@dataclass
class RsaSide:
    """One layer's RSA units: which have a direction, and the ranks of the RDM over those."""

    X: Any  # (n, d) the layer (may be memory-mapped): its rows are read again when a pair needs fewer units
    rows: np.ndarray  # (m,) the RSA units
    distance: str
    ok: np.ndarray  # (m,) bool: the units whose vector is not zero (not constant, for the correlation distance)
    ranks: np.ndarray | None  # standard ranks of the RDM over the units in ok; None: no ranking

    @classmethod
    def of(cls, X, rows: np.ndarray, distance: str) -> RsaSide:
        Xn, ok = _rdm_rows(np.asarray(X[rows]), distance)
        return cls(X, rows, distance, ok, _ranks(Xn if ok.all() else Xn[ok], getattr(X, "dtype", np.float64)))

    @property
    def n_zero(self) -> int:
        return int((~self.ok).sum())

    def ranks_over(self, units: np.ndarray) -> np.ndarray | None:
        """The standard ranks of the RDM over ``units`` ((m,) bool, a subset of ``ok``)."""
        if np.array_equal(units, self.ok):
            return self.ranks
        Xn, _ = _rdm_rows(np.asarray(self.X[self.rows]), self.distance)
        return _ranks(Xn[units], getattr(self.X, "dtype", np.float64))


def _ranks(Xn: np.ndarray, dtype) -> np.ndarray | None:
    """Standard ranks of the RDM of the unit rows Xn (of values of ``dtype``); None if they are one vector."""
    return None if len(Xn) and same_vectors(Xn, dtype) else standard_ranks(_upper(Xn), cosine_distance_tie(dtype))


def _spearman(ra: np.ndarray | None, rb: np.ndarray | None) -> float:
    return float(np.clip(ra @ rb, -1.0, 1.0)) if ra is not None and rb is not None else 0.0


def rsa_pair(x: RsaSide, y: RsaSide) -> float:
    """Spearman correlation of the two sides' RDMs over the units that are non-zero on both sides (0 where
    either has no ranking: see :func:`rsa_pair_defined`)."""
    value = rsa_pair_defined(x, y)
    return 0.0 if value is None else value


def rsa_pair_defined(x: RsaSide, y: RsaSide) -> float | None:
    """:func:`rsa_pair`, None where it is undefined (an RDM of fewer than two entries or of equal entries)."""
    both = x.ok & y.ok
    ra, rb = x.ranks_over(both), y.ranks_over(both)
    return None if ra is None or rb is None else _spearman(ra, rb)
