"""Intrinsic dimension per layer: the non-linear counterpart of the SVD redundancy k (S-LSTM §7.2, Table 6)

Two nearest-neighbour estimators of the dimension of the manifold a layer's vectors lie on, as
scikit-dimension (0.5) computes them:

* **TwoNN** (Facco et al. 2017): per point the ratio mu_i = r2 / r1 of its second to first nearest-neighbour
  distance, Pareto(1, d) distributed on a d-dimensional manifold of locally uniform density. Sorted
  ratios, the largest ``--twonn-discard`` fraction left out (the paper's heuristic, default 10%), and the
  line through the origin fitted to (log mu_(i), -log(1 - i / N)) by least squares: its slope is d.
* **MLE** (Levina and Bickel 2005): per point m_i = (k - 1) / sum_{j<k} log(T_k / T_j) from its k nearest
  neighbour distances T_1 <= ... <= T_k (``--mle-k``, default 20); combined over points with the
  MacKay-Ghahramani correction (the default, ``--mle-combine mackay-ghahramani``): d = 1 / mean(1 / m_i),
  i.e. the per-point log-ratio sums are averaged before inverting, which removes the upward bias of
  averaging the m_i; ``--mle-combine mean`` gives Levina and Bickel's own arithmetic mean of the m_i.

The nearest neighbours are exact Euclidean ones, searched in blocks of rows (:func:`nearest_neighbours`:
never an N x N matrix, memory O(block + N k)). Identical vectors (a token type at the embedding layer of a
model without positions; float16 rounding) have a distance of 0, for which both estimators are undefined:
duplicates are removed first and each distinct vector counts once (the count is reported per layer).

Intervals: estimate +- z SE, the standard error from random halves of the sentences (Mahalanobis'
interpenetrating subsamples): the sentences are split at random into two halves, each half's estimate is
computed afresh (its points' neighbours among that half only) and SE^2 = mean over splits of
(theta_A - theta_B)^2 / 4. The two halves are two independent samples of N / 2 points, so
E (theta_A - theta_B)^2 = 2 Var(theta_{N/2}) whatever the dependence inside a sentence or between
neighbouring points, and a variance that falls as 1 / N gives Var(theta_N) = Var(theta_{N/2}) / 2.
Why not a bootstrap: a resample with replacement puts copies of a point at distance 0, where both
estimators break; resampling per-point quantities (mu_i, 1 / m_i) computed once on the whole sample avoids
that but treats the points as independent, while neighbouring points share their neighbours (the MLE's
k = 20 most of all): on clustered planted data its intervals covered 87-90%. Percentile intervals of
half-samples around their own mean need a rescaling that depends on how much of the estimate's noise a
half-sample renews, which differs between these estimators. The estimand is the estimator's value at this
sample size (both estimators depend on the sampling density through curvature, boundaries and clusters,
so it is not the manifold's dimension): checked by simulation in tests/test_id_coverage.py.

For every layer l = 0..L, on N random token occurrences (the anisotropy analysis's draw, special tokens
excluded unless --keep-special) and on the sentence vectors.

    $ python -m analyses.intrinsic_dimension --model minilm-l6 [--n-sentences 5000] [--n-tokens 5000] [--mle-k 20]

Writes out/results/intrinsic_dimension/<model>.json (+ .csv) and out/figures/intrinsic-dimension.{png,pdf}.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity
from analyses.inputs import Sentences
from analyses.layer_points import LEVELS, ByLevel, clouds, draw_tokens, finite, level_panel
from analyses.records import Definitions, omitted
from analyses.rounding import same_vectors
from probes.capture.activations import Activations
from probes.config import arg, tqdm_class
from probes.errors import ProbeError

BLOCK_ELEMENTS = 2**22  # distances per block of the neighbour search: 32 MiB of float64
NEAR_COPY, NEAR_COPY_SHARE = 1e-3, 0.05  # a nearest neighbour this much closer than the second: a near-copy
ESTIMATORS = {"twonn": "TwoNN (Facco et al. 2017)", "mle": "MLE (Levina and Bickel 2005)"}



@dataclass
class Config(SentenceConfig):
    """Intrinsic dimension (TwoNN, Levina-Bickel MLE) of token and sentence vectors at every layer."""

    n_tokens: int = arg(5000, "random token occurrences per layer (the anisotropy analysis's draw)", min=3)
    keep_special: bool = arg(False, "include special tokens ([CLS], [SEP], <s>, ...) in the token sample")
    mle_k: int = arg(20, "MLE: nearest neighbours k per point (scikit-dimension's default)", min=2)
    mle_combine: str = arg("mackay-ghahramani", "MLE: combine the per-point estimates by the inverse of the mean "
                           "inverse (MacKay-Ghahramani) or by their mean (Levina-Bickel)",
                           choices=("mackay-ghahramani", "mean"))
    twonn_discard: float = arg(0.1, "TwoNN: fraction of the largest ratios r2/r1 left out of the fit", min=0.0,
                               max=0.9)
    resamples: int = arg(200, "random splits of the sentences into two halves (the intervals' standard error)",
                         min=1)


# ----------------------------------------------------------------------------- neighbours


def nearest_neighbours(X, k: int, block_elements: int = BLOCK_ELEMENTS) -> tuple[np.ndarray, np.ndarray]:
    """(distances (N, k) ascending, indices (N, k)) of every row's k nearest other rows, exact Euclidean.
    Rows are searched in blocks of at most ``block_elements`` distances (memory O(block + N k), never N x N);
    the chosen neighbours' distances are recomputed from the differences (no cancellation for close points)."""
    X = np.asarray(X, dtype=np.float64)
    N = len(X)
    if not 1 <= k < N:
        raise ProbeError(f"need more than k = {k} points for a {k}-nearest-neighbour search, got {N}")
    sq = np.einsum("ij,ij->i", X, X)
    dist, idx = np.empty((N, k)), np.empty((N, k), dtype=np.int64)
    rows = max(1, min(block_elements // N, block_elements // (k * X.shape[1])))  # (rows, N) and (rows, k, d)
    for s in range(0, N, rows):
        e = min(N, s + rows)
        D = sq[s:e, None] + sq[None, :] - 2 * (X[s:e] @ X.T)  # (rows, N) squared distances
        D[np.arange(e - s), np.arange(s, e)] = np.inf  # not its own neighbour
        part = np.argpartition(D, k - 1, axis=1)[:, :k]  # (rows, k) the k smallest, unordered
        exact = np.linalg.norm(X[s:e, None, :] - X[part], axis=2)  # (rows, k)
        order = np.argsort(exact, axis=1, kind="stable")
        dist[s:e] = np.take_along_axis(exact, order, 1)
        idx[s:e] = np.take_along_axis(part, order, 1)
    return dist, idx


def distinct(X, unit_of) -> tuple[np.ndarray, np.ndarray, int]:
    """(distinct rows of X in their first occurrence's order, the unit of each, number of rows removed)."""
    X = np.asarray(X)
    _, first = np.unique(X, axis=0, return_index=True)
    keep = np.sort(first)
    return X[keep], np.asarray(unit_of)[keep], len(X) - len(keep)


# ----------------------------------------------------------------------------- estimators


def twonn_ratios(dist: np.ndarray) -> np.ndarray:
    """mu_i = r2 / r1 per point from the first two neighbour distances ``dist`` (N, >= 2)."""
    return dist[:, 1] / dist[:, 0]


def twonn(mu, discard: float = 0.1, weights=None) -> np.ndarray | float:
    """TwoNN's dimension from the ratios ``mu`` (N,) (Facco et al. 2017, scikit-dimension's linear fit): the
    n_keep = int(N (1 - discard)) smallest ratios, F_i = i / N, slope of -log(1 - F) on log mu through 0.

    ``weights`` (B, N): integer copies of each point in each of B resamples; the estimator is recomputed on
    each resampled multiset (copies of a ratio take consecutive ranks), returning (B,)."""
    mu = np.asarray(mu, dtype=np.float64)
    if not 0 < discard < 1:
        raise ProbeError(f"the TwoNN discard fraction must be in (0, 1), got {discard}")
    order = np.argsort(mu, kind="stable")
    x = np.log(mu[order])
    w = np.ones((1, len(mu))) if weights is None else np.asarray(weights, dtype=np.float64)[:, order]
    N = w.sum(1, keepdims=True)  # (B, 1)
    keep = np.floor(N * (1 - discard))  # int(N (1 - discard)) copies kept
    after = np.cumsum(w, 1)
    before = after - w  # copies of point i take ranks before+1 .. before+k_i
    k = np.clip(np.minimum(after, keep) - before, 0, None)  # (B, N) kept copies
    # sum over the kept copies p of -log(1 - p / N) = k log N - (lgamma(N - before) - lgamma(N - before - k))
    top = np.where(k > 0, N - before, 1.0)  # (points without kept copies add nothing; keeps lgamma finite)
    y_sum = np.where(k > 0, k * np.log(N) - (gammaln(top) - gammaln(top - k)), 0.0)
    d = (x * y_sum).sum(1) / (k * x * x).sum(1)
    return float(d[0]) if weights is None else d


def twonn_rows(mu, rows, discard: float = 0.1) -> np.ndarray:
    """:func:`twonn` of ``mu[r][rows[r]]`` for every row r of ``mu`` (R, N) and its points ``rows`` (R, N) bool,
    sorted and transformed together; each row's two sums are taken over that row's points alone, in the same
    order, so every estimate equals :func:`twonn` on its points to the last bit. (R,)"""
    mu = np.asarray(mu, dtype=np.float64)
    n = rows.sum(1)  # (R,) points per row
    # a row's points first, in mu's order (NaN, like a NaN ratio of its own, sorts last: such a row stays NaN)
    padded = np.where(rows, mu, np.nan)
    order = np.argsort(padded, axis=1, kind="stable")
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(np.take_along_axis(padded, order, 1))  # (R, N): the first n[r] are the row's log mu, sorted
        N = n[:, None].astype(np.float64)
        keep = np.floor(N * (1 - discard))
        after = np.cumsum(np.ones(mu.shape), 1)  # twonn's ranks with unit weights
        before = after - 1
        k = np.clip(np.minimum(after, keep) - before, 0, None)
        top = np.where(k > 0, N - before, 1.0)
        y_sum = np.where(k > 0, k * np.log(N) - (gammaln(top) - gammaln(top - k)), 0.0)
        xy, kxx = x * y_sum, k * x * x
        return np.array([xy[r, :m].sum() / kxx[r, :m].sum() for r, m in enumerate(n)])


def mle_inverse(dist: np.ndarray, k: int) -> np.ndarray:
    """Per point 1 / m_i = (1 / (k - 1)) sum_{j<k} log(T_k / T_j) from its k nearest distances (Levina and
    Bickel 2005, scikit-dimension's MLE without noise model)."""
    T = dist[:, :k]
    return np.log(T[:, -1:] / T).sum(1) / (k - 1)


def mle(inverse, combine: str = "mackay-ghahramani", weights=None) -> np.ndarray | float:
    """The MLE over points from the per-point inverse estimates ``inverse`` (N,): 1 / mean(inverse)
    (MacKay-Ghahramani) or mean(1 / inverse) (Levina-Bickel); weighted by ``weights`` (B, N) -> (B,)."""
    inv = np.asarray(inverse, dtype=np.float64)
    w = np.ones((1, len(inv))) if weights is None else np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if combine == "mackay-ghahramani":
            d = w.sum(1) / (w @ inv)
        elif combine == "mean":
            d = (w @ (1 / inv)) / w.sum(1)
        else:
            raise ProbeError(f"combine must be 'mackay-ghahramani' or 'mean', got {combine!r}")
    return float(d[0]) if weights is None else d


# ----------------------------------------------------------------------------- intervals from random halves


def neighbour_list_length(k: int) -> int:
    """Neighbours kept per point for the halves: the k nearest within a random half are among a point's
    4k + 10 nearest in the whole sample unless fewer than k of those fall in its half (a binomial tail below
    1e-7 at k = 20 for independent points; a point for which it happens is searched again within its half)."""
    return 4 * k + 10


def random_halves(n_units: int, splits: int, seed: int) -> np.ndarray:
    """(splits, n_units) bool: per split a uniformly random half of the units (n_units // 2 of them True),
    seeded by (seed, n_units)."""
    rng = np.random.default_rng([int(seed), int(n_units), 2])
    return np.stack([rng.permutation(n_units) < n_units // 2 for _ in range(int(splits))])


def nearest_in_group(X, dist, idx, group, k: int) -> np.ndarray:
    """(N, k) ascending distances from each row of X to its k nearest other rows of the same ``group`` (N,)
    (labels), read from each row's neighbour list ``dist``, ``idx`` (N, L) in the whole sample; a row whose
    list holds fewer than k of its group is searched again among its group's rows. NaN rows: groups of
    k rows or fewer."""
    return nearest_in_groups(X, dist, idx, np.asarray(group)[None], k)[0]


def nearest_in_groups(X, dist, idx, groups, k: int) -> np.ndarray:
    """:func:`nearest_in_group` for several labellings at once: ``groups`` (S, N) -> (S, N, k), one pass over the
    neighbour lists for all S labellings (the random halves' splits) instead of one per labelling."""
    groups = np.asarray(groups)
    S, N = groups.shape
    L = idx.shape[1]
    same = groups[:, idx] == groups[:, :, None]  # (S, N, L) the listed neighbours in the row's group
    rank = np.cumsum(same, 2, dtype=np.uint8 if L < 255 else np.int32)
    found = rank[:, :, -1] >= k
    out = np.full((S, N, k), np.nan)
    pick = np.flatnonzero(same & (rank <= k) & found[:, :, None])  # k per found row: the first k of its group
    out[found] = dist.ravel()[pick % (N * L)].reshape(-1, k)
    for s, i in zip(*np.nonzero(~found)):  # fewer than k of its group in the list: search the group
        members = np.flatnonzero((groups[s] == groups[s, i]) & (np.arange(N) != i))
        if len(members) >= k:
            out[s, i] = np.sort(np.linalg.norm(X[members] - X[i], axis=1))[:k]
    return out


def halves_se(X, dist, idx, units, cfg: Config) -> tuple[np.ndarray, float]:
    """Standard errors (2,) of (TwoNN, MLE) on the points X (distinct, their neighbour lists ``dist``, ``idx``
    and the unit of each, ``units``): SE^2 = mean over ``cfg.resamples`` random splits of the units into two
    halves of (theta_A - theta_B)^2 / 4, each half's estimate from its points' neighbours within the half
    (the module's docstring says why). Also returns the share of splits where a half's estimate is undefined
    (too few points, equal distances): those are left out.

    The splits are taken in batches (:func:`nearest_in_groups`, the MLE's per-point sums over a batch at once);
    each half's TwoNN and MLE are then the estimators' own functions on that half's points, so the numbers are
    those of one split at a time."""
    present, unit = np.unique(units, return_inverse=True)
    kk = max(cfg.mle_k, 2)
    halves = random_halves(len(present), cfg.resamples, cfg.seed)
    batch = max(1, BLOCK_ELEMENTS // max(1, idx.size))  # splits per batch: (batch, N, L) lists in memory
    sq = []
    for b0 in range(0, len(halves), batch):
        groups = halves[b0:b0 + batch][:, unit]  # (splits, N) True: half A
        near = nearest_in_groups(X, dist, idx, groups, kk)  # (splits, N, kk)
        inverse = mle_inverse(near.reshape(-1, kk), cfg.mle_k).reshape(near.shape[:2])  # (splits, N)
        sides = np.concatenate([groups, ~groups])  # (2 splits, N): half A of each split, then half B
        d_twonn = twonn_rows(np.tile(twonn_ratios(near.reshape(-1, kk)).reshape(near.shape[:2]), (2, 1)), sides,
                             cfg.twonn_discard)
        d_mle = [mle(inv[g], cfg.mle_combine) for inv, g in zip(np.tile(inverse, (2, 1)), sides)]
        est = np.stack([d_twonn, np.asarray(d_mle)], 1).reshape(2, len(groups), 2)  # (half, split, estimator)
        sq.extend((est[0] - est[1]) ** 2 / 4)
    sq_ = np.array(sq)  # (splits, 2)
    ok = np.isfinite(sq_).all(1)
    return (np.sqrt(sq_[ok].mean(0)) if ok.any() else np.full(2, np.nan)), float(1 - ok.mean())


@dataclass(kw_only=True)
class Dimension:
    """Both estimators on one layer's points at one level (None where undefined: ``note`` says why), with their
    intervals."""

    twonn: float | None
    twonn_ci: list[float] | None
    mle: float | None
    mle_ci: list[float] | None
    n_points: int  # distinct points the estimators saw
    duplicates_removed: int
    dimension: int  # of the vectors
    note: str | None = omitted()

    def of(self, estimator: str) -> tuple[float | None, list[float] | None]:
        """``estimator``'s ("twonn" or "mle") estimate and its interval."""
        return (self.twonn, self.twonn_ci) if estimator == "twonn" else (self.mle, self.mle_ci)


@dataclass
class LayerRow(ByLevel[Dimension]):
    """One layer's intrinsic dimensions, a row of :attr:`Result.layers` (``row.of("token")``: a level's)."""

    layer: int  # 0 = embeddings
    token: Dimension
    sentence: Dimension


def twonn_statistic(row: LayerRow, level: str) -> tuple[float | None, list[float] | None]:
    return row.of(level).of("twonn")  # what a TwoNN panel draws of a layer row at level: estimate, interval


def mle_statistic(row: LayerRow, level: str) -> tuple[float | None, list[float] | None]:
    return row.of(level).of("mle")  # what an MLE panel draws of a layer row at level: estimate, interval


STATISTICS = {"twonn": twonn_statistic, "mle": mle_statistic}  # per estimator (ESTIMATORS' keys)


def estimate(X, unit_of, cfg: Config, level: float, dtype=None) -> Dimension:
    """Both estimators on the distinct rows of X, with estimate +- z SE intervals (:func:`halves_se`). ``dtype``:
    of the values X holds (default X's): rows that are one vector up to its rounding have no dimension."""
    from scipy.stats import norm

    bad = int((~np.isfinite(np.asarray(X))).any(1).sum())
    if bad:  # the model's own NaN or inf states (counted in the activations' meta): no distance is a number
        return Dimension(twonn=None, twonn_ci=None, mle=None, mle_ci=None, n_points=len(X), duplicates_removed=0,
                         dimension=X.shape[1],
                         note=f"{bad} of {len(X)} points hold NaN or inf: the estimators are undefined")
    Xd, units, removed = distinct(X, unit_of)
    k = cfg.mle_k
    if len(Xd) <= k:  # e.g. [CLS] at the embedding layer: one vector for every sentence
        return Dimension(twonn=None, twonn_ci=None, mle=None, mle_ci=None, n_points=len(Xd),
                         duplicates_removed=removed, dimension=X.shape[1],
                         note=f"only {len(Xd)} distinct vectors: too few for k = {k} nearest neighbours")
    if same_vectors(Xd, dtype):  # distinct only by rounding: their distances are noise
        return Dimension(twonn=None, twonn_ci=None, mle=None, mle_ci=None, n_points=len(Xd),
                         duplicates_removed=removed, dimension=X.shape[1],
                         note="every vector is the same up to rounding (no variance): the estimators are undefined")
    dist, idx = nearest_neighbours(Xd, min(len(Xd) - 1, neighbour_list_length(max(k, 2))))
    point = np.array([twonn(twonn_ratios(dist), cfg.twonn_discard), mle(mle_inverse(dist, k), cfg.mle_combine)])
    se, undefined = halves_se(Xd, dist, idx, units, cfg)
    if undefined > (1 - level) / 2:  # like stats.interval: too many undefined splits leave the ends unknown
        se = np.full(2, np.nan)
    half = float(norm.ppf((1 + level) / 2)) * se
    whole = lambda ci: None if ci is None or None in ci else ci  # noqa: E731 (an interval with an end unknown: none)
    out = Dimension(twonn=finite(point[0]), twonn_ci=whole(finite([point[0] - half[0], point[0] + half[0]])),
                    mle=finite(point[1]), mle_ci=whole(finite([point[1] - half[1], point[1] + half[1]])),
                    n_points=len(Xd), duplicates_removed=removed, dimension=X.shape[1])
    if out.twonn is None or out.mle is None:  # e.g. every ratio r2/r1 = 1, or a point with k equal distances
        out.note = "an estimator is undefined on these points (equal neighbour distances)"
    elif out.twonn_ci is None or out.mle_ci is None:
        out.note = ("no interval: a random half of the sentences gives too few points or equal neighbour "
                    f"distances in {100 * undefined:.0f}% of {cfg.resamples} splits")
    near = float(np.mean(dist[:, 0] < NEAR_COPY * dist[:, 1]))
    if near > NEAR_COPY_SHARE:  # TwoNN reads r2 / r1 of near-copies as a huge ratio: a dimension near 0
        said = f"{100 * near:.0f}% of the points have a near-copy (nearest distance below {NEAR_COPY:g} of the " \
               "second nearest; e.g. the same text stored twice): TwoNN is biased low on such points"
        out.note = f"{out.note}; {said}" if out.note is not None else said
    return out


# ----------------------------------------------------------------------------- compute


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's intrinsic dimension per layer: the saved document's keys, in order."""

    definitions: Definitions  # prose only: nothing reads numbers from it
    layers: list[LayerRow]  # per layer 0..L (None + note: too few distinct points)
    bootstrap: stats.Bootstrap | None = None  # of the intervals, method "random halves"
    #                                (resamples: the number of random splits of the sentences)

    @style.drawing
    def plot(self, ax=None, level: str = "token", estimator: str = "twonn", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display:
        ``estimator`` ("twonn" or "mle") of ``level`` ("token" or "sentence") vectors by layer with its
        interval band. ``kwargs`` (``color=``, ``label=``, ``linestyle=``, ``marker=`` ...) go to the line;
        without ``color=`` the next colour of the Axes' cycle; the label (default: the model) enters the
        legend, so results drawn on one Axes overlay. Fonts and colours follow the caller's rcParams.
        Returns the Axes."""
        if level not in LEVELS or estimator not in ESTIMATORS:
            raise ProbeError(f"level must be one of {LEVELS} and estimator one of {tuple(ESTIMATORS)}")
        ax = style.one_axes(ax, (3.8, 2.9))
        level_panel(ax, [style.on_axes(ax, self, kwargs)], STATISTICS[estimator], level, False,
                    f"{ESTIMATORS[estimator]}\nintrinsic dimension")
        return style.finish(ax)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"{level} {short} intrinsic dimension, last layer": stats.Sample(self.layers[-1].of(level).of(e)[0])
                for e, short in (("twonn", "TwoNN"), ("mle", "MLE")) for level in LEVELS}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the TwoNN estimate of the token states per layer."""
        return common.as_floats(row.token.twonn for row in self.layers)

    def headline(self) -> dict[str, str]:
        last = self.layers[-1]
        return {f"{level} TwoNN / MLE, last layer": "n/a" if (d := last.of(level)).twonn is None
                else f"{d.twonn:.1f} / {d.mle:.1f}" for level in LEVELS}


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """TwoNN and MLE intrinsic dimension of the token sample and the sentence vectors at every layer."""
    cfg = cfg or Config()
    if acts.n_texts <= cfg.mle_k:
        raise ProbeError(f"{acts.n_texts} sentences cannot give --mle-k {cfg.mle_k} nearest neighbours per "
                         "sentence vector; use more sentences or a smaller --mle-k")
    tokens = draw_tokens(acts, cfg.n_tokens, cfg.seed, cfg.keep_special)
    boot = dataclasses.replace(stats.bootstrap_block("sentence", acts.n_texts, cfg.resamples, seed=cfg.seed,
                                                     units_id=stats.units_id(acts.texts)), method="random halves")
    layers = []
    for lyr in tqdm_class()(range(acts.n_layers + 1), desc=f"intrinsic dimension {acts.meta['model']['name']}",
                    unit="layer"):
        row = {level: estimate(X, unit_of, cfg, boot.level, dtype=acts.sentence.dtype)
               for level, (X, unit_of) in clouds(acts, lyr, tokens).items()}
        layers.append(LayerRow(lyr, **row))
    combine = ("1 / mean(1 / m_i) (MacKay-Ghahramani correction)" if cfg.mle_combine == "mackay-ghahramani"
               else "mean of m_i (Levina and Bickel)")
    return Result(
        identity=activations_identity(acts, cfg),
        definitions=Definitions({
            "layers": "0 = embedding output, l = output of layer l",
            "twonn": f"Facco et al. (2017): mu = r2 / r1 per point; the {100 * cfg.twonn_discard:g}% largest left "
                     "out; least-squares slope through 0 of -log(1 - i / N) on log mu_(i) (scikit-dimension)",
            "mle": f"Levina and Bickel (2005), k = {cfg.mle_k}: m_i = (k - 1) / sum_j<k log(T_k / T_j); "
                   f"combined as {combine}",
            "neighbours": "exact Euclidean nearest neighbours on the cached states (float16 unless "
                          "--cache-dtype float32), duplicate vectors removed first (duplicates_removed)",
            "special_tokens": "kept" if cfg.keep_special else "excluded from the token sample",
            "token_sample": f"{len(tokens)} occurrences drawn without replacement (seed {cfg.seed}), "
                            "the anisotropy analysis's token sample",
            "sentence_vector": acts.meta["model"]["sentence_vector"],
            "intervals": "estimate +- z SE; SE^2 = the mean over random splits of the sentences into two halves "
                         "(a token goes with its sentence) of (theta_A - theta_B)^2 / 4, each half's estimate "
                         "from its points' neighbours within that half",
        }),
        layers=layers,
        bootstrap=boot,
    )


def table_rows(result: Result | dict) -> list[dict]:
    """One row per layer: TwoNN and MLE of tokens and sentences with their intervals."""
    rows = []
    for r in Result.from_json(result).layers:
        row: dict = {"layer": r.layer}
        for level in LEVELS:
            s = r.of(level)
            for est in ESTIMATORS:
                value, ci = s.of(est)
                lo, hi = ci if ci is not None else (None, None)
                row.update({f"{level}_{est}": value, f"{level}_{est}_lo": lo, f"{level}_{est}_hi": hi})
            row.update({f"{level}_n": s.n_points, f"{level}_duplicates": s.duplicates_removed})
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- plot


@style.drawing
def plot(results: list[Result], fig=None, relative_depth: bool | None = None):
    """A 2 x 2 grid: token level on top, sentence level below; TwoNN left, MLE right; one line per model in its
    colour (band: the 95% interval from random halves of the sentences). ``fig``: a Figure or SubFigure to draw into."""
    results = [Result.from_json(r) for r in results]
    relative = len({len(r.layers) for r in results}) > 1 if relative_depth is None else relative_depth
    fig = style.new_figure(fig, (7.2, 5.4))
    axes = fig.subplots(2, 2, sharex=True)
    drawn = style.in_figure(results, pooling=True)
    for i, level in enumerate(LEVELS):
        for j, est in enumerate(ESTIMATORS):
            level_panel(axes[i, j], drawn, STATISTICS[est], level, relative, "intrinsic dimension")
            axes[i, j].set_title(f"{level}s: {ESTIMATORS[est]}")
    style.legend(axes[0])  # beside the top right panel
    return fig


def check_config(cfg: Config) -> None:
    """Before any work: the sentence sample must give every sentence vector ``--mle-k`` neighbours."""
    if cfg.n_sentences <= cfg.mle_k:
        raise ProbeError(f"--n-sentences {cfg.n_sentences} cannot give --mle-k {cfg.mle_k} nearest neighbours per "
                         "sentence vector; use more sentences or a smaller --mle-k")


ANALYSIS = Analysis(
    name="intrinsic_dimension",
    inputs=Sentences(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config,
    figures=(
        Figure("intrinsic-dimension", plot, "Intrinsic dimension of token vectors (top) and sentence vectors "
               "(bottom) at every layer: TwoNN (left) and the Levina-Bickel MLE (right), one line per model, band: "
               "95% interval (standard error from random halves of the sentences). The number of dimensions a "
               "curved surface through the points needs locally, against the width of the layer (tens of "
               "intrinsic dimensions in hundreds of "
               "coordinates is typical). Trained networks often rise in the first layers and fall again towards "
               "the output (Ansuini et al. 2019)."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "16", "--n-tokens", "40", "--mle-k", "5", "--resamples",
             "50"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
