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
  the same objective scale) or after ``max_iter`` iterations.

Why it is cheap. (1) The features are rotated once per layer into the eigenbasis of the training
split's Gram matrix (orthogonal, so the L2 penalty and the model are unchanged); there a diagonal
preconditioner (Boehning's bound on the multinomial Hessian, 1/2 Z'Z / n, plus the penalty) is close to
the inverse Hessian, so L-BFGS started from it needs few iterations even on strongly correlated hidden
states, where scikit-learn's runs into its cap. (2) All fits that share rows share one float32 matrix
product per iteration: for each fold, the problems of every C and labelling are columns of one GEMM;
a problem that has converged leaves the batch. Each problem keeps its own L-BFGS memory, step and
backtracking (Armijo) line search, so the batch changes no problem's path.

Pure torch (``device`` may be a GPU); deterministic: the same inputs give the same results.
Agreement with scikit-learn on planted data: tests/test_probing_fit.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

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
    """StandardScaler fitted on X_train (float64 statistics; constant columns keep scale 1)."""
    Xtr = np.asarray(X_train, np.float64)
    mean, std = Xtr.mean(0), Xtr.std(0)
    std = np.where(std < 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0), 1.0, std)
    return (Xtr - mean) / std, (np.asarray(X_test, np.float64) - mean) / std


