"""When values differ only by rounding: the one tolerance behind every "constant", "tied" and "no variance".

A layer whose vectors are all one vector (a dead final LayerNorm, a broken checkpoint, [CLS] at the embedding
layer) rarely gives bit-identical numbers: a mean over sentences of different lengths, a matrix product or a
cosine rounds differently for each unit, so the "one vector" arrives as a cloud of rounding noise, a few units
in the last place wide. Tested exactly (``max == min``, ``> 0``), that noise is variance, and a measure reads
structure into it (it correlates with sentence length). Here two values count as equal when they differ by at
most :data:`ULPS` rounding steps of their dtype at their scale:

    spread <= ULPS * resolution(dtype) * scale

* ``resolution``: the relative rounding step the values were computed at: float64's machine epsilon for
  float64, float32's for float32 and for narrower storage (float16 and bfloat16 caches hold a float32
  computation rounded once more: values equal up to float32 rounding are stored equal, or, where they straddle a
  rounding boundary of the storage, one storage step apart, which is also what a genuine variation of one step
  looks like, so it is not treated as noise); 0 for integers (exact).
* ``scale``: the magnitude the noise is relative to: a column's largest absolute value for a column, the
  largest absolute value of a whole set of vectors for "every vector is the same".
* :data:`ULPS` = 256 (float32: 3.1e-5 of the scale): a mean over L tokens in float32 rounds each partial sum,
  an error that grows like log2(L) steps (pairwise summation) to sqrt(L) steps (sequential summation, the
  typical case; L up to 512), and a LayerNorm or matrix product of a constant input adds a few steps more; a few
  hundred steps cover them all. It stays 30 times below a relative spread of 1e-3, so a genuinely narrow
  column or layer keeps its numbers.

Derived quantities get the tolerance of their inputs: :func:`cosine_distance_tie` for 1 - cosine.
"""

from __future__ import annotations

import numpy as np

ULPS = 256  # rounding steps that two equal values may differ by (module docstring: why 256)


def resolution(dtype) -> float:
    """The relative rounding step values of ``dtype`` were computed at (module docstring)."""
    dt = np.dtype(dtype)
    if dt.kind != "f" and dt.kind != "c":
        return 0.0
    return float(np.finfo(np.float64).eps) if dt.itemsize >= 8 else float(np.finfo(np.float32).eps)


def tolerance(scale, dtype):
    """The largest difference between values of magnitude ``scale`` (a number or an array) and dtype ``dtype``
    that is rounding: ULPS * resolution(dtype) * |scale|."""
    return ULPS * resolution(dtype) * np.abs(scale)


def within_rounding(spread, scale, dtype):
    """True where ``spread`` (a difference, a range, or a quantity that should be 0) is at most rounding of values
    of magnitude ``scale`` and dtype ``dtype`` (arrays broadcast)."""
    return np.asarray(spread) <= tolerance(scale, dtype)


def constant_columns(lo, hi, dtype) -> np.ndarray:
    """(d,) bool: the columns whose values (column minima ``lo``, maxima ``hi``) are equal up to rounding at the
    column's own scale; every column when all the rows are one vector up to rounding at the vectors' scale (the
    largest absolute value of any column): then no column carries anything but noise."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    spread, scale = hi - lo, np.maximum(np.abs(lo), np.abs(hi))
    constant = within_rounding(spread, scale, dtype)
    if spread.size and bool(within_rounding(spread.max(), scale.max(), dtype)):
        return np.ones_like(constant)
    return constant


def same_vectors(X, dtype=None) -> bool:
    """Whether every row of ``X`` (n, d) is one vector up to rounding (``dtype``: the values' own, default X's)."""
    X = np.asarray(X)
    A = np.asarray(X, np.float64)
    return bool(constant_columns(A.min(0), A.max(0), dtype if dtype is not None else X.dtype).all())


def cosine_distance_tie(dtype) -> float:
    """The tolerance of 1 - cosine of vectors of dtype ``dtype``: a distance below it is 0 (the two vectors are one
    up to rounding), distances within it of each other are tied. Unit vectors that differ by rounding, about
    e = ULPS * resolution of their scale, have 1 - cosine = |u - v|^2 / 2 of about 2 e^2; computing 1 - cosine in
    float64 adds rounding of its own at the cosine's scale (1). (Whether a whole set of vectors is one vector up
    to rounding is :func:`same_vectors` of the unit vectors, which needs no such estimate.)"""
    e = ULPS * resolution(dtype)
    return float(2 * e * e + tolerance(1.0, np.float64))
