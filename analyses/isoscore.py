"""IsoScore: how uniformly does a layer use its dimensions? (Rudman et al. 2022, the ``isoscore`` package)

The mean cosine of random pairs (analyses.anisotropy) can mislead: once the mean is removed it is blind to a
few dominant directions. IsoScore looks at the spectrum of the point cloud instead. For points X (N, n), the
paper's algorithm, transcribed step for step in :func:`isoscore`:

1. reorient the points by PCA (the principal components of their covariance);
2. the variance vector Sigma_D: the variance along each principal component (the eigenvalues of the sample
   covariance, ddof 1; the ``isoscore`` package takes ``torch.linalg.svdvals(torch.cov(X.T))``);
3. normalise it to length sqrt(n): Sigma_hat = sqrt(n) Sigma_D / ||Sigma_D||;
4. the distance to the identity's variance vector (1, ..., 1), scaled to [0, 1]:
   delta = ||Sigma_hat - 1|| / sqrt(2 (n - sqrt(n)));
5. the isotropy defect in dimensions: k = (n - delta^2 (n - sqrt(n)))^2 / n, the fraction phi = k / n;
6. IsoScore = (n phi - 1) / (n - 1) = ((n - delta^2 (n - sqrt(n)))^2 - n) / (n (n - 1)), in [0, 1].

1 = every direction carries the same variance (isotropic); 0 = all variance on one line. Algebraically the
score equals (PR - 1) / (n - 1) with PR = (tr C)^2 / tr C^2 = (sum lambda)^2 / sum lambda^2 the participation
ratio of the covariance's eigenvalues (:func:`participation_ratio`).

**What a result reports, and why not the paper's number itself.** The paper's IsoScore of N points (kept as
``isoscore_plugin``, equal to the ``isoscore`` package) is a biased estimate of the IsoScore of the
distribution the points come from: the sample covariance's tr C^2 carries about (tr Sigma)^2 / N_eff of
noise, so PR is pulled down by about PR^2 / N_eff (N_eff: the number of independent points; tokens of one
sentence are not), while its standard error is only about 2 PR^1.5 / N_eff. For a spread spectrum (PR >> 4)
the bias is several standard errors: on Gaussian tokens with a known spectrum (n = 64, 1000 tokens in 200
sentences) the plug-in is 1.9 standard errors low, and its percentile bootstrap over sentences covers the
true value in 2% of samples, not 95%. A resample that draws a sentence twice has fewer distinct points and is
biased further, which is why a percentile interval can exclude its own point (MiniLM's last-layer tokens:
0.281 with [0.230, 0.263]). Corrections of the interval alone cannot repair this: the basic interval
2 theta - q and BCa correct towards the true value, so they exclude the plug-in point whenever the percentile
interval does (BCa's bias constant is infinite once every replicate lies below it), and half-sampling
recomputes the plug-in at N / 2, where its bias doubles.

So ``isoscore`` is the **unbiased estimator** (:func:`isoscore_estimates`): PR = U_T / U_F, where U_T and U_F
average |a - b|^2 |c - e|^2 and ((a - b) . (c - e))^2 over points a, b, c, e of four *different* sentences.
Points of different sentences are independent, so the two averages are unbiased for 4 (tr Sigma)^2 and
4 tr Sigma^2 whatever the distribution and however the tokens of a sentence depend on each other; a ratio of
two unbiased averages keeps only a second-order bias (about the squared relative standard error). It is
clipped to [0, 1], the range of IsoScore.

Cost: :func:`isoscore_estimate` computes the sample's estimate in O(N n^2) closed forms (n the dimension); the
bootstrap's estimates (:func:`isoscore_estimates`) are quadratic forms in each resample's weights over pairs of
sentences, O(n_sentences^2) per resample however they are written (the closed forms would need an (n, n) matrix
per resample, O(N n^2) each), so they take them from Gram blocks of the points, built once.

Intervals: percentile bootstrap resampling sentences (a token goes with its sentence), each resample's value
the same estimator over 4-tuples of *different original* sentences, weighted by how often each is drawn: a
sentence drawn twice never pairs with its copy, so a duplicate adds no self-pair (what biased the plug-in's
resamples), the resamples centre on the point estimate and the percentile interval holds it; two models
resampled with the same weights give paired replicates of their difference (the claims). Checked by simulation
(tests/test_isoscore_coverage.py): coverage of the true IsoScore and of a paired difference near 95% on
planted clustered Gaussian tokens, the point inside its interval in every sample.

For every layer l = 0..L, on N random token occurrences (special tokens excluded unless --keep-special; the
same draw as analyses.anisotropy) and on the sentence vectors of the sampled sentences.

    $ python -m analyses.isoscore --model minilm-l6 [--model bert-small] [--n-sentences 5000] [--n-tokens 5000]

Writes out/results/isoscore/<model>.json (+ .csv, one row per layer) and out/figures/isoscore.{png,pdf}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity
from analyses.inputs import Sentences
from analyses.layer_points import LEVELS, ByLevel, clouds, draw_tokens, finite, level_panel, plot_levels
from analyses.records import Definitions, omitted
from analyses.rounding import same_vectors
from probes.capture.activations import Activations
from probes.config import arg, tqdm_class
from probes.errors import ProbeError

YLABEL = "unbiased estimate of IsoScore\n(1 = isotropic)"  # not the paper's plug-in on the points (isoscore_plugin)
BLOCK_ELEMENTS = 2**22  # Gram rows per block x points: 32 MiB of float64 per block
REPLICATE_ELEMENTS = 2**21  # resamples per block x max(points, sentences): about ten such float64 arrays (16 MiB)


@dataclass
class Config(SentenceConfig):
    """IsoScore (Rudman et al. 2022) of token and sentence vectors at every layer, with bootstrap intervals."""

    n_tokens: int = arg(5000, "random token occurrences per layer (the anisotropy analysis's draw)", min=3)
    keep_special: bool = arg(False, "include special tokens ([CLS], [SEP], <s>, ...) in the token sample")
    resamples: int = arg(stats.RESAMPLES, "bootstrap resamples of sentences", min=1)


# ----------------------------------------------------------------------------- the score


def isoscore(points) -> float:
    """IsoScore of the rows of ``points`` (N, n), transcribed from Rudman et al. (2022), Algorithm 1, as the
    ``isoscore`` package (2.0.1) computes it: the variance vector is the spectrum of the sample covariance.
    NaN when the points have no variance or n < 2."""
    X = np.asarray(points, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ProbeError(f"IsoScore needs at least 2 points as rows of an (N, n) array, got shape {X.shape}")
    n = X.shape[1]
    if n < 2 or not np.isfinite(X).all():  # a state that holds NaN or inf: no covariance
        return float("nan")
    cov = np.cov(X, rowvar=False)  # (n, n), ddof 1
    variances = np.clip(np.linalg.eigvalsh(cov)[::-1], 0, None)  # steps 1-2: variance along each PC
    norm = np.linalg.norm(variances)
    if not norm > 0:
        return float("nan")
    normalised = variances * np.sqrt(n) / norm  # step 3
    defect = np.linalg.norm(normalised - 1) / np.sqrt(2 * (n - np.sqrt(n)))  # step 4
    k = (n - defect**2 * (n - np.sqrt(n)))**2 / n  # step 5: dimensions uniformly used
    return float((n * (k / n) - 1) / (n - 1))  # step 6


def participation_ratio(eigenvalues) -> float:
    """(sum lambda)^2 / sum lambda^2; IsoScore = (PR - 1) / (n - 1) for n dimensions."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    return float(lam.sum()**2 / np.sum(lam**2))