class _Problems:
    """A batch of independent L2 logistic regressions on row subsets ("groups") of one design Z (n, d + 1;
    the last column is the intercept's 1). Problem p uses the rows of group ``group[p]`` with labels
    ``labels[lab[p]]`` and penalty ``lam[p]`` on every coordinate but the intercept."""

    def __init__(self, Z: torch.Tensor, rows: list[torch.Tensor], y: torch.Tensor, k: list[int],
                 group: np.ndarray, lab: np.ndarray, lam: np.ndarray):
        self.Z, self.d1 = Z, Z.shape[1]
        self.group, self.lab = group, lab
        self.P, self.K = len(group), max(k)
        dev, dt = Z.device, Z.dtype
        self.lam = torch.as_tensor(lam, dtype=dt, device=dev)
        self.Zg = [Z[r] for r in rows]  # (n_g, d + 1) contiguous rows of each group
        self.yg = [y[:, r].T.contiguous() for r in rows]  # (n_g, labellings) class index of each row
        kk = torch.as_tensor(k, device=dev)
        self.mask = None  # labellings with fewer classes than K: their extra columns never win
        if min(k) < self.K:
            self.mask = torch.where(torch.arange(self.K, device=dev)[None, :] < kk[:, None], 0.0, -1e30).to(dt)
        # diagonal preconditioner (d + 1, P): the loss's curvature c Z'Z / n (diagonal in the eigenbasis) + penalty
        h = torch.stack([(zg * zg).mean(0) for zg in self.Zg])  # (groups, d + 1)
        pen = torch.ones(self.d1, dtype=dt, device=dev)
        pen[-1] = 0.0
        # curvature of the softmax loss at W = 0 on the zero-sum subspace: 1/K (Boehning's bound, 1/2, is
        # an upper bound that is K/2 times too loose for many classes)
        c = torch.as_tensor([1.0 / k[j] for j in lab], dtype=dt, device=dev)
        self.H0 = 1.0 / (c[None, :] * h[torch.as_tensor(group, device=dev)].T + self.lam[None, :] * pen[:, None])
        self.pen = pen

    def evaluate(self, W: torch.Tensor, which: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Objective (P,) float64 and gradient (d + 1, P, K) of the problems ``which`` (bool, P) at W
        (d + 1, P, K); the others' entries are 0."""
        f = torch.zeros(self.P, dtype=torch.float64, device=W.device)
        G = torch.zeros_like(W)
        for g, (zg, yg) in enumerate(zip(self.Zg, self.yg)):
            idx = np.flatnonzero(which & (self.group == g))
            if not len(idx):
                continue
            it = torch.as_tensor(idx, device=W.device)
            Wp = W[:, it]  # (d + 1, p, K)
            n, p = len(zg), len(idx)
            logits = (zg @ Wp.reshape(self.d1, p * self.K)).view(n, p, self.K)
            if self.mask is not None:
                logits = logits + self.mask[torch.as_tensor(self.lab[idx], device=W.device)]
            yi = yg[:, torch.as_tensor(self.lab[idx], device=W.device)].unsqueeze(2)  # (n, p, 1)
            top = logits.amax(2, keepdim=True)  # (n, p, 1)
            R = torch.exp(logits - top)  # softmax, one exp
            tot = R.sum(2, keepdim=True)
            loss = (torch.log(tot) + top - logits.gather(2, yi)).double().sum((0, 2)) / n  # (p,) mean log-loss
            R /= tot
            R.scatter_add_(2, yi, torch.full_like(yi, -1.0, dtype=R.dtype))
            grad = (zg.T @ R.view(n, p * self.K)).view(self.d1, p, self.K) / n
            lam = self.lam[it]
            Wpen = Wp * self.pen[:, None, None]
            grad += lam[None, :, None] * Wpen
            f[it] = loss + 0.5 * lam.double() * (Wpen * Wpen).sum((0, 2)).double()
            G[:, it] = grad
        return f, G

    def minimise(self, W: torch.Tensor, max_iter: int, tol: float) -> tuple[torch.Tensor, np.ndarray]:
        """Batched L-BFGS with per-problem memory, scaling and Armijo backtracking, from W (d + 1, P, K).
        Returns the solutions and each problem's iterations."""
        P = self.P
        run = np.ones(P, bool)
        f, G = self.evaluate(W, run)
        iters, step = np.zeros(P, np.int64), torch.ones(P, dtype=W.dtype, device=W.device)
        gamma = torch.ones(P, dtype=W.dtype, device=W.device)
        mem: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        D = -self.H0[:, :, None] * G
        for _ in range(4 * max_iter):
            gmax = G.abs().amax((0, 2)).cpu().numpy()
            run = run & (gmax > tol) & (iters < max_iter)
            if not run.any():
                break
            r = torch.as_tensor(run, device=W.device)
            Wc = W + torch.where(r, step, 0.0)[None, :, None] * D
            fc, Gc = self.evaluate(Wc, run)
            gd = (G * D).sum((0, 2)).double()
            ok = r & (fc <= f + ARMIJO * step.double() * gd)
            s, yv = Wc - W, Gc - G
            sy = (s * yv).sum((0, 2))
            good = ok & (sy > 1e-12 * (s * s).sum((0, 2)).sqrt() * (yv * yv).sum((0, 2)).sqrt())
            rho = torch.where(good, 1.0 / torch.where(good, sy, 1.0), 0.0)
            okw = ok[None, :, None]
            if bool(good.any()):
                g3 = good[None, :, None]
                mem.append((torch.where(g3, s, 0.0), torch.where(g3, yv, 0.0), rho))
                if len(mem) > MEMORY:
                    mem.pop(0)
                yHy = (self.H0[:, :, None] * yv * yv).sum((0, 2))
                gamma = torch.where(good, sy / torch.where(good, yHy, 1.0), gamma)
            W, G = torch.where(okw, Wc, W), torch.where(okw, Gc, G)
            f = torch.where(ok, fc, f)
            okn = ok.cpu().numpy()
            iters += okn
            step = torch.where(ok, 1.0, torch.where(r, step * 0.5, step))
            run &= step.cpu().numpy() >= MIN_STEP
            if okn.any():  # new directions for the problems that moved
                Dn = self._direction(G, mem, gamma)
                bad = (G * Dn).sum((0, 2)) >= 0  # not a descent direction: the preconditioned gradient
                Dn = torch.where(bad[None, :, None], -self.H0[:, :, None] * G, Dn)
                D = torch.where(okw, Dn, D)
        return W, iters

    def _direction(self, G: torch.Tensor, mem: list, gamma: torch.Tensor) -> torch.Tensor:
        """-H G by the two-loop recursion, H0 = gamma * diag preconditioner, per problem."""
        q, alphas = G.clone(), []
        for s, y, rho in reversed(mem):
            a = rho * (s * q).sum((0, 2))
            q -= a[None, :, None] * y
            alphas.append(a)
        q *= (gamma[None, :] * self.H0)[:, :, None]
        for (s, y, rho), a in zip(mem, reversed(alphas)):
            b = rho * (y * q).sum((0, 2))
            q += (a - b)[None, :, None] * s
        return -q


def fit_probes(X_train: np.ndarray, labellings: list[np.ndarray], folds: list[tuple[np.ndarray, np.ndarray]],
               cs: list[float], X_test: np.ndarray, *, max_iter: int = 100, tol: float = 1e-3,
               device: str | torch.device = "cpu") -> list[Fit]:
    """Cross-validated L2 logistic probes of every labelling on the same features and folds.

    X_train (n, d), X_test (m, d); labellings: (n,) integer labels of the training rows, one array per
    labelling (e.g. the task's and its control's); folds: (fit rows, held-out rows) index pairs into
    the training rows; cs: the grid of inverse penalties. Returns one :class:`Fit` per labelling."""
    n, d = np.shape(X_train)
    Xtr, Xte = standardise(X_train, X_test)
    dev = torch.device(device)
    dt = torch.float32
    A = torch.as_tensor(Xtr, dtype=dt, device=dev)
    # eigenbasis of the training split's Gram matrix: an orthogonal rotation (only the preconditioner
    # depends on how exact it is), so float32 throughout
    _, V = torch.linalg.eigh(A.T @ A)
    ones = torch.ones(n, 1, dtype=dt, device=dev)
    Z = torch.cat([A @ V, ones], 1)  # (n, d + 1)
    Zt = torch.cat([torch.as_tensor(Xte, dtype=dt, device=dev) @ V, torch.ones(len(Xte), 1, dtype=dt, device=dev)], 1)

    classes = [np.unique(y) for y in labellings]
    k = [max(len(c), 2) for c in classes]
    y = torch.as_tensor(np.stack([np.searchsorted(c, yl) for c, yl in zip(classes, labellings)]), device=dev)
    factor = np.array([2.0 if len(c) == 2 else 1.0 for c in classes])  # binomial = zero-sum softmax, 2x penalty
    J, F, nc = len(labellings), len(folds), len(cs)
    K = max(k)

    # stage 1: every fold x labelling x C at once
    rows = [torch.as_tensor(np.asarray(tr), device=dev) for tr, _ in folds]
    grp, lab, ci = (a.ravel() for a in np.meshgrid(np.arange(F), np.arange(J), np.arange(nc), indexing="ij"))
    lam = factor[lab] / (np.asarray(cs, np.float64)[ci] * np.array([len(tr) for tr, _ in folds])[grp])
    probs = _Problems(Z, rows, y, k, grp, lab, lam)
    W, _ = probs.minimise(torch.zeros(d + 1, len(grp), K, dtype=dt, device=dev), max_iter, tol)
    acc = np.zeros((J, F, nc))
    for f, (_, te) in enumerate(folds):
        te_t = torch.as_tensor(np.asarray(te), device=dev)
        sel = np.flatnonzero(grp == f)
        logits = (Z[te_t] @ W[:, sel].reshape(d + 1, -1)).view(len(te), len(sel), K)
        if probs.mask is not None:
            logits = logits + probs.mask[torch.as_tensor(lab[sel], device=dev)]
        hit = (logits.argmax(2) == y[:, te_t][torch.as_tensor(lab[sel], device=dev)].T).double().mean(0).cpu().numpy()
        acc[lab[sel], f, ci[sel]] = hit
    best = acc.sum(1).argmax(1)  # (J,) first best C of the grid

    # stage 2: refit each labelling on the whole training split, from the folds' mean at its C
    W0 = torch.stack([W[:, np.flatnonzero((lab == j) & (ci == best[j]))].mean(1) for j in range(J)], 1)
    lam2 = factor / (np.asarray(cs, np.float64)[best] * n)
    ref = _Problems(Z, [torch.arange(n, device=dev)], y, k, np.zeros(J, np.int64), np.arange(J), lam2)
    W2, it2 = ref.minimise(W0, max_iter, tol)
    logits = (Zt @ W2.reshape(d + 1, -1)).view(len(Zt), J, K)
    if ref.mask is not None:
        logits = logits + ref.mask
    pick = logits.argmax(2).cpu().numpy()  # (m, J)
    return [Fit(pred=classes[j][np.minimum(pick[:, j], len(classes[j]) - 1)], C=float(cs[best[j]]),
                n_params=(d + 1) * len(classes[j]) if len(classes[j]) > 2 else d + 1,
                cv_accuracy=acc[j], n_iter=int(it2[j])) for j in range(J)]


__all__ = ["DESCRIPTION", "Fit", "fit_probes", "standardise"]
