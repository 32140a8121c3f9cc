"""Concept erasers fitted on labelled states, as :class:`probes.intervention.Erase` edits. Pure numpy and
scikit-learn, float64.

* :func:`leace`: LEACE (Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed form"), the affine
  eraser x -> x - W^+ P W (x - mean) of least mean squared change after which no linear classifier predicts the
  concept better than a constant (on the data it was fitted on). W is the whitening matrix of the covariance of x
  (pseudo-inverse square root; eigenvalues under the largest x d x float64 eps count as 0) and P the orthogonal
  projection onto the column space of W Sigma_xz, the whitened cross-covariance of x with the one-hot concept z
  (singular values under ``svd_tol`` dropped). Its rank is at most K - 1 for K classes. The covariance is the sample
  covariance (n - 1), or with ``shrinkage`` the linear shrinkage towards tr(S)/d I of Bodnar, Gupta and
  Parolya's distribution-free optimal estimator (arXiv 1308.2608): alpha S + (1 - alpha) tr(S)/d I with S the 1/n sample
  covariance and alpha = 1 - tr(S)^2 / (n (||S||_F^2 - tr(S)^2 / d)), clipped to [0, 1]. These are the
  ``concept-erasure`` package's estimator choices (``LeaceFitter`` with ``constrain_cov_trace=False``), and
  tests/test_causal_probing.py checks the two erasers agree to 1e-6. The package's optional trace constraint (mixing
  the projection towards an orthogonal one when it would raise the total variance) is not LEACE's and not applied.
* :func:`inlp`: iterative nullspace projection (Ravfogel et al. 2020): fit a linear classifier (L2 logistic
  regression) of the concept on the states, remove the row space of its weights, refit on what is left, until the
  classifier's accuracy on a held-out fifth of the training split (by sentence) is within ``tol`` of the majority
  baseline or ``iterations`` are done. An orthogonal projection; the removed directions keep the training mean
  (as LEACE's bias does), so only the concept's variation is removed.
* :func:`matched_random`: the control of each: an orthogonal projection onto random directions that removes the
  same share of the states' variance as the eraser (:func:`removed_share`, the mean squared change over the total
  variance): Gaussian directions in the covariance's eigenbasis (:class:`Spectrum`), tilted towards higher- or
  lower-variance directions by bisection until they do, of the eraser's rank where a subspace of that rank can.
  :func:`orthogonal_random` is the rank-matched control alone (what the variance is not matched by).

    $ python -c "import numpy as np; from analyses.causal_probing.erasers import leace; \\
    >   X = np.random.default_rng(0).normal(size=(500, 8)); y = (X[:, 0] > 0).astype(int); print(leace(X, y).rank)"
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probes.errors import ProbeError
from probes.intervention import Erase


@dataclass(frozen=True)
class Whitening:
    """The whitening W (d, d) and its inverse of a covariance, on the subspace where it is not 0 (``support``)."""

    W: np.ndarray
    W_inv: np.ndarray
    support: np.ndarray  # (d, s) orthonormal basis of the eigenvectors kept


def shrunk_covariance(Xc: np.ndarray) -> np.ndarray:
    """Linear shrinkage of the 1/n covariance of centred ``Xc`` (n, d) towards tr(S)/d I (see the module doc)."""
    n, d = Xc.shape
    S = Xc.T @ Xc / n
    tr = np.trace(S)
    denom = n * (np.sum(S * S) - tr * tr / d)
    alpha = 1.0 if denom <= 0 else float(np.clip(1.0 - tr * tr / denom, 0.0, 1.0))
    return alpha * S + (1.0 - alpha) * (tr / d) * np.eye(d)


def whitening(sigma: np.ndarray) -> Whitening:
    """W = sigma^{-1/2} and W^+ = sigma^{1/2} on the eigenvectors whose eigenvalue exceeds the largest one x d x eps."""
    L, V = np.linalg.eigh((sigma + sigma.T) / 2)
    keep = L > L[-1] * sigma.shape[0] * np.finfo(np.float64).eps
    L = np.clip(L, 0.0, None)
    inv_sqrt = np.where(keep, 1.0 / np.sqrt(np.where(keep, L, 1.0)), 0.0)
    W = (V * inv_sqrt) @ V.T
    W_inv = (V * np.where(keep, np.sqrt(L), 0.0)) @ V.T
    return Whitening(W, W_inv, V[:, keep])


def one_hot(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, np.int64)
    return np.eye(int(y.max()) + 1)[y]


def _check(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X, np.float64), np.asarray(y, np.int64)
    if X.ndim != 2 or len(X) != len(y) or len(X) < 2:
        raise ProbeError(f"an eraser is fitted on states (n, d) and n labels, not {X.shape} and {y.shape}")
    if len(np.unique(y)) < 2:
        raise ProbeError("an eraser needs at least two classes among the items it is fitted on")
    return X, y


def leace(X: np.ndarray, y: np.ndarray, shrinkage: bool = True, svd_tol: float = 0.01) -> Erase:
    """The LEACE eraser of the concept ``y`` from the states ``X`` (see the module docstring).

    ``X`` (n, d): one state per row (cast to float64); ``y`` (n,): integer class labels 0..K-1 (at least two
    present); ``shrinkage``: the shrunk covariance (default) or the sample covariance; ``svd_tol``: whitened
    cross-covariance singular values under it are not erased. Returns an :class:`probes.intervention.Erase`
    ``e`` of rank r <= K - 1: ``e.left`` (d, r), ``e.right`` (r, d), ``e.bias`` (d,) the mean of X, ``e.rank``;
    ``e.apply_numpy(X2)`` (m, d) -> (m, d) erases states in memory, and ``Intervention(layer, e)`` erases them in
    the forward pass. After it no linear classifier predicts ``y`` from the erased ``X`` better than a constant.
    One error line for X not (n, d) or y not (n,), a single class, or a concept with no linear trace in X.

        e = leace(X, y); Xe = e.apply_numpy(X)       # Xe.shape == X.shape, Xe.mean(0) == X.mean(0)
    """
    X, y = _check(X, y)
    n = len(X)
    mean = X.mean(0)
    Xc, Zc = X - mean, one_hot(y) - one_hot(y).mean(0)
    sigma = shrunk_covariance(Xc) if shrinkage else Xc.T @ Xc / (n - 1)
    w = whitening(sigma)
    u, s, _ = np.linalg.svd(w.W @ (Xc.T @ Zc / (n - 1)), full_matrices=False)
    u = u[:, s > svd_tol]
    if not u.shape[1]:
        raise ProbeError("the concept has no linear trace in these states (every whitened cross-covariance is "
                         f"under {svd_tol}): there is nothing to erase")
    return Erase(w.W_inv @ u, u.T @ w.W, mean)


def removed_share(eraser: Erase, X: np.ndarray) -> float:
    """The share of the states' variance ``eraser`` removes from ``X`` (n, d): the mean squared change over the total
    variance, ||X - e(X)||_F^2 / ||X - mean(X)||_F^2 (an orthogonal projection around the mean: the variance along
    its subspace over the total; LEACE, an oblique projection, may change more than it keeps out)."""
    X = np.asarray(X, np.float64)
    total = float(((X - X.mean(0)) ** 2).sum())
    return float(((X - eraser.apply_numpy(X)) ** 2).sum()) / total if total > 0 else 0.0


@dataclass(frozen=True)
class Spectrum:
    """The eigendecomposition of the states' 1/n covariance, on its support: what a variance-matched random
    control is drawn from (computed once per layer's training states, shared by every control drawn on them)."""

    mean: np.ndarray  # (d,)
    values: np.ndarray  # (s,) eigenvalues > 0, ascending
    vectors: np.ndarray  # (d, s) their eigenvectors

    @classmethod
    def of(cls, X: np.ndarray) -> Spectrum:
        X = np.asarray(X, np.float64)
        mean = X.mean(0)
        Xc = X - mean
        lam, V = np.linalg.eigh(Xc.T @ Xc / len(X))
        keep = lam > max(float(lam[-1]), 0.0) * X.shape[1] * np.finfo(np.float64).eps
        return cls(mean, lam[keep], V[:, keep])


TILT = 64.0  # the tilt's range: a in [-TILT, TILT] spans the lowest-variance to the highest-variance directions


def _tilted(spec: Spectrum, G: np.ndarray, a: float) -> tuple[np.ndarray, float]:
    """(Q (s, r) orthonormal in the eigenbasis, the share of variance along it) of span(diag(lambda^(a/2)) G)."""
    z = a / 2 * np.log(spec.values / spec.values[-1])
    w = np.exp(np.maximum(z - z.max(), -600.0))
    Q = np.linalg.qr(w[:, None] * G)[0]
    return Q, float(spec.values @ (Q * Q).sum(1) / spec.values.sum())


@dataclass(frozen=True)
class Control:
    """A variance-matched random control: the edit, its rank and the share of variance it removes."""

    eraser: Erase
    rank: int
    share: float


def matched_random(spec: Spectrum, rank: int, share: float, seed: int, tol: float = 0.01) -> Control:
    """A random control that removes ``share`` of the states' variance (to ``tol``, relative), an orthogonal
    projection around the mean. Gaussian directions G (s, r) are drawn with ``seed`` in the covariance's
    eigenbasis and tilted, span(Lambda^(a/2) G): a = 0 is a uniformly random subspace, a -> +inf the r
    highest-variance directions, a -> -inf the r lowest; a is found by bisection so that the subspace removes
    ``share``. Its rank is ``rank`` when a subspace of that rank can remove that share (LEACE's oblique erasure
    may change more than r orthogonal directions hold), else the nearest rank that can."""
    s = len(spec.values)
    r = int(np.clip(rank, 1, s))
    rng = np.random.default_rng([seed, 31])
    G = rng.normal(size=(s, s))  # (s, s): the first r columns are the rank-r draw; more only where needed
    if _tilted(spec, G[:, :r], TILT)[1] < share * (1 - tol):  # the smallest rank that can (nested spans: bisect)
        lo_r, hi_r = r, s
        while lo_r < hi_r:
            mid = (lo_r + hi_r) // 2
            lo_r, hi_r = (mid + 1, hi_r) if _tilted(spec, G[:, :mid], TILT)[1] < share * (1 - tol) else (lo_r, mid)
        r = lo_r
    elif _tilted(spec, G[:, :r], -TILT)[1] > share * (1 + tol):  # the largest rank that can
        lo_r, hi_r = 1, r
        while lo_r < hi_r:
            mid = (lo_r + hi_r + 1) // 2
            lo_r, hi_r = (lo_r, mid - 1) if _tilted(spec, G[:, :mid], -TILT)[1] > share * (1 + tol) else (mid, hi_r)
        r = lo_r
    lo, hi = -TILT, TILT
    Q, got = _tilted(spec, G[:, :r], 0.0)
    for _ in range(100):
        if abs(got - share) <= tol * share * 0.1:
            break
        a = (lo + hi) / 2
        Q, got = _tilted(spec, G[:, :r], a)
        lo, hi = (a, hi) if got < share else (lo, a)
    B = spec.vectors @ Q  # (d, r) orthonormal
    return Control(Erase(B, B.T, spec.mean), r, got)


def orthogonal_random(X: np.ndarray, rank: int, seed: int) -> Erase:
    """``rank`` uniformly random orthonormal directions, projected out around the mean (rank-matched only: the
    variance it removes is whatever those directions hold)."""
    X = np.asarray(X, np.float64)
    q = np.linalg.qr(np.random.default_rng([seed, 37]).normal(size=(X.shape[1], rank)))[0]
    return Erase(q, q.T, X.mean(0))


@dataclass(frozen=True)
class InlpFit:
    """What :func:`inlp` found: the eraser (None: nothing to remove), how many classifiers it took and their
    held-out accuracies against the majority baseline."""

    eraser: Erase | None  # None: the first classifier was already at the majority baseline (nothing removed)
    iterations: int  # classifiers whose directions were removed
    dev_accuracy: list[float]  # the held-out accuracy of each classifier fitted (the last: what was left)
    dev_majority: float


def inlp(X: np.ndarray, y: np.ndarray, groups: np.ndarray, iterations: int = 10, tol: float = 0.01, C: float = 1.0,
         seed: int = 0, max_iter: int = 200) -> InlpFit:
    """Iterative nullspace projection of the concept ``y`` from the states ``X`` (see the module docstring).

    ``X`` (n, d) states (float64); ``y`` (n,) integer class labels 0..K-1; ``groups`` (n,): the text (sentence) of
    each item: a held-out fifth of the groups decides when to stop, so it needs two or more; ``iterations``: at
    most this many classifiers' directions removed; ``tol``: stop when the held-out accuracy is within it of the
    majority baseline; ``C``, ``max_iter``: each L2 logistic classifier's; ``seed``: the held-out split. Returns an
    :class:`InlpFit`: ``eraser``, an orthogonal :class:`probes.intervention.Erase` (``left`` (d, r), ``right``
    (r, d), ``bias`` (d,) the mean of X; ``apply_numpy(X2)`` (m, d) -> (m, d)), or None when the first classifier
    was already at the baseline; ``iterations``, the classifiers removed; ``dev_accuracy``, each classifier's
    held-out accuracy; ``dev_majority``. One error line for bad shapes, a single class or a single group.

        fit = inlp(X, y, groups); Xe = fit.eraser.apply_numpy(X) if fit.eraser is not None else X
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupShuffleSplit

    X, y = _check(X, y)
    if len(np.unique(groups)) < 2:
        raise ProbeError("INLP holds out a fifth of its training sentences to stop on, and its items come from "
                         "one sentence; use more sentences")
    mean = X.mean(0)
    Xc = X - mean
    tr, dev = next(GroupShuffleSplit(1, test_size=0.2, random_state=seed).split(Xc, y, groups))
    if len(np.unique(y[tr])) < 2:
        raise ProbeError("INLP: the training sentences outside its held-out fifth hold a single class; use more "
                         "sentences")
    majority = float((y[dev] == np.bincount(y[tr]).argmax()).mean())
    B = np.zeros((X.shape[1], 0))
    accs: list[float] = []
    steps = 0  # classifiers whose weights were removed
    while True:
        Xp = Xc - (Xc @ B) @ B.T
        clf = LogisticRegression(C=C, max_iter=max_iter, tol=1e-4).fit(Xp[tr], y[tr])
        accs.append(float(clf.score(Xp[dev], y[dev])))
        if accs[-1] <= majority + tol or steps == iterations:
            break
        Wt = clf.coef_.T - B @ (B.T @ clf.coef_.T)  # (d, k) the weights, within what is left
        q, s, _ = np.linalg.svd(Wt, full_matrices=False)
        q = q[:, s > 1e-8 * max(1.0, float(s.max(initial=0.0)))]
        if not q.shape[1]:
            break
        B = np.linalg.qr(np.hstack([B, q]))[0]
        steps += 1
    eraser = Erase(B, B.T, mean) if B.shape[1] else None
    return InlpFit(eraser, steps, accs, majority)
