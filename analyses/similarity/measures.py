"""The similarity measures behind analyses.similarity: linear CKA (debiased, streamed), SVCCA, RSA.

Inputs are point clouds of the same n units, X (n, d_x) and Y (n, d_y); row i of X and row i of Y
describe the same unit. Pure numpy/scipy; nothing here knows about models.

* **Linear CKA** (Kornblith et al. 2019) with the unbiased HSIC estimator of Song et al. (2012), as
  Nguyen et al. (2021) use it: CKA = HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L)), K = X X^T,
  L = Y Y^T. With K~, L~ the Grams with zeroed diagonals,

      HSIC_u = [tr(K~ L~) + (1'K~1)(1'L~1) / ((n-1)(n-2)) - 2 1'K~L~1 / (n-2)] / (n(n-3)).

  For linear kernels every term is a sum over rows, so no n x n Gram is built. With a_i = |x_i|^2,
  b_i = |y_i|^2, s_x = X^T 1, s_y = Y^T 1 and C = X^T Y (d_x, d_y):

      tr(K~ L~) = |C|_F^2 - sum_i a_i b_i          1'K~1 = |s_x|^2 - sum_i a_i
      1'K~L~1   = s_x' C s_y - s_y'(Y^T a) - s_x'(X^T b) + sum_i a_i b_i

  C, s_x, s_y, X^T b, Y^T a and the scalar sums are accumulated over mini-batches of rows, so
  memory is O(d_x d_y + batch d), whatever n. HSIC_u is exactly invariant to translating X or Y
  (it is a U-statistic of products of differences), so columns are first shifted by their mean
  (one streaming pass) to keep the sums small: same value, less cancellation. ``debiased=False``
  gives the usual biased estimator |Xc^T Yc|_F^2 / (n-1)^2 (Xc: centred columns), which sits near
  0.2 on independent Gaussian data with n=200, d=50 where the debiased one is near 0.
* **SVCCA** (Raghu et al. 2017): per side, PCA keeping the fewest leading directions that explain
  ``variance`` (default 99%) of the variance; then CCA between the two reduced spaces; the score is
  the mean of the min(k_x, k_y) canonical correlations. Both steps are read off the same centred
  d x d sums as CKA: the PCA from the eigendecomposition of Xc^T Xc, and the canonical correlations
  as the singular values of Λx^{-1/2} Vx^T (Xc^T Yc) Vy Λy^{-1/2} (the whitened reduced bases are
  orthonormal, so one SVD gives all correlations; Björck & Golub 1973). scikit-learn's CCA is not
  used: it fits one component at a time by NIPALS power iterations to a tolerance with deflation,
  which is approximate and slow for the hundreds of components kept here.
* **RSA** (Kriegeskorte et al. 2008): on m units, the representational dissimilarity matrix of each
  side (1 - cosine, or 1 - Pearson correlation of the rows = cosine of row-centred rows), and the
  Spearman correlation of the two RDMs' upper triangles (ranks with ties averaged, then Pearson,
  as scipy.stats.spearmanr does).

Degenerate cases (numbers, never NaN, and a mask of the undefined ones); "equal" and "positive" are up to
rounding at the values' scale and dtype (analyses.rounding: rows that are one vector up to rounding have no
variance, not a structure of rounding noise):
* a column whose values are all equal carries no variance; it is dropped before anything else (CKA
  and SVCCA are exactly invariant to it); when the rows are one vector, every column is;
* a side with no non-constant column, or whose HSIC_u(K, K) is not positive, has no measurable
  structure: its CKA and SVCCA with anything (also with itself) are 0/0, undefined. The functions give 0
  there, and :func:`similarity_matrices` marks those cells in its ``undefined`` masks: a result writes
  null for them and a figure never draws them as a number;
* a zero row (a constant row for the correlation distance) has no direction, so its cosine with
  anything is undefined (:func:`rdm` gives NaN there): RSA leaves such a unit out of both RDMs of
  every pair of layers where either side has it zero (as analyses.anisotropy leaves zero vectors out)
  and counts them per layer; an RDM with fewer than two entries, whose entries are all equal, or whose
  unit vectors are all one vector, has no ranking, and its RSA with anything is undefined (0, and
  marked in ``undefined``); a distance of rounding size is 0 (the two units are one vector).

    $ python -c "import numpy as np; from analyses.similarity.measures import linear_cka; \
          X = np.random.randn(500, 20); print(linear_cka(X, X @ np.random.randn(20, 20)))"
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyses.rounding import constant_columns, within_rounding
from analyses.similarity.rsa import DISTANCES, RsaSide, rdm, rsa_pair, rsa_pair_defined, standard_ranks
from probes.errors import ProbeError

BATCH_ROWS = 4096  # rows per mini-batch of the streamed sums
MAX_CROSS = 2**25  # at most this many float64 cross-product entries at once (256 MiB); more: several passes
RANK_TOL = 1e-12  # eigenvalues below RANK_TOL * the largest count as zero (rank deficiency)
MEASURES = ("cka", "svcca", "rsa")
__all__ = ["DISTANCES", "MEASURES", "RsaSide", "rdm", "rsa_pair", "rsa_pair_defined", "standard_ranks",
           "similarity_matrices", "linear_cka", "linear_cka_explicit", "svcca", "rsa"]  # RSA's own: .rsa


# ----------------------------------------------------------------------------- streamed sums


@dataclass
class Layer:
    """One representation (n, d) prepared for streaming: column means and the non-constant columns."""

    X: np.ndarray  # (n, d) any float dtype; may be memory-mapped
    keep: np.ndarray  # (d,) bool: columns whose max and min differ by more than rounding
    mean: np.ndarray  # (d_kept,) float64 column means of the kept columns

    @classmethod
    def of(cls, X, batch_rows: int = BATCH_ROWS) -> Layer:
        if np.ndim(X) != 2 or len(X) < 4:
            raise ProbeError(f"a representation must be an (n, d) matrix with n >= 4, got shape {np.shape(X)}")
        n, d = X.shape
        total, lo, hi = np.zeros(d), np.full(d, np.inf), np.full(d, -np.inf)
        for s in range(0, n, batch_rows):
            b = np.asarray(X[s:s + batch_rows])  # min and max are exact in any float dtype; sums in float64
            b = b if b.dtype.kind == "f" else b.astype(np.float64)
            total += b.sum(0, dtype=np.float64)
            lo, hi = np.minimum(lo, b.min(0)), np.maximum(hi, b.max(0))
        if not (np.isfinite(total).all() and np.isfinite(lo).all() and np.isfinite(hi).all()):  # NaN, inf propagate
            raise ProbeError("representations contain NaN or infinite values")
        keep = ~constant_columns(lo, hi, getattr(X, "dtype", np.float64))
        return cls(X, keep, (total / n)[keep])

    @property
    def n(self) -> int:
        return len(self.X)

    @property
    def empty(self) -> bool:
        return not self.keep.any()

    def batch(self, s: int, batch_rows: int) -> np.ndarray:
        """(b, d_kept) float64 rows s..s+b, kept columns, shifted by the column means."""
        return np.asarray(self.X[s:s + batch_rows], np.float64)[:, self.keep] - self.mean


@dataclass
class Sums:
    """The row sums HSIC_u and the centred cross-products need, for one pair (X, Y)."""

    n: int
    C: np.ndarray  # (d_x, d_y) X^T Y
    sx: np.ndarray  # (d_x,) X^T 1
    sy: np.ndarray  # (d_y,) Y^T 1
    xb: np.ndarray  # (d_x,) X^T b, b_i = |y_i|^2
    ya: np.ndarray  # (d_y,) Y^T a, a_i = |x_i|^2
    sab: float  # sum_i a_i b_i
    sa: float  # sum_i a_i
    sb: float  # sum_i b_i

    def centred_cross(self) -> np.ndarray:
        """(d_x, d_y) Xc^T Yc with exactly centred columns."""
        return self.C - np.outer(self.sx, self.sy) / self.n


def pair_sums(x: Layer, y: Layer, batch_rows: int = BATCH_ROWS) -> Sums:
    """Accumulate :class:`Sums` of (x, y) over mini-batches of rows: memory O(d_x d_y + batch d)."""
    if x.n != y.n:
        raise ProbeError(f"the two representations describe different numbers of units: {x.n} != {y.n}")
    dx, dy = int(x.keep.sum()), int(y.keep.sum())
    C, sx, sy, xb, ya = np.zeros((dx, dy)), np.zeros(dx), np.zeros(dy), np.zeros(dx), np.zeros(dy)
    sab = sa = sb = 0.0
    for s in range(0, x.n, batch_rows):
        X = x.batch(s, batch_rows)  # (b, d_x)
        Y = X if y is x else y.batch(s, batch_rows)  # (b, d_y)
        a, b = np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", Y, Y)  # (b,) squared row norms
        C += X.T @ Y
        sx += X.sum(0)
        sy += Y.sum(0)
        xb += X.T @ b
        ya += Y.T @ a
        sab, sa, sb = sab + float(a @ b), sa + float(a.sum()), sb + float(b.sum())
    return Sums(x.n, C, sx, sy, xb, ya, sab, sa, sb)


def _stack_batch(layers: list[Layer], s: int, batch_rows: int, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """Rows s..s+b of every layer, centred, side by side as one ``dtype`` (b, sum d_kept) block, and their
    squared row norms (b, layers). The means are rounded to ``dtype`` before they are subtracted: a constant
    shift of a column, to which HSIC_u is exactly invariant (and the centred cross-products are re-centred
    with the column sums)."""
    b = min(batch_rows, layers[0].n - s)
    block = np.empty((b, sum(len(a.mean) for a in layers)), dtype)
    norms, o = np.empty((b, len(layers))), 0
    for k, a in enumerate(layers):
        raw = np.asarray(a.X[s:s + batch_rows])
        raw = raw if a.keep.all() else raw[:, a.keep]
        part = block[:, o:o + len(a.mean)]
        np.subtract(raw, a.mean.astype(dtype), out=part, casting="unsafe")
        norms[:, k] = np.einsum("ij,ij->i", part, part)
        o += len(a.mean)
    return block, norms


def stacked_sums(xs: list[Layer], ys: list[Layer] | None = None, batch_rows: int = BATCH_ROWS,
                 dtype=np.float32) -> tuple[dict, list[Sums], list[Sums]]:
    """:class:`Sums` of every pair (xs[i], ys[j]) and of every layer with itself, from one pass over each
    side's stacked centred layers: per mini-batch of rows, one float32 matrix product of the stacked blocks
    (all cross-products X_i^T Y_j at once), accumulated in float64 (so a product's rounding error stays
    that of one batch), the row norms and the other small sums in float64. ``ys=None``: xs with itself.
    ``dtype``: of the products (float64: the exact streamed sums of :func:`pair_sums`, at ~2x the time).
    Returns ({(i, j): Sums}, [Sums of xs[i] with itself], [Sums of ys[j] with itself])."""
    same = ys is None
    ys = xs if ys is None else ys
    dx, dy = sum(int(a.keep.sum()) for a in xs), [int(b.keep.sum()) for b in ys]
    if dx * sum(dy) > MAX_CROSS and len(ys) > 1:  # bound the float64 cross-products: ys in groups, a pass each
        groups: list[list[int]] = []
        cur: list[int] = []
        for j, d in enumerate(dy):
            if cur and dx * (sum(dy[k] for k in cur) + d) > MAX_CROSS:
                groups.append(cur)
                cur = []
            cur.append(j)
        groups.append(cur)
        pairs: dict[tuple[int, int], Sums] = {}
        self_y_of: dict[int, Sums] = {}  # ys[j] with itself
        for group in groups:
            p, self_x, sy_g = stacked_sums(xs, [ys[j] for j in group], batch_rows, dtype)
            pairs.update({(i, group[j]): v for (i, j), v in p.items()})
            self_y_of.update(zip(group, sy_g))
        return pairs, self_x, self_x if same else [self_y_of[j] for j in range(len(ys))]
    n = xs[0].n
    if any(a.n != n for a in [*xs, *ys]):
        raise ProbeError(f"the two representations describe different numbers of units: "
                         f"{sorted({a.n for a in [*xs, *ys]})}")
    ox = np.concatenate([[0], np.cumsum([int(a.keep.sum()) for a in xs])])
    oy = ox if same else np.concatenate([[0], np.cumsum([int(a.keep.sum()) for a in ys])])
    C = np.zeros((ox[-1], oy[-1]))
    sx, sy = np.zeros(ox[-1]), np.zeros(oy[-1])
    xa, xb, ya = np.zeros((ox[-1], len(xs))), np.zeros((ox[-1], len(ys))), np.zeros((oy[-1], len(xs)))
    yb = np.zeros((oy[-1], len(ys)))
    gx = [np.zeros((d, d)) for d in np.diff(ox)] if not same else []
    gy = [np.zeros((d, d)) for d in np.diff(oy)] if not same else []
    aa, ab, bb = np.zeros((len(xs), len(xs))), np.zeros((len(xs), len(ys))), np.zeros((len(ys), len(ys)))
    sa, sb = np.zeros(len(xs)), np.zeros(len(ys))  # sum_i a_i, sum_i b_i per layer
    prod = np.empty((ox[-1], oy[-1]), dtype)  # each batch's product, in one buffer (no fresh pages per batch)
    for s in range(0, n, batch_rows):
        X, A = _stack_batch(xs, s, batch_rows, dtype)
        Y, B = (X, A) if same else _stack_batch(ys, s, batch_rows, dtype)
        C += np.matmul(X.T, Y, out=prod)  # the one big float32 product
        # column sums ride along with the products by the norms, one pass over each side: X^T [A | B | 1]
        AB1 = np.ones((len(A), len(xs) + (0 if same else len(ys)) + 1), dtype)
        AB1[:, :len(xs)] = A
        if not same:
            AB1[:, len(xs):-1] = B
        xab1 = X.T @ AB1
        xa += xab1[:, :len(xs)]
        sx += xab1[:, -1]
        sa += A.sum(0)
        if same:
            aa += A.T @ A
            continue
        yab1 = Y.T @ AB1
        sy += yab1[:, -1]
        yb += yab1[:, len(xs):-1]
        sb += B.sum(0)
        xb += xab1[:, len(xs):-1]
        ya += yab1[:, :len(xs)]
        ab += A.T @ B
        aa += A.T @ A
        bb += B.T @ B
        for k, g in enumerate(gx):
            g += X[:, ox[k]:ox[k + 1]].T @ X[:, ox[k]:ox[k + 1]]
        for k, g in enumerate(gy):
            g += Y[:, oy[k]:oy[k + 1]].T @ Y[:, oy[k]:oy[k + 1]]
    if same:
        sy, xb, ya, yb, ab, bb, sb = sx, xa, xa, xa, aa, aa, sa
        gx = gy = [C[ox[k]:ox[k + 1], ox[k]:ox[k + 1]] for k in range(len(xs))]
    rx, ry = [slice(ox[k], ox[k + 1]) for k in range(len(xs))], [slice(oy[k], oy[k + 1]) for k in range(len(ys))]
    pairs = {(i, j): Sums(n, C[rx[i], ry[j]], sx[rx[i]], sy[ry[j]], xb[rx[i], j], ya[ry[j], i], float(ab[i, j]),
                          float(sa[i]), float(sb[j]))
             for i in range(len(xs)) for j in range(len(ys))}
    self_x = [Sums(n, gx[i], sx[rx[i]], sx[rx[i]], xa[rx[i], i], xa[rx[i], i], float(aa[i, i]), float(sa[i]),
                   float(sa[i])) for i in range(len(xs))]
    self_y = self_x if same else [Sums(n, gy[j], sy[ry[j]], sy[ry[j]], yb[ry[j], j], yb[ry[j], j], float(bb[j, j]),
                                       float(sb[j]), float(sb[j])) for j in range(len(ys))]
    return pairs, self_x, self_y


def hsic(s: Sums, debiased: bool = True) -> float:
    """HSIC of the linear kernels from the streamed sums (unbiased estimator of Song et al. 2012,
    or the biased |Xc^T Yc|_F^2 / (n-1)^2)."""
    n = s.n
    if not debiased:
        Cc = s.centred_cross()
        return float((Cc * Cc).sum()) / (n - 1) ** 2
    tr = float((s.C * s.C).sum()) - s.sab
    k1 = float(s.sx @ s.sx) - s.sa
    l1 = float(s.sy @ s.sy) - s.sb
    kl = float(s.sx @ s.C @ s.sy) - float(s.sy @ s.ya) - float(s.sx @ s.xb) + s.sab
    return (tr + k1 * l1 / ((n - 1) * (n - 2)) - 2.0 * kl / (n - 2)) / (n * (n - 3))


def _cka(hxy: float, hxx: float, hyy: float) -> float:
    return hxy / np.sqrt(hxx * hyy) if hxx > 0 and hyy > 0 else 0.0


def has_structure(layer: Layer, h: float, s: Sums, dtype) -> bool:
    """Whether a side's CKA is defined: it has a non-constant column and its HSIC_u(K, K) ``h`` (from its own
    :class:`Sums` ``s``, products in ``dtype``) is positive beyond rounding, relative to the Gram diagonals the
    estimator subtracts (sum_i a_i^2 / (n (n - 3)): a cancellation whose rounding is of that size)."""
    return not layer.empty and not within_rounding(h, s.sab / (s.n * (s.n - 3)), dtype)


# ----------------------------------------------------------------------------- SVCCA from the same sums


@dataclass
class Basis:
    """The whitened leading PCA directions of one side: Vk Λk^{-1/2} (d_kept, k)."""

    P: np.ndarray
    k: int


def pca_basis(gram: np.ndarray, variance: float) -> Basis:
    """Fewest leading directions of the centred Gram Xc^T Xc (d, d) explaining ``variance``."""
    if gram.size == 0:
        return Basis(np.zeros((0, 0)), 0)
    lam, V = np.linalg.eigh(gram)
    lam, V = lam[::-1], V[:, ::-1]  # descending
    if lam[0] <= 0:
        return Basis(np.zeros((len(gram), 0)), 0)
    rank = int((lam > RANK_TOL * lam[0]).sum())
    frac = np.cumsum(lam[:rank]) / lam[:rank].sum()
    k = min(int(np.searchsorted(frac, variance - 1e-12)) + 1, rank)
    return Basis(V[:, :k] / np.sqrt(lam[:k]), k)


def canonical_correlations(bx: Basis, by: Basis, cross: np.ndarray) -> np.ndarray:
    """(min(k_x, k_y),) canonical correlations of the reduced spaces, descending, in [0, 1]."""
    if bx.k == 0 or by.k == 0:
        return np.zeros(0)
    return np.clip(np.linalg.svd(bx.P.T @ cross @ by.P, compute_uv=False), 0.0, 1.0)


# ----------------------------------------------------------------------------- matrices over layers


def similarity_matrices(xs: Sequence | np.ndarray, ys: Sequence | np.ndarray | None = None,
                        measures: Sequence[str] = MEASURES, *,
                        variance: float = 0.99, rsa_rows: np.ndarray | None = None, distance: str = "cosine",
                        debiased: bool = True, batch_rows: int = BATCH_ROWS, progress=None,
                        dtype=np.float32) -> dict:
    """Every measure for every pair (xs[i], ys[j]) of representations of the same n units.

    ``ys=None`` compares xs with itself (only i <= j is computed; the matrix is symmetric).
    ``rsa_rows``: the units the RDMs use (default all). ``progress``: a callable advanced once per
    pair. ``dtype``: of the cross-products (float32: one float32 GEMM per batch of rows, accumulated in
    float64, within 1e-6 of the float64 closed form; float64: exact sums).
    Returns {measure: (len(xs), len(ys)) array, "svcca_dims": ([k_x], [k_y]),
    "constant": ([[dropped columns] per x], [...] per y), "rsa_zero": ([RSA units with a zero vector (left out
    of that layer's RDMs)] per x, [...] per y; empty lists without RSA), "undefined": {measure: (len(xs),
    len(ys)) bool, True where the measure is undefined (a side without structure; its value there is 0)}}."""
    unknown = [m for m in measures if m not in MEASURES]
    if unknown:
        raise ProbeError(f"unknown measure {unknown[0]!r}; choose from {', '.join(MEASURES)}")
    if not 0 < variance <= 1:
        raise ProbeError(f"the SVCCA variance must be in (0, 1], got {variance}")
    same = ys is None
    lx = [Layer.of(X, batch_rows) for X in xs]
    ly = lx if ys is None else [Layer.of(Y, batch_rows) for Y in ys]
    out: dict[str, Any] = {m: np.zeros((len(lx), len(ly))) for m in measures}
    undefined = {m: np.zeros((len(lx), len(ly)), bool) for m in measures}
    want_sums = "cka" in measures or "svcca" in measures
    pairs, self_x, self_y = stacked_sums(lx, None if same else ly, batch_rows, dtype) if want_sums else ({}, [], [])
    hx, hy = [hsic(s, debiased) for s in self_x], [hsic(s, debiased) for s in self_y]
    sx = [has_structure(a, h, s, dtype) for a, h, s in zip(lx, hx, self_x)]  # CKA defined on this side
    sy = sx if same else [has_structure(b, h, s, dtype) for b, h, s in zip(ly, hy, self_y)]
    bx = [pca_basis(s.centred_cross(), variance) for s in self_x] if "svcca" in measures else []
    by = bx if same else [pca_basis(s.centred_cross(), variance) for s in self_y] if "svcca" in measures else []
    rx: list[RsaSide] = []
    ry: list[RsaSide] = []
    if "rsa" in measures:
        rows = np.arange(lx[0].n) if rsa_rows is None else np.asarray(rsa_rows)
        rx = [RsaSide.of(a.X, rows, distance) for a in lx]
        ry = rx if same else [RsaSide.of(b.X, rows, distance) for b in ly]
    for i in range(len(lx)):
        for j in range(len(ly)):
            if same and j < i:
                for m in measures:
                    out[m][i, j], undefined[m][i, j] = out[m][j, i], undefined[m][j, i]
                continue
            if want_sums:
                s = pairs[i, j]
                if "cka" in measures:
                    undefined["cka"][i, j] = not (sx[i] and sy[j])
                    out["cka"][i, j] = 0.0 if undefined["cka"][i, j] else _cka(hsic(s, debiased), hx[i], hy[j])
                if "svcca" in measures:
                    rho = canonical_correlations(bx[i], by[j], s.centred_cross())
                    out["svcca"][i, j] = float(rho.mean()) if rho.size else 0.0
                    undefined["svcca"][i, j] = not rho.size
            if "rsa" in measures:
                value = rsa_pair_defined(rx[i], ry[j])
                out["rsa"][i, j], undefined["rsa"][i, j] = (0.0, True) if value is None else (value, False)
            if progress is not None:
                progress()
    for m in measures:
        if not np.isfinite(out[m]).all():  # cannot happen by construction; never write a wrong number
            raise RuntimeError(f"non-finite {m} value: a bug in analyses.similarity.measures")
    out["svcca_dims"] = ([b.k for b in bx], [b.k for b in by])
    out["constant"] = ([np.flatnonzero(~a.keep).tolist() for a in lx], [np.flatnonzero(~b.keep).tolist() for b in ly])
    out["rsa_zero"] = ([r.n_zero for r in rx], [r.n_zero for r in ry])
    out["undefined"] = undefined
    return out


# ----------------------------------------------------------------------------- single pairs


def linear_cka(X, Y, debiased: bool = True, batch_rows: int = BATCH_ROWS, dtype=np.float32) -> float:
    """Linear CKA of X (n, d_x) and Y (n, d_y), streamed over mini-batches of rows: the analysis's own path
    (:func:`similarity_matrices`: float32 products accumulated in float64, within 1e-6 of the float64 closed
    form); ``dtype=np.float64`` for exact float64 sums at about twice the time."""
    same = Y is X  # one set of sums for both sides: exactly 1 with itself, whatever the rounding of the products
    return float(similarity_matrices([X], None if same else [Y], ["cka"], debiased=debiased, batch_rows=batch_rows,
                                     dtype=dtype)["cka"][0, 0])


def linear_cka_explicit(X, Y, debiased: bool = True) -> float:
    """Linear CKA from the explicit n x n Gram matrices (the reference the streamed sums must match)."""
    K = np.asarray(X, np.float64) @ np.asarray(X, np.float64).T
    L = np.asarray(Y, np.float64) @ np.asarray(Y, np.float64).T

    def h(K, L):
        n = len(K)
        if not debiased:
            H = np.eye(n) - 1.0 / n
            return float(np.trace(K @ H @ L @ H)) / (n - 1) ** 2
        K, L = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
        return float((K * L).sum() + K.sum() * L.sum() / ((n - 1) * (n - 2))
                     - 2.0 / (n - 2) * (K.sum(0) @ L.sum(0))) / (n * (n - 3))

    return _cka(h(K, L), h(K, K), h(L, L))


def svcca(X, Y, variance: float = 0.99) -> float:
    """SVCCA of X (n, d_x) and Y (n, d_y): mean canonical correlation of the 99%-variance PCA spaces."""
    return float(similarity_matrices([X], [Y], ["svcca"], variance=variance, dtype=np.float64)["svcca"][0, 0])


def rsa(X, Y, distance: str = "cosine") -> float:
    """Spearman correlation of the RDMs of X (m, d_x) and Y (m, d_y)."""
    return float(similarity_matrices([X], [Y], ["rsa"], distance=distance)["rsa"][0, 0])
