"""One seed's run of causal probing's protocol: the sentence split, the erasers and their variance-matched random
controls fitted on the training words, the probe's accuracy before and after, and the model's own loss on the
held-out sentences (masked at this seed's positions) clean, erased and under each control, with this seed's
bootstrap replicates of each loss change and Holm's test over the task's layers. :mod:`analyses.causal_probing.
verdict` combines the seeds; this module is the part that runs the model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from analyses import stats
from analyses.causal_probing import erasers
from analyses.causal_probing.inputs import Items, sentence_split
from analyses.causal_probing.rows import SeedEntry
from analyses.probing import bootstrap_interval, fit_probe_layers
from probes.errors import ProbeError
from probes.intervention import Intervention

LEVEL = 0.95
ALPHA = (1 - LEVEL) / 2  # one-sided: "the excess is above 0", as the 95% interval's low end above 0 says
METHODS = ("leace", "inlp")
MATCH_TOL = 0.01  # a control's removed share of variance is the eraser's within 1% (relative)


class Scorer:
    """The objective on one seed's held-out sentences: clean once, then under each eraser; the seed's masks and
    bootstrap weights (the same resamples for every condition: paired)."""

    def __init__(self, objective, texts: list[str], cfg, seed: int):
        self.objective, self.texts, self.cfg, self.seed = objective, texts, cfg, seed
        self.clean, self.counts = objective.score(texts, (), cfg.mask_prob, seed, cfg.batch_size)
        self.W = stats.resample_weights(len(texts), cfg.n_boot, seed)  # (B, n_test)
        self.units_id = stats.units_id(texts)

    def sums(self, layer: int, eraser) -> np.ndarray:
        """(n_test,) per-sentence loss sums with ``eraser`` editing ``layer`` (None: the clean pass)."""
        if eraser is None:
            return self.clean
        return self.objective.score(self.texts, [Intervention(layer, eraser)], self.cfg.mask_prob, self.seed,
                                    self.cfg.batch_size)[0]

    def replicates(self, diff: np.ndarray) -> np.ndarray:
        """(B,) bootstrap replicates of sum(diff) / sum(scored tokens) over the held-out sentences."""
        return stats.ratio_replicates(diff, self.counts, self.W)

    def point(self, diff: np.ndarray) -> float:
        return float(diff.sum() / self.counts.sum())


@dataclass
class Draw:
    """One eraser at one layer in one seed: its entry and what the seeds' pooling needs."""

    entry: SeedEntry
    accuracy_ci: list[float]
    random_accuracy_ci: list[float]
    delta_reps: np.ndarray | None = None  # (B,)
    random_reps: np.ndarray | None = None  # (B,)
    excess_reps: np.ndarray | None = None  # (B,)
    excess_diff: np.ndarray | None = None  # (n_test,) per-sentence excess loss sums


@dataclass
class SeedLayer:
    """One layer of one task in one seed."""

    layer: int
    majority: float
    accuracy: float
    accuracy_ci: list[float]
    leace: Draw
    inlp: Draw

    def draw(self, method: str) -> Draw:
        return self.leace if method == "leace" else self.inlp


@dataclass
class SeedTask:
    """One task in one seed: its layers and the split's sizes."""

    n_train: int
    n_test: int
    layers: list[SeedLayer]


@dataclass
class SeedRun:
    """One seed's run: per task its layers; the scorer (None: no objective)."""

    seed: int
    held: np.ndarray  # (T,) bool: the held-out sentences
    tasks: list[SeedTask]
    scorer: Scorer | None


def run_seed(tasks: list[Items], acts, layers: list[int], seed: int, cfg, objective, progress) -> SeedRun:
    """Run the protocol once with ``seed`` (see the module docstring). ``progress(iterable, desc)`` wraps the
    layer loop (tqdm)."""
    held = sentence_split(acts.n_texts, cfg.test_size, seed)
    if (~held).sum() < 2:
        raise ProbeError(f"causal probing needs 2 training sentences (INLP stops on a held-out fifth of them), and "
                         f"{acts.n_texts} sentences with --test-size {cfg.test_size} leave {int((~held).sum())}; use "
                         "more sentences or a smaller --test-size")
    test_texts = np.flatnonzero(held)
    scorer = None if objective is None else Scorer(objective, [acts.texts[t] for t in test_texts], cfg, seed)
    out = []
    for items in tasks:
        test = held[items.groups]
        rows = [_layer(items, acts, layer, test, cfg, seed, scorer)
                for layer in progress(layers, f"{items.name} seed {seed}")]
        if scorer is not None:
            for m in METHODS:
                entries = [r.draw(m).entry for r in rows]
                for e, rejected in zip(entries, holm_tested([e.p_value for e in entries])):
                    e.used = rejected
        out.append(SeedTask(int((~test).sum()), int(test.sum()), rows))
    return SeedRun(seed, held, out, scorer)


