"""The probe's fitting: every cross-validation fit of one layer (folds x C grid x labellings) in one batch.

What it computes is what ``Pipeline(StandardScaler, LogisticRegressionCV(lbfgs, L2, multinomial))`` of
scikit-learn computes (the protocol of :mod:`analyses.probing`), at about the cost of one plain fit:

* features standardised with the training split's mean and (population) standard deviation, once;
* for every labelling (the task's labels and, for token tasks, the control task's), every fold of the
  training split and every C of the grid, the L2-regularised multinomial logistic regression of
  scikit-learn's objective: mean log-loss + 1 / (2 C n) |W|^2 over the fold's n training rows, the
  intercept unpenalised (two classes: the binomial model, i.e. the zero-sum softmax with the penalty
  doubled, which is the same model);
* C chosen per labelling by the fold accuracies summed over folds (ties: the first C of the grid, as
  scikit-learn), then refit on the whole training split, warm-started from the folds' mean solution at
  that C (as scikit-learn);
* every fit stops when the largest gradient entry is below ``tol`` (scikit-learn's lbfgs ``gtol``, on
  the same objective scale) or after ``max_iter`` iterations; ``cv_tol`` (default: ``tol``) can stop the
  cross-validation fits earlier, which is cheaper but biased towards large C (an early-stopped fit is
  implicitly regularised, so a large C looks better in the folds than its converged refit is).

Why it is cheap. (1) The features are rotated once per layer into the eigenbasis of the training
split's Gram matrix (orthogonal, so the L2 penalty and the model are unchanged); there a diagonal
preconditioner (Boehning's bound on the multinomial Hessian, 1/2 Z'Z / n, plus the penalty) is close to
the inverse Hessian, so L-BFGS started from it needs few iterations even on strongly correlated hidden
states, where scikit-learn's runs into its cap. (2) All fits that share rows share one float32 matrix
product per iteration: for each fold, the problems of every C and labelling are columns of one GEMM;
a problem that has converged leaves the batch. Each problem keeps its own L-BFGS memory, step and
backtracking (Armijo) line search, so the batch changes no problem's path. (3) The layers of a task join
one batch (:func:`fit_layers`, while their weights stay small), so the solver's fixed cost per iteration
is paid once for them; weights lie (problem, class, feature), so every per-problem reduction of L-BFGS
runs over contiguous memory.

Pure torch (``device`` may be a GPU); deterministic: the same inputs give the same results.
Agreement with scikit-learn on planted data: tests/test_probing_fit.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from analyses.rounding import constant_columns

BATCH_BYTES = 2 * 2**20  # at most this many bytes of weights per batch of layers (see fit_layers)
MEMORY = 6  # L-BFGS pairs kept per problem
ARMIJO = 1e-4  # sufficient-decrease constant of the backtracking line search
MIN_STEP = 2.0 ** -30  # a problem whose step shrinks below this has stalled (at float precision): stop it
DESCRIPTION = ("standardised features; L2 multinomial logistic regression (scikit-learn's objective), C from the grid "
               "by summed cross-validated accuracy on the training split (folds by sentence for token tasks), refit on "
               "it; batched preconditioned L-BFGS (analyses.probing.fit)")


@dataclass
class Fit:
    """One labelling's probe: predictions on the test rows, the chosen C, its capacity and the CV scores."""

    pred: np.ndarray  # (n_test,) predicted labels (the labelling's values)
    C: float
    n_params: int  # (d + 1) * K, or d + 1 for two classes (scikit-learn's coef_ + intercept_)
    cv_accuracy: np.ndarray  # (folds, len(cs)) held-out accuracy of every fold and C
    n_iter: int  # iterations of the refit


def standardise(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """StandardScaler fitted on X_train (float64 statistics; constant columns keep scale 1). A column is constant
    when its values are equal up to the rounding of their dtype at their scale (analyses.rounding): scaled to unit
    variance, rounding noise (of a mean over sentences of different lengths) would be a feature."""
    Xtr = np.asarray(X_train, np.float64)
    mean, std = Xtr.mean(0), Xtr.std(0)
    flat = constant_columns(Xtr.min(0), Xtr.max(0), np.asarray(X_train).dtype) if len(Xtr) else std == 0
    std = np.where(flat | (std < 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0)), 1.0, std)
    return (Xtr - mean) / std, (np.asarray(X_test, np.float64) - mean) / std