def _distinct4(total, rowsums, squares):
    """The sum over ordered 4-tuples (u, v, t, r) of distinct units of A_uv A_tr, for a symmetric (n, n) A with
    zero diagonal, from its sum (B,), its row sums (B, n) and the sum of its squares (B,) (inclusion-exclusion:
    the tuples where one of u, v meets one of t, r, then the two where both pairs coincide)."""
    return total**2 - 4 * np.einsum("bn,bn->b", rowsums, rowsums) + 2 * squares


def isoscore_estimates(X, unit_of, weights) -> np.ndarray:
    """The unbiased IsoScore (the module's docstring says why) under each row of ``weights`` (B, n_units):
    how often each unit (sentence) is drawn, every point of unit u coming with it; a row of ones gives the
    sample's estimate. X (N, n) points, ``unit_of`` (N,) the unit of each. (B,)

    PR = U_T / U_F, both sums over ordered 4-tuples (u, v, t, r) of distinct units, weighted w_u w_v w_t w_r,
    of kernels summed over one point of each unit, a, b, c, e: U_T of |a - b|^2 |c - e|^2 (expectation
    4 (tr Sigma)^2 per 4 points) and U_F of ((a - b) . (c - e))^2 (4 tr Sigma^2). Expanded by
    inclusion-exclusion over coinciding units into sums over pairs of units and over points, from Gram blocks
    of the points: memory O(B (N + n_units) + block), never an (N, N) matrix (resamples in blocks of
    REPLICATE_ELEMENTS / max(N, n_units), the Gram blocks computed again for each). NaN when fewer than 4 units
    hold points or U_F <= 0; the IsoScore (PR - 1) / (n - 1) is clipped to [0, 1] (a monotone map: an
    interval's ends are still the replicates' quantiles, and a point inside stays inside)."""
    W = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    rows = max(1, REPLICATE_ELEMENTS // max(W.shape[1], len(X), 1))
    if len(W) > rows:  # blocks of resamples bound the (B, n) and (B, N) arrays below
        return np.concatenate([isoscore_estimates(X, unit_of, W[s:s + rows]) for s in range(0, len(W), rows)])
    X = np.asarray(X, dtype=np.float64)
    N, dim = X.shape
    units, inv = np.unique(np.asarray(unit_of), return_inverse=True)
    n = len(units)
    if n < 4 or dim < 2:
        return np.full(len(W), np.nan)
    order = np.argsort(inv, kind="stable")
    X, inv = X[order] - X.mean(0), inv[order]  # points in unit order, centred (a shift changes no kernel)
    c = np.bincount(inv).astype(np.float64)  # (n,) points per unit
    bounds = np.concatenate([[0], np.cumsum(c)]).astype(np.int64)  # (n + 1,) unit u's points: bounds[u]:bounds[u + 1]
    starts = bounds[:-1]
    S = np.add.reduceat(X, starts, axis=0)  # (n, dim) s_u: the sum of unit u's points; K = S S^T
    sq = np.add.reduceat(np.einsum("ij,ij->i", X, X), starts)  # (n,) q_u: the sum of their |x|^2
    kd = np.einsum("ij,ij->i", S, S)  # (n,) K_uu
    W = W[:, units]  # (B, n) the weights of the units that hold points
    om, a = W * W, W * c  # (B, n)
    oa = om * a
    WS, aS = W @ S, (W * a) @ S  # (B, dim)
    Kw = WS @ S.T  # (B, n) (K w)_u
    # Products with three (n, n) / (n, N) matrices, built in blocks of whole units: KK = K o K,
    # H_ut = sum_{a in u, b in t} (a . b)^2 and R2_ub = (s_u . x_b)^2. With one point per unit all three are KK.
    single = bool((c == 1).all())
    okk, hw, hwa = np.zeros_like(W), np.zeros_like(W), np.zeros_like(W)  # om KK, w H, (w a) H
    r2o = np.zeros((len(W), 0 if single else N))  # om R2: (B, N); with one point per unit om KK, set below
    r2oa = np.zeros((len(W), N))  # (om a) R2
    hd = np.zeros(n)  # (n,) H_uu
    block = max(1, BLOCK_ELEMENTS // max(N, n))
    u0 = 0
    while u0 < n:
        u1 = max(u0 + 1, int(np.searchsorted(bounds, bounds[u0] + block, side="right")) - 1)
        p0, p1 = bounds[u0], bounds[u1]  # its points
        KK = (S[u0:u1] @ S.T) ** 2  # (units, n)
        okk += om[:, u0:u1] @ KK
        if single:
            H = KK
            r2oa += oa[:, u0:u1] @ KK  # (om a) R2 = (om a) KK (symmetric)
        else:
            G2 = (X[p0:p1] @ X.T) ** 2  # (points, N)
            H = np.add.reduceat(np.add.reduceat(G2, starts, axis=1), starts[u0:u1] - p0, axis=0)  # (units, n)
            R2 = (S @ X[p0:p1].T) ** 2  # (n, points)
            r2o[:, p0:p1] = om @ R2
            r2oa[:, p0:p1] = oa @ R2
            hwa += (W * a)[:, u0:u1] @ H
        hw += W[:, u0:u1] @ H
        hd[u0:u1] = H[np.arange(u1 - u0), np.arange(u0, u1)]
        u0 = u1
    if single:
        r2o, hwa = okk, okk  # om R2 = om KK; (w a) H = om KK (a = w)
    C, Q = a.sum(1), (a * a).sum(1)  # (B,)
    o2 = om * om
    # U_T: D_uv = sum_{a in u, b in v} |a - b|^2 = c_v q_u + c_u q_v - 2 K_uv, off the diagonal
    Dd = 2 * c * sq - 2 * kd  # what the formula gives on the diagonal (removed)
    wq, wc = W @ sq, W @ c
    total = 2 * wq * wc - 2 * np.einsum("bd,bd->b", WS, WS) - om @ Dd
    rowsum = W * (wq[:, None] * c + wc[:, None] * sq - 2 * Kw - W * Dd)
    squares = (2 * (om @ sq**2) * (om @ c**2) + 2 * (om @ (c * sq)) ** 2
               - 8 * np.einsum("bd,bd->b", (om * sq) @ S, (om * c) @ S) + 4 * np.einsum("bn,bn->b", okk, om)
               - o2 @ Dd**2)
    u_t = _distinct4(total, rowsum, squares)
    # U_F / 4 = T1 - 2 T2 + T3 (u, v, t, r distinct): T1 = sum c_v c_r H_ut, T2 = sum c_v s_r^T A_u s_t with
    # A_u = sum_{a in u} a a^T, T3 = sum K_ut K_vr
    t3 = _distinct4(np.einsum("bd,bd->b", WS, WS) - om @ kd, W * (Kw - W * kd),
                    np.einsum("bn,bn->b", okk, om) - o2 @ kd**2)
    s0 = np.einsum("bn,bn->b", W, hw) - om @ hd
    s1 = np.einsum("bn,bn->b", a * W, hw) - oa @ hd
    s2 = np.einsum("bn,bn->b", a * a * W, hw) - (oa * a) @ hd
    s11 = np.einsum("bn,bn->b", a * W, hwa) - (oa * a) @ hd
    t1 = (C * C - Q) * s0 - 4 * C * s1 + 4 * s2 + 2 * s11  # the pairs (v, r) outside {u, t}, by inclusion-exclusion
    t2 = np.zeros(len(W))
    rt = np.einsum("ij,ij->i", S[inv], X)  # (N,) s_u . x_b for the point's own unit
    chunk = max(1, REPLICATE_ELEMENTS // 8 // max(len(W), 1))  # points per chunk: small temporaries
    for b0 in range(0, N, chunk):  # per point b of unit u, the triples (v, t, r) of distinct units other than u:
        p = slice(b0, min(N, b0 + chunk))  # sum a_v rho_t rho_r with rho_t = w_t R_tb, by inclusion-exclusion
        wt, at, r = W[:, inv[p]], a[:, inv[p]], rt[p]  # (B, points)
        rho = WS @ X[p].T - wt * r  # sum_t rho_t over t != u
        rho2 = r2o[:, p] - wt * wt * r * r  # sum_t rho_t^2
        cc = C[:, None] - at  # sum_v a_v
        cr = aS @ X[p].T - at * wt * r  # sum_t a_t rho_t
        cr2 = r2oa[:, p] - at * wt * wt * r * r  # sum_t a_t rho_t^2
        t2 += np.einsum("bp,bp->b", wt, cc * rho * rho - 2 * cr * rho - cc * rho2 + 2 * cr2)
    u_f = 4 * (t1 - 2 * t2 + t3)
    with np.errstate(divide="ignore", invalid="ignore"):
        pr = np.where((u_f > 0) & ((W > 0).sum(1) >= 4), u_t / u_f, np.nan)  # a 4-tuple needs 4 units drawn
    return np.clip((pr - 1) / (dim - 1), 0, 1)


def isoscore_estimate(X, unit_of) -> float:
    """The unbiased IsoScore of the sample itself: :func:`isoscore_estimates` with every unit's weight 1, in the
    O(N n^2) closed forms of its sums instead of Gram blocks of the points (O(N^2 n); n the dimension). With all
    weights 1 every sum over pairs of units is a product of (n, n) moment matrices: sum over u, t of H_ut =
    ||X^T X||_F^2 (H_ut = sum_{a in u, b in t} (a . b)^2), sum of c_t H_ut = <X^T X, X^T D_c X>, sum of K_ut^2 =
    ||S^T S||_F^2 (S: the units' sums), sum over t of (s_t . x)^2 = x^T S^T S x; only the diagonal H_uu, the
    pairs of points within a unit, is summed point by point. Equal to the Gram route to rounding (tests compare
    them to 1e-10). NaN as there: fewer than 4 units or U_F <= 0."""
    X = np.asarray(X, dtype=np.float64)
    N, dim = X.shape
    units, inv = np.unique(np.asarray(unit_of), return_inverse=True)
    n = len(units)
    if n < 4 or dim < 2:
        return float("nan")
    order = np.argsort(inv, kind="stable")
    X, inv = X[order] - X.mean(0), inv[order]  # centred, in unit order (a shift changes no kernel)
    c = np.bincount(inv).astype(np.float64)  # (n,) points per unit
    starts = np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64)
    S = np.add.reduceat(X, starts, axis=0)  # (n, dim) the units' sums
    sq = np.add.reduceat(np.einsum("ij,ij->i", X, X), starts)  # (n,) q_u
    kd = np.einsum("ij,ij->i", S, S)  # (n,) K_uu
    cp = c[inv]  # (N,) each point's unit size
    G, Gc, Gcc = X.T @ X, X.T @ (cp[:, None] * X), X.T @ ((cp * cp)[:, None] * X)  # (dim, dim)
    MS, MSc = S.T @ S, S.T @ (c[:, None] * S)
    hd = _within_unit_squares(X, inv, starts, c)  # (n,) H_uu
    C, Q = c.sum(), (c * c).sum()
    s_tot, cS = S.sum(0), c @ S
    Kw = S @ s_tot  # (n,) (K 1)_u
    kk = float(np.sum(MS * MS))  # sum over u, t of K_ut^2
    Dd = 2 * c * sq - 2 * kd
    total = 2 * sq.sum() * C - 2 * s_tot @ s_tot - Dd.sum()
    rowsum = sq.sum() * c + C * sq - 2 * Kw - Dd
    squares = (2 * (sq * sq).sum() * Q + 2 * (c @ sq) ** 2 - 8 * (sq @ S) @ cS + 4 * kk - Dd @ Dd)
    u_t = _distinct4(np.array([total]), rowsum[None], np.array([squares]))[0]
    t3 = _distinct4(np.array([s_tot @ s_tot - kd.sum()]), (Kw - kd)[None], np.array([kk - kd @ kd]))[0]
    s0 = np.sum(G * G) - hd.sum()
    s1 = np.sum(G * Gc) - c @ hd
    s2 = np.sum(G * Gcc) - (c * c) @ hd
    s11 = np.sum(Gc * Gc) - (c * c) @ hd
    t1 = (C * C - Q) * s0 - 4 * C * s1 + 4 * s2 + 2 * s11
    r = np.einsum("ij,ij->i", S[inv], X)  # (N,) s_u . x for the point's own unit
    rho = X @ s_tot - r
    rho2 = np.einsum("ij,ij->i", X @ MS, X) - r * r  # sum over t != u of (s_t . x)^2
    cc = C - cp
    cr = X @ cS - cp * r
    cr2 = np.einsum("ij,ij->i", X @ MSc, X) - cp * r * r
    t2 = float(np.sum(cc * rho * rho - 2 * cr * rho - cc * rho2 + 2 * cr2))
    u_f = 4 * (t1 - 2 * t2 + t3)
    if not u_f > 0:
        return float("nan")
    return float(np.clip((u_t / u_f - 1) / (dim - 1), 0, 1))


def _within_unit_squares(X, inv, starts, c) -> np.ndarray:
    """(n,) H_uu = sum over points a, b of unit u of (a . b)^2, over the pairs of points within each unit (X in
    unit order), taken BLOCK_ELEMENTS floats at a time."""
    n = len(c)
    ci = c.astype(np.int64)
    pairs = ci * ci  # per unit
    first = np.concatenate([[0], np.cumsum(pairs)[:-1]])
    out = np.zeros(n)
    step = max(1, BLOCK_ELEMENTS // max(1, X.shape[1]))
    for k0 in range(0, int(pairs.sum()), step):
        k = np.arange(k0, min(int(pairs.sum()), k0 + step))  # pair numbers
        u = np.searchsorted(first, k, side="right") - 1  # their unit
        j = k - first[u]
        a, b = starts[u] + j // ci[u], starts[u] + j % ci[u]
        g = np.einsum("ij,ij->i", X[a], X[b])
        out += np.bincount(u, weights=g * g, minlength=n)
    return out


# ----------------------------------------------------------------------------- compute


@dataclass(kw_only=True)
class Cloud:
    """IsoScore of one layer's points at one level (the token sample or the sentence vectors); None where it is
    undefined, and ``note`` says why."""

    isoscore: float | None  # the unbiased estimate
    isoscore_ci: list[float | None] | None  # its percentile interval over resampled sentences
    isoscore_plugin: float | None = None  # the paper's algorithm on these points (None: undefined, or an old file)
    n_points: int
    n_sentences: int | None = None  # the sentences the points come from (None: an old file)
    dimension: int
    total_variance: float | None
    note: str | None = omitted()


@dataclass
class LayerRow(ByLevel[Cloud]):
    """One layer's IsoScores, a row of :attr:`Result.layers` (``row.of("token")``: a level's cloud)."""

    layer: int  # 0 = embeddings
    token: Cloud
    sentence: Cloud


def isoscore_statistic(row: LayerRow, level: str) -> tuple[float | None, list[float | None] | None]:
    """What the figures draw of a layer row at ``level``: the IsoScore and its interval."""
    return row.of(level).isoscore, row.of(level).isoscore_ci


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's IsoScore per layer: the saved document's keys, in order."""

    definitions: Definitions  # prose only: nothing reads numbers from it
    layers: list[LayerRow]  # per layer 0..L
    bootstrap: stats.Replicated | None = None  # of the intervals + "replicates": the last layer's token and sentence
    #                                IsoScore per resample (two models on the same sentences pair resample by resample)

    @style.drawing
    def plot(self, ax=None, level: str = "token", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: IsoScore of
        ``level`` ("token" or "sentence") vectors by layer with its bootstrap band. ``kwargs`` (``color=``,
        ``label=``, ``linestyle=``, ``marker=`` ...) go to the line; without ``color=`` the next colour of the
        Axes' cycle; the label (default: the model) enters the legend, so results drawn on one Axes overlay.
        Fonts and colours follow the caller's rcParams. Returns the Axes."""
        if level not in LEVELS:
            raise ProbeError(f"level must be 'token' or 'sentence', got {level!r}")
        ax = style.one_axes(ax, (3.8, 2.9))
        level_panel(ax, [style.on_axes(ax, self, kwargs)], isoscore_statistic, level, False, YLABEL)
        return style.finish(ax)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"{level} IsoScore (unbiased estimate), last layer": self.last_layer_isoscore(level)
                for level in LEVELS}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the IsoScore of the token states per layer."""
        return common.as_floats(row.token.isoscore for row in self.layers)

    def headline(self) -> dict[str, str]:
        last = self.layers[-1]
        return {f"{level} IsoScore (unbiased estimate), last layer": "n/a" if (c := last.of(level)).isoscore is None
                else f"{c.isoscore:.3f}" + ("" if c.isoscore_plugin is None else f" (plug-in {c.isoscore_plugin:.3f})")
                for level in LEVELS}

    def last_layer_isoscore(self, level: str) -> stats.Sample:
        """The last layer's IsoScore of ``level`` ("token" / "sentence") vectors with its bootstrap replicates
        over sentences (the point value alone when the result saved none for the last layer)."""
        point = self.layers[-1].of(level).isoscore
        reps = (self.bootstrap.replicates if self.bootstrap else None) or {}
        if reps.get("layer") != len(self.layers) - 1:
            return stats.Sample(point)
        return stats.Sample.saved(point, reps.get(level), self.bootstrap)

    def last_layer_isoscore_plugin(self, level: str) -> stats.Sample:
        """The last layer's plug-in IsoScore of ``level`` vectors: the paper's algorithm on these points, the number
        the ``isoscore`` package gives (a point value: its bootstrap is biased, the module's docstring says why)."""
        return stats.Sample(self.layers[-1].of(level).isoscore_plugin)


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """IsoScore of the token sample and of the sentence vectors at every layer (the unbiased estimate, the
    paper's plug-in beside it), with percentile intervals resampling sentences."""
    cfg = cfg or Config()
    if acts.n_texts < 4:
        raise ProbeError(f"IsoScore's estimate needs points of at least 4 sentences, got {acts.n_texts} sentences")
    tokens = draw_tokens(acts, cfg.n_tokens, cfg.seed, cfg.keep_special)
    boot = stats.bootstrap_block("sentence", acts.n_texts, cfg.resamples, seed=cfg.seed,
                                 units_id=stats.units_id(acts.texts))
    weights = stats.resample_weights(acts.n_texts, cfg.resamples, cfg.seed)
    layers, last = [], {}
    for lyr in tqdm_class()(range(acts.n_layers + 1), desc=f"isoscore {acts.meta['model']['name']}", unit="layer"):
        row: dict[str, Cloud] = {}
        for level, (X, unit_of) in clouds(acts, lyr, tokens).items():
            values = isoscore_estimates(X, unit_of, np.vstack([np.ones(acts.n_texts), weights]))  # (1 + B,)
            point, rep = values[0], values[1:]  # the sample's estimate, then one per resample
            last[level] = rep
            n_sentences = len(np.unique(unit_of))
            cloud = Cloud(isoscore=finite(point), isoscore_ci=finite(stats.interval(rep, boot.level)),
                          isoscore_plugin=finite(isoscore(X)), n_points=len(X), n_sentences=n_sentences,
                          dimension=X.shape[1], total_variance=float(np.var(X, 0).sum()))
            if not np.isfinite(X).all():  # the model's own NaN or inf states (recorded in the activations' meta)
                cloud.isoscore = cloud.isoscore_ci = cloud.isoscore_plugin = cloud.total_variance = None
                cloud.note = "states that hold NaN or inf: IsoScore is undefined"
            elif same_vectors(X, acts.sentence.dtype):  # one vector for all ([CLS] at the embedding layer, a
                # dead LayerNorm): up to rounding, which a mean over different lengths leaves as variance
                cloud.isoscore = cloud.isoscore_ci = cloud.isoscore_plugin = None
                cloud.total_variance, cloud.note = 0.0, "every vector is the same (no variance): IsoScore is undefined"
            elif cloud.isoscore is None:
                cloud.isoscore_ci = None
                cloud.note = (f"points of {n_sentences} sentences: the estimate needs points of at least 4 different "
                              "sentences" if n_sentences < 4 else "too few points: the estimate of tr Sigma^2 is not "
                              "positive")
            row[level] = cloud
        layers.append(LayerRow(lyr, **row))
    return Result(
        identity=activations_identity(acts, cfg),
        definitions=Definitions({
            "layers": "0 = embedding output, l = output of layer l",
            "isoscore": "Rudman et al. (2022)'s IsoScore of the distribution the points come from, "
                        "(PR - 1) / (n - 1) with PR = (tr Sigma)^2 / tr Sigma^2 (n = the vectors' dimension), "
                        "estimated without bias: (tr Sigma)^2 and tr Sigma^2 as averages of |a - b|^2 |c - e|^2 "
                        "and ((a - b) . (c - e))^2 over points of four different sentences; clipped to [0, 1]. "
                        "1 isotropic, 0 one direction",
            "isoscore_plugin": "the paper's algorithm on these points (the isoscore package's number): the "
                               "eigenvalues of their sample covariance, scaled to length sqrt(n), distance to "
                               "(1, ..., 1); lower than the population's by about PR^2 / N at N points, so it "
                               "depends on the sample size",
            "special_tokens": "kept" if cfg.keep_special else "excluded from the token sample",
            "token_sample": f"{len(tokens)} occurrences drawn without replacement (seed {cfg.seed}), "
                            "the anisotropy analysis's token sample",
            "sentence_vector": acts.meta["model"]["sentence_vector"],
            "intervals": "percentile bootstrap over sentences (a token goes with its sentence) of the unbiased "
                         "estimate, each resample's over 4-tuples of different original sentences weighted by "
                         "their draws (a sentence drawn twice never pairs with its copy)",
        }),
        layers=layers,
        bootstrap=stats.Replicated(**vars(boot), replicates={"layer": acts.n_layers,
                                                             **{k: finite(stats.rounded(v)) for k, v in last.items()}}),
    )


def table_rows(result: Result | dict) -> list[dict]:
    """One row per layer: token and sentence IsoScore with their intervals."""
    rows = []
    for r in Result.from_json(result).layers:
        row: dict = {"layer": r.layer}
        for level in LEVELS:
            s = r.of(level)
            lo, hi = s.isoscore_ci if s.isoscore_ci is not None else (None, None)
            row.update({f"{level}_isoscore": s.isoscore, f"{level}_isoscore_lo": lo, f"{level}_isoscore_hi": hi,
                        f"{level}_isoscore_plugin": s.isoscore_plugin, f"{level}_n": s.n_points})
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- plot


@style.drawing
def plot(results: list[Result], fig=None, relative_depth: bool | None = None):
    """IsoScore by layer, token level left and sentence level right, one line per model in its colour (band:
    bootstrap interval over sentences). ``fig``: a Figure or SubFigure to draw into. Returns the figure."""
    results = [Result.from_json(r) for r in results]
    return plot_levels(results, isoscore_statistic, YLABEL, fig, relative_depth)


ANALYSIS = Analysis(
    name="isoscore",
    inputs=Sentences(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("isoscore", plot, "The unbiased estimate of IsoScore (Rudman et al. 2022) of token vectors (left) and "
               "sentence vectors (right) at every layer, one line per model, band: 95% bootstrap interval over "
               "sentences. 1 means every principal direction carries the same variance; 0 means all variance lies on "
               "one line. It estimates the IsoScore of the distribution the points come from; the paper's algorithm "
               "on the points themselves (the isoscore package's number, saved as isoscore_plugin) is lower by about "
               "PR^2 / N and depends on the sample size. Unlike the mean cosine of random pairs, it does not depend "
               "on where the cloud's mean lies, so a model can look anisotropic by cosine (a shared offset) and "
               "still use its dimensions evenly, or the reverse."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "12", "--n-tokens", "40", "--resamples", "50"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
