"""analyses.probing.fit against scikit-learn's Pipeline(StandardScaler, LogisticRegressionCV) on planted data.

Tolerance: held-out accuracy within 0.02 of scikit-learn's (both stop at the same gradient tolerance, so their
solutions differ a little; 0.02 is 4 of 200 test items) and the refit's objective within 1e-3 of the optimum.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from analyses.probing.fit import fit_probes, standardise

CS = [0.001, 0.01, 0.1, 1.0]


def planted(n: int, d: int, k: int, seed: int, signal: float = 1.0, rank: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Correlated, anisotropic features (a few strong directions, like hidden states) whose labels are a noisy
    linear function of them."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d)) * 3 + rng.standard_normal((n, d))
    X = (base * rng.uniform(0.1, 5, d) + rng.uniform(-3, 3, d)).astype(np.float32)
    W = rng.standard_normal((d, k)) * signal / np.sqrt(d)
    Zs = (X - X.mean(0)) / X.std(0)
    y = (Zs @ W + rng.gumbel(size=(n, k))).argmax(1)
    return X, y


def sklearn_probe(Xtr, ytr, Xte, folds, max_iter=100, tol=1e-3):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    lr = LogisticRegressionCV(Cs=CS, l1_ratios=(0.0,), cv=folds, solver="lbfgs", max_iter=max_iter, tol=tol,
                              scoring="accuracy", use_legacy_attributes=False)
    probe = make_pipeline(StandardScaler(), lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        probe.fit(np.asarray(Xtr, np.float64), ytr)
    return probe.predict(np.asarray(Xte, np.float64)), float(np.ravel(probe[-1].C_)[0]), probe[-1]


def folds_of(y, k=3, seed=0):
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(y, y))


@pytest.mark.parametrize("k,seed", [(2, 0), (5, 1), (12, 2)])
def test_held_out_accuracy_matches_scikit_learn(k, seed):
    X, y = planted(800, 48, k, seed)
    tr, te = np.arange(600), np.arange(600, 800)
    folds = folds_of(y[tr], seed=seed)
    ref_pred, ref_c, ref = sklearn_probe(X[tr], y[tr], X[te], folds)
    (fit,) = fit_probes(X[tr], [y[tr]], folds, CS, X[te])
    ours, theirs = (fit.pred == y[te]).mean(), (ref_pred == y[te]).mean()
    assert abs(ours - theirs) <= 0.02, (ours, theirs, fit.C, ref_c)
    assert fit.n_params == ref.coef_.size + ref.intercept_.size
    # the fold accuracies that chose C: the same fits, so the same scores (up to a few items per fold)
    sk_scores = ref.scores_
    sk_scores = np.asarray(next(iter(sk_scores.values())) if isinstance(sk_scores, dict) else sk_scores)
    sk_scores = sk_scores.reshape(len(folds), len(CS))
    assert np.abs(fit.cv_accuracy - sk_scores).max() <= 0.03
    assert fit.C == ref_c or abs(fit.cv_accuracy.sum(0).max() - sk_scores.sum(0).max()) <= 0.03


def test_refit_reaches_the_optimum_of_scikit_learns_objective():
    """At a fixed C (a one-value grid) and a tight tolerance, predictions equal those of scikit-learn's
    converged fit, so the objective is the same (penalty scale, unpenalised intercept, binary = binomial)."""
    from sklearn.linear_model import LogisticRegression

    for k in (2, 4):
        X, y = planted(500, 20, k, 3 + k, signal=2.0)
        tr, te = np.arange(400), np.arange(400, 500)
        Xs, Xt = standardise(X[tr], X[te])
        ref = LogisticRegression(C=0.05, tol=1e-10, max_iter=5000).fit(Xs, y[tr])
        (fit,) = fit_probes(X[tr], [y[tr]], folds_of(y[tr]), [0.05], X[te], max_iter=500, tol=1e-6)
        assert fit.C == 0.05
        agree = (fit.pred == ref.predict(Xt)).mean()
        assert agree >= 0.99, agree


def test_task_and_control_in_one_batch_equal_separate_fits():
    X, y = planted(600, 32, 4, 7)
    control = np.random.default_rng(0).integers(0, 3, 600)  # fewer classes than the task
    tr, te = np.arange(450), np.arange(450, 600)
    folds = folds_of(y[tr])
    both = fit_probes(X[tr], [y[tr], control[tr]], folds, CS, X[te])
    alone = [fit_probes(X[tr], [lab[tr]], folds, CS, X[te])[0] for lab in (y, control)]
    for a, b in zip(both, alone):
        assert a.C == b.C and np.array_equal(a.pred, b.pred)
    assert set(np.unique(both[1].pred)) <= {0, 1, 2}


def test_same_inputs_give_identical_results():
    X, y = planted(500, 40, 6, 11)
    tr, te = np.arange(380), np.arange(380, 500)
    folds = folds_of(y[tr])
    a = fit_probes(X[tr], [y[tr]], folds, CS, X[te])[0]
    b = fit_probes(X[tr].copy(), [y[tr].copy()], folds, CS, X[te].copy())[0]
    assert a.C == b.C and np.array_equal(a.pred, b.pred) and np.array_equal(a.cv_accuracy, b.cv_accuracy)


def test_labels_keep_their_values_and_constant_columns_are_harmless():
    X, y = planted(400, 16, 3, 5, signal=3.0)
    X[:, 3] = 7.0  # a constant column (scale 1 after standardising, as scikit-learn)
    labels = np.array([10, 20, 30])[y]
    tr, te = np.arange(300), np.arange(300, 400)
    (fit,) = fit_probes(X[tr], [labels[tr]], folds_of(labels[tr]), CS, X[te])
    assert set(np.unique(fit.pred)) <= {10, 20, 30}
    assert (fit.pred == labels[te]).mean() > 0.6
    assert torch.get_num_threads() >= 1


def test_layers_in_one_batch_equal_each_layer_alone():
    """fit_layers: every layer's fits in one batch are that layer's fit_probes (each problem keeps its own path)."""
    from analyses.probing.fit import fit_layers

    (X, y), (X2, _) = planted(500, 24, 4, 13), planted(500, 24, 4, 14)
    X3 = X + np.random.default_rng(1).standard_normal(X.shape).astype(np.float32)
    control = np.random.default_rng(2).integers(0, 3, 500)
    tr, te = np.arange(380), np.arange(380, 500)
    folds = folds_of(y[tr])
    layers = [X, X2, X3]
    batched = fit_layers([x[tr] for x in layers], [y[tr], control[tr]], folds, CS, [x[te] for x in layers])
    for x, fits in zip(layers, batched):
        for a, b in zip(fits, fit_probes(x[tr], [y[tr], control[tr]], folds, CS, x[te])):
            assert a.C == b.C and (a.pred == b.pred).mean() >= 0.99
            assert np.abs(a.cv_accuracy - b.cv_accuracy).max() <= 0.01


def test_cv_tol_stops_only_the_cross_validation_fits():
    """``cv_tol`` reaches the fold fits alone: at the default they stop at ``tol`` (the same fits as cv_tol=tol);
    a huge one leaves them at W = 0, so every C scores the same and the first C of the grid is chosen, while
    the refit still converges."""
    X, y = planted(400, 16, 3, 7)
    tr, te = np.arange(300), np.arange(300, 400)
    folds = folds_of(y[tr])
    (a,), (b,) = (fit_probes(X[tr], [y[tr]], folds, CS, X[te], cv_tol=t) for t in (None, 1e-3))
    assert np.array_equal(a.pred, b.pred) and np.array_equal(a.cv_accuracy, b.cv_accuracy) and a.C == b.C
    (c,) = fit_probes(X[tr], [y[tr]], folds, CS, X[te], cv_tol=1e9)
    assert (c.cv_accuracy == c.cv_accuracy[:, :1]).all() and c.C == CS[0] and c.n_iter > 0