class _Problems:
    """A batch of independent L2 logistic regressions on designs ("groups": a fold's rows of one layer's
    features, (n_g, d + 1), the last column the intercept's 1). Problem p uses group ``group[p]`` with
    labels ``yg[group[p]][:, lab[p]]`` and penalty ``lam[p]`` on every coordinate but the intercept. A group's problems
    are consecutive. Weights and gradients are laid out (P, K, d + 1): every per-problem reduction runs
    over contiguous memory, and the shared products use Z and the weights as they lie (transposed views)."""

    def __init__(self, Zg: list[torch.Tensor], yg: list[torch.Tensor], k: list[int], group: np.ndarray,
                 lab: np.ndarray, lam: np.ndarray):
        self.Zg, self.yg = Zg, yg  # per group: (n_g, d + 1) design rows, (n_g, labellings) class index of each row
        self.d1 = Zg[0].shape[1]
        self.group, self.lab = group, lab
        self.P, self.K = len(group), max(k)
        dev, dt = Zg[0].device, Zg[0].dtype
        self.lam = torch.as_tensor(lam, dtype=dt, device=dev)
        if not np.all(np.diff(group) >= 0):
            raise ValueError("a group's problems must be consecutive")
        # each group's problems: a slice of the batch
        self.span = [(int(np.searchsorted(group, g)), int(np.searchsorted(group, g, "right"))) for g in range(len(Zg))]
        kk = torch.as_tensor(k, device=dev)
        self.mask = None  # labellings with fewer classes than K: their extra columns never win
        if min(k) < self.K:
            self.mask = torch.where(torch.arange(self.K, device=dev)[None, :] < kk[:, None], 0.0, -1e30).to(dt)
        self.lab_t = torch.as_tensor(lab, device=dev)
        # diagonal preconditioner (P, 1, d + 1): the loss's curvature c Z'Z / n (diagonal in the eigenbasis) + penalty
        h = torch.stack([(zg * zg).mean(0) for zg in self.Zg])  # (groups, d + 1)
        pen = torch.ones(self.d1, dtype=dt, device=dev)
        pen[-1] = 0.0
        # curvature of the softmax loss at W = 0 on the zero-sum subspace: 1/K (Boehning's bound, 1/2, is
        # an upper bound that is K/2 times too loose for many classes)
        c = torch.as_tensor([1.0 / k[j] for j in lab], dtype=dt, device=dev)
        hg = h[torch.as_tensor(group, device=dev)]
        self.H0 = (1.0 / (c[:, None] * hg + self.lam[:, None] * pen[None, :]))[:, None]
        self.pen = pen

    def evaluate(self, W: torch.Tensor, which: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Objective (P,) float64 and gradient (P, K, d + 1) of the problems ``which`` (bool, P) at W
        (P, K, d + 1); the others' entries are 0."""
        f = torch.zeros(self.P, dtype=torch.float64, device=W.device)
        G = torch.zeros_like(W)
        K, d1 = self.K, self.d1
        for (a, b), zg, yg in zip(self.span, self.Zg, self.yg):
            sub = which[a:b]
            if not sub.any():
                continue
            sel: slice | torch.Tensor  # the group's rows: a slice (a view) or their indices
            if sub.all():  # the whole group: views, no gathers
                sel, it = slice(a, b), None
                Wp, labs = W[a:b], self.lab_t[a:b]
            else:
                it = torch.as_tensor(a + np.flatnonzero(sub), device=W.device)
                sel, Wp, labs = it, W[it], self.lab_t[it]
            n, p = len(zg), len(Wp)
            logits = (zg @ Wp.reshape(p * K, d1).T).view(n, p, K)
            if self.mask is not None:
                logits = logits + self.mask[labs]
            yi = yg[:, labs].unsqueeze(2)  # (n, p, 1)
            top = logits.amax(2, keepdim=True)  # (n, p, 1)
            R = torch.exp(logits - top)  # softmax, one exp
            tot = R.sum(2, keepdim=True)
            loss = (torch.log(tot) + top - logits.gather(2, yi)).double().sum((0, 2)) / n  # (p,) mean log-loss
            R /= tot
            R.scatter_add_(2, yi, torch.full_like(yi, -1.0, dtype=R.dtype))
            grad = (R.view(n, p * K).T @ zg).view(p, K, d1)
            grad /= n
            lam = self.lam[sel]
            Wpen = Wp * self.pen
            grad.addcmul_(lam[:, None, None], Wpen)
            f[sel] = loss + 0.5 * lam.double() * torch.linalg.vecdot(Wpen.view(p, -1), Wpen.view(p, -1)).double()
            G[sel] = grad
        return f, G

    def minimise(self, W: torch.Tensor, max_iter: int, tol: float) -> tuple[torch.Tensor, np.ndarray]:
        """Batched L-BFGS with per-problem memory, scaling and Armijo backtracking, from W (P, K, d + 1).
        Returns the solutions and each problem's iterations."""
        P = self.P
        dot = lambda a, b: torch.linalg.vecdot(a.view(P, -1), b.view(P, -1))  # noqa: E731  per-problem inner product
        run = np.ones(P, bool)
        f, G = self.evaluate(W, run)
        iters, step = np.zeros(P, np.int64), torch.ones(P, dtype=W.dtype, device=W.device)
        gamma = torch.ones(P, dtype=W.dtype, device=W.device)
        mem: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        D = -self.H0 * G
        for _ in range(4 * max_iter):
            gmax = G.view(P, -1).abs().amax(1).cpu().numpy()
            run = run & (gmax > tol) & (iters < max_iter)
            if not run.any():
                break
            r = torch.as_tensor(run, device=W.device)
            Wc = torch.addcmul(W, torch.where(r, step, 0.0)[:, None, None], D)
            fc, Gc = self.evaluate(Wc, run)
            gd = dot(G, D).double()
            ok = r & (fc <= f + ARMIJO * step.double() * gd)
            s, yv = Wc - W, Gc - G
            sy = dot(s, yv)
            good = ok & (sy > 1e-12 * dot(s, s).sqrt() * dot(yv, yv).sqrt())
            # a pair enters the memory of the problems that moved well; the others' rho = 0 makes it a no-op
            # in their two-loop recursion (s and y are finite: a problem that did not run has s = 0)
            rho = torch.where(good, 1.0 / torch.where(good, sy, 1.0), 0.0)
            okw = ok[:, None, None]
            if bool(good.any()):
                mem.append((s, yv, rho))
                if len(mem) > MEMORY:
                    mem.pop(0)
                yHy = dot(self.H0 * yv, yv)
                gamma = torch.where(good, sy / torch.where(good, yHy, 1.0), gamma)
            W, G = torch.where(okw, Wc, W), torch.where(okw, Gc, G)
            f = torch.where(ok, fc, f)
            okn = ok.cpu().numpy()
            iters += okn
            step = torch.where(ok, 1.0, torch.where(r, step * 0.5, step))
            run &= step.cpu().numpy() >= MIN_STEP
            if okn.any():  # new directions for the problems that moved
                Dn = self._direction(G, mem, gamma, dot)
                bad = dot(G, Dn) >= 0  # not a descent direction: the preconditioned gradient
                Dn = torch.where(bad[:, None, None], -self.H0 * G, Dn)
                D = torch.where(okw, Dn, D)
        return W, iters

    def _direction(self, G: torch.Tensor, mem: list, gamma: torch.Tensor, dot) -> torch.Tensor:
        """-H G by the two-loop recursion, H0 = gamma * diag preconditioner, per problem."""
        q, alphas = G.clone(), []
        for s, y, rho in reversed(mem):
            a = rho * dot(s, q)
            q.addcmul_(a[:, None, None], y, value=-1.0)
            alphas.append(a)
        q *= gamma[:, None, None] * self.H0
        for (s, y, rho), a in zip(mem, reversed(alphas)):
            b = rho * dot(y, q)
            q.addcmul_((a - b)[:, None, None], s)
        return q.neg_()


def fit_probes(X_train: np.ndarray, labellings: list[np.ndarray], folds: list[tuple[np.ndarray, np.ndarray]],
               cs: list[float], X_test: np.ndarray, *, max_iter: int = 100, tol: float = 1e-3,
               cv_tol: float | None = None, device: str | torch.device = "cpu") -> list[Fit]:
    """Cross-validated L2 logistic probes of every labelling on the same features and folds.

    X_train (n, d), X_test (m, d); labellings: (n,) integer labels of the training rows, one array per
    labelling (e.g. the task's and its control's); folds: (fit rows, held-out rows) index pairs into
    the training rows; cs: the grid of inverse penalties; ``tol`` stops the refit, ``cv_tol`` the
    cross-validation fits (None: ``tol``). Returns one :class:`Fit` per labelling."""
    return fit_layers([X_train], labellings, folds, cs, [X_test], max_iter=max_iter, tol=tol, cv_tol=cv_tol,
                      device=device)[0]


def fit_layers(X_train, labellings: list[np.ndarray], folds: list[tuple[np.ndarray, np.ndarray]], cs: list[float],
               X_test, *, max_iter: int = 100, tol: float = 1e-3, cv_tol: float | None = None,
               device: str | torch.device = "cpu") -> list[list[Fit]]:
    """:func:`fit_probes` of every layer at once: X_train, X_test sequences of (n, d) and (m, d) features
    (one pair per layer; the same rows, labellings and folds). Every layer's fits join one batch (each
    problem's path is its own, so the result is each layer's :func:`fit_probes`); returns one list of
    :class:`Fit` per layer.

    Layers join a batch while its weights stay small (``BATCH_BYTES``): the solver's vector work streams
    over all of a batch's weights several times per iteration, which is cheap only while they fit a cache."""
    X_train, X_test = list(X_train), list(X_test)
    d, K = np.shape(X_train[0])[1], max(max(len(np.unique(y)) for y in labellings), 2)
    per_layer = len(folds) * len(labellings) * len(cs) * K * (d + 1) * 4  # bytes of one layer's stage-1 weights
    step = max(1, BATCH_BYTES // per_layer)
    if len(X_train) > step:
        return [fits for a in range(0, len(X_train), step)
                for fits in fit_layers(X_train[a:a + step], labellings, folds, cs, X_test[a:a + step],
                                       max_iter=max_iter, tol=tol, cv_tol=cv_tol, device=device)]
    dev = torch.device(device)
    dt = torch.float32
    Zs, Zts = [], []
    for X_tr, X_te in zip(X_train, X_test):
        n, d = np.shape(X_tr)
        Xtr, Xte = standardise(X_tr, X_te)
        A = torch.as_tensor(Xtr, dtype=dt, device=dev)
        # eigenbasis of the training split's Gram matrix: an orthogonal rotation (only the preconditioner
        # depends on how exact it is), so float32 throughout
        _, V = torch.linalg.eigh(A.T @ A)
        Zs.append(torch.cat([A @ V, torch.ones(n, 1, dtype=dt, device=dev)], 1))  # (n, d + 1)
        Zts.append(torch.cat([torch.as_tensor(Xte, dtype=dt, device=dev) @ V,
                              torch.ones(len(Xte), 1, dtype=dt, device=dev)], 1))

    classes = [np.unique(y) for y in labellings]
    k = [max(len(c), 2) for c in classes]
    y = torch.as_tensor(np.stack([np.searchsorted(c, yl) for c, yl in zip(classes, labellings)]), device=dev)
    factor = np.array([2.0 if len(c) == 2 else 1.0 for c in classes])  # binomial = zero-sum softmax, 2x penalty
    L, J, F, nc = len(Zs), len(labellings), len(folds), len(cs)
    K = max(k)

    # stage 1: every layer x fold x labelling x C at once; group = layer x fold
    rows = [torch.as_tensor(np.asarray(tr), device=dev) for tr, _ in folds]
    ys = [y[:, r].T.contiguous() for r in rows]
    ly, fo, lab, ci = (a.ravel() for a in np.meshgrid(np.arange(L), np.arange(F), np.arange(J), np.arange(nc),
                                                      indexing="ij"))
    grp = ly * F + fo
    lam = factor[lab] / (np.asarray(cs, np.float64)[ci] * np.array([len(tr) for tr, _ in folds])[fo])
    probs = _Problems([Z[r] for Z in Zs for r in rows], [ys[f] for _ in Zs for f in range(F)], k, grp, lab, lam)
    W, _ = probs.minimise(torch.zeros(len(grp), K, d + 1, dtype=dt, device=dev), max_iter,
                          tol if cv_tol is None else cv_tol)
    acc = np.zeros((L, J, F, nc))
    for g in range(L * F):
        te = np.asarray(folds[g % F][1])
        te_t = torch.as_tensor(te, device=dev)
        a, b = probs.span[g]
        logits = (Zs[g // F][te_t] @ W[a:b].reshape(-1, d + 1).T).view(len(te), b - a, K)
        labs = torch.as_tensor(lab[a:b], device=dev)
        if probs.mask is not None:
            logits = logits + probs.mask[labs]
        hit = (logits.argmax(2) == y[:, te_t][labs].T).double().mean(0).cpu().numpy()
        acc[g // F, lab[a:b], g % F, ci[a:b]] = hit
    best = acc.sum(2).argmax(2)  # (L, J) first best C of the grid

    # stage 2: refit each layer x labelling on the whole training split, from the folds' mean at its C
    W0 = torch.stack([W[np.flatnonzero((ly == li) & (lab == j) & (ci == best[li, j]))].mean(0)
                      for li in range(L) for j in range(J)])
    l2, j2 = np.repeat(np.arange(L), J), np.tile(np.arange(J), L)
    lam2 = factor[j2] / (np.asarray(cs, np.float64)[best[l2, j2]] * n)
    ref = _Problems(Zs, [y.T.contiguous()] * L, k, l2, j2, lam2)
    W2, it2 = ref.minimise(W0, max_iter, tol)
    out = []
    for li, Zt in enumerate(Zts):
        logits = (Zt @ W2[li * J:(li + 1) * J].reshape(-1, d + 1).T).view(len(Zt), J, K)
        if ref.mask is not None:
            logits = logits + ref.mask
        pick = logits.argmax(2).cpu().numpy()  # (m, J)
        out.append([Fit(pred=classes[j][np.minimum(pick[:, j], len(classes[j]) - 1)], C=float(cs[best[li, j]]),
                        n_params=(d + 1) * len(classes[j]) if len(classes[j]) > 2 else d + 1,
                        cv_accuracy=acc[li, j], n_iter=int(it2[li * J + j])) for j in range(J)])
    return out


__all__ = ["DESCRIPTION", "Fit", "fit_layers", "fit_probes", "standardise"]