def holm(p: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down test of m hypotheses with p-values ``p``: which are rejected at family-wise level
    ``alpha`` (the k-th smallest p against alpha / (m - k + 1), stopping at the first that is not below)."""
    reject = [False] * len(p)
    for k, i in enumerate(np.argsort(p, kind="stable")):
        if not p[i] < alpha / (len(p) - k):
            break
        reject[i] = True
    return reject


def holm_tested(p: list[float | None], alpha: float = ALPHA) -> list[bool]:
    """:func:`holm` over the layers that have a p-value; a layer without one (an INLP that removed nothing) is no
    hypothesis of the family, and not rejected."""
    tested = [i for i, v in enumerate(p) if v is not None]
    reject = [False] * len(p)
    for i, r in zip(tested, holm([float(p[i] or 0.0) for i in tested], alpha)):
        reject[i] = r
    return reject


def _layer(items: Items, acts, layer: int, test: np.ndarray, cfg, seed: int, scorer: Scorer | None) -> SeedLayer:
    """Fit the erasers and their controls on the training words of ``layer``, probe before and after, and score
    the objective under each."""
    X = np.asarray(acts.layer_hidden(layer, items.tokens), np.float64)  # (n, d)
    y, g = items.labels, items.groups
    train, tst = np.flatnonzero(~test), np.flatnonzero(test)
    if len(np.unique(y[train])) < 2 or len(np.unique(y[tst])) < 1:
        raise ProbeError(f"task {items.name}: the training part holds a single class; use more sentences")
    leace = erasers.leace(X[train], y[train], shrinkage=cfg.shrinkage)
    inlp = erasers.inlp(X[train], y[train], g[train], cfg.inlp_iterations, C=cfg.inlp_c, seed=seed)
    fitted = {"leace": leace, "inlp": inlp.eraser}
    spectrum = erasers.Spectrum.of(X[train])
    shares, controls = {}, {}
    for k, m in enumerate(METHODS):
        e = fitted[m]
        shares[m] = 0.0 if e is None else erasers.removed_share(e, X[train])
        controls[m] = [] if e is None else [erasers.matched_random(spectrum, e.rank, shares[m], seed * 1000 + 97 * k
                                                                   + j, MATCH_TOL) for j in range(cfg.random_draws)]
    features = [X] + [X if e is None else e.apply_numpy(X) for e in (leace, inlp.eraser)]
    features += [X if not controls[m] else controls[m][0].eraser.apply_numpy(X) for m in METHODS]
    fits = fit_probe_layers(features, y, train, tst, g, dataclasses.replace(cfg, seed=seed))
    scores = [_accuracy(f["pred"], y[tst], g[tst], cfg, seed) for f in fits]
    majority = float((y[tst] == np.bincount(y[train]).argmax()).mean())
    draws = []
    for k, m in enumerate(METHODS):
        e = fitted[m]
        entry = SeedEntry(seed=seed, rank=0 if e is None else e.rank, accuracy=scores[1 + k][0],
                          random_accuracy=scores[3 + k][0], removed_variance=shares[m],
                          random_removed_variance=[c.share for c in controls[m]],
                          random_rank=[c.rank for c in controls[m]])
        if m == "inlp":
            entry.iterations, entry.dev_accuracy, entry.dev_majority = (inlp.iterations, inlp.dev_accuracy,
                                                                        inlp.dev_majority)
        draw = Draw(entry, scores[1 + k][1], scores[3 + k][1])
        if scorer is not None:
            erased = scorer.sums(layer, e)
            rand = (np.mean([scorer.sums(layer, c.eraser) for c in controls[m]], axis=0) if controls[m]
                    else scorer.clean)
            draw.excess_diff = erased - rand  # (n_test,)
            draw.delta_reps = scorer.replicates(erased - scorer.clean)
            draw.random_reps = scorer.replicates(rand - scorer.clean)
            draw.excess_reps = scorer.replicates(draw.excess_diff)
            entry.delta_loss = scorer.point(erased - scorer.clean)
            entry.random_delta_loss = scorer.point(rand - scorer.clean)
            entry.excess_loss = scorer.point(draw.excess_diff)
            entry.excess_loss_ci = stats.interval(draw.excess_reps, LEVEL).tolist()
            # no excess at all (an INLP that removed nothing) is no test: left out of Holm's family
            entry.p_value = None if e is None else float(np.mean(draw.excess_reps <= 0))
        draws.append(draw)
    return SeedLayer(layer, majority, scores[0][0], scores[0][1], draws[0], draws[1])


def _accuracy(pred, truth, groups, cfg, seed: int) -> tuple[float, list[float]]:
    ok = (np.asarray(pred) == truth).astype(np.float64)
    return float(ok.mean()), list(bootstrap_interval(ok, groups, cfg.n_boot, seed, LEVEL))
