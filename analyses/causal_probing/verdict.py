"""Causal probing over several seeds: each seed's runs of the protocol (:mod:`analyses.causal_probing.protocol`)
combined into one row per task, layer and eraser, with the verdict per layer.

* numbers: the mean over seeds; the loss changes' intervals pool every seed's bootstrap replicates (N seeds x B
  resamples of its held-out sentences: the spread of the split, the masks, the random controls and INLP's split
  as well as of the held-out sentences); the accuracies' interval is the envelope of the seeds' 95% intervals;
* the verdict of a layer, from two tests of "the excess is above 0", each Holm's step-down test over the task's
  layers (one-sided, family-wise level 2.5%; p = the share of bootstrap replicates of the excess at or below 0):
  the **pooled** test, on every seed's replicates together (the interval the result shows: a layer whose pooled
  interval lies above 0 passes it, up to Holm's correction), and each **seed's** own test. A layer is **used**
  when the pooled test rejects and every seed's test does, **not used** when the pooled test does not and fewer
  than half the seeds' do, and **inconclusive** otherwise (most seeds say used but the pooled replicates do not
  bear it out, or the pooled test rejects but a seed's does not).

  The rule is asymmetric on purpose. "Used" is the claim, so every draw must bear it out. A seed's own test
  leaves out the spread between seeds and rejects more often than the pooled one, so one seed of three that says
  used, unsupported by the pooled replicates, is what chance gives (on bert-small's embeddings, INLP removes two
  or three classifiers' directions depending on its dev split, and of seeds 0-4 one is significant on its own):
  counting it as a disagreement would make the verdict depend on which seeds were run. With base seeds 0, 1 and
  2 on the same 400 sentences, none of bert-small's 30 verdicts (3 tasks x 5 layers x 2 erasers) moves between
  used and not used, and token identity's are the same at every layer; 7 of position's and sentence length's
  move between inconclusive and not used.
"""

from __future__ import annotations

import numpy as np

from analyses import stats
from analyses.causal_probing.inputs import Items
from analyses.causal_probing.protocol import LEVEL, METHODS, Draw, SeedRun, holm_tested
from analyses.causal_probing.rows import HeldOut, LayerRow, MethodRow, TaskRow


def verdict(pooled: bool, used: list[bool]) -> str:
    """used / not used / inconclusive of one layer from the pooled test (``pooled``: it rejects "excess <= 0") and
    each seed's (``used``)."""
    if pooled and all(used):
        return "used"
    return "not used" if not pooled and 2 * sum(used) < len(used) else "inconclusive"


def pooled_p(draws: list[Draw], excess: np.ndarray | None) -> float | None:
    """The share of every seed's bootstrap replicates of the excess (``excess``, pooled) at or below 0 (None: no
    eraser in any seed removed anything, or no loss was measured: no test)."""
    if excess is None or all(d.entry.p_value is None for d in draws):
        return None
    return float(np.mean(excess <= 0))


def envelope(cis: list[list[float]]) -> list[float]:
    return [float(min(c[0] for c in cis)), float(max(c[1] for c in cis))]


def _joined(reps: list[np.ndarray | None]) -> np.ndarray | None:
    """Every seed's bootstrap replicates, pooled (None where a seed has none)."""
    return None if any(r is None for r in reps) else np.concatenate([r for r in reps if r is not None])


def _pooled(reps: np.ndarray | None) -> list[float] | None:
    return None if reps is None else stats.interval(reps, LEVEL).tolist()


def _mean(values) -> float:
    return float(np.mean([float(v) for v in values]))


def method_row(draws: list[Draw], scored: bool) -> MethodRow:
    """One eraser at one layer over the seeds' draws (the first seed's first)."""
    first = draws[0].entry
    row = MethodRow(rank=first.rank, accuracy=_mean(d.entry.accuracy for d in draws),
                    accuracy_ci=envelope([d.accuracy_ci for d in draws]),
                    random_accuracy=_mean(d.entry.random_accuracy for d in draws),
                    random_accuracy_ci=envelope([d.random_accuracy_ci for d in draws]),
                    removed_variance=_mean(d.entry.removed_variance for d in draws),
                    random_removed_variance=(_mean(s for d in draws for s in d.entry.random_removed_variance)
                                             if any(d.entry.random_removed_variance for d in draws) else 0.0),
                    iterations=first.iterations, dev_accuracy=first.dev_accuracy, dev_majority=first.dev_majority,
                    seeds=[d.entry for d in draws])
    if scored:
        row.delta_loss = _mean(d.entry.delta_loss for d in draws)
        row.random_delta_loss = _mean(d.entry.random_delta_loss for d in draws)
        row.excess_loss = _mean(d.entry.excess_loss for d in draws)
        excess = _joined([d.excess_reps for d in draws])
        row.delta_loss_ci = _pooled(_joined([d.delta_reps for d in draws]))
        row.random_delta_loss_ci = _pooled(_joined([d.random_reps for d in draws]))
        row.excess_loss_ci = _pooled(excess)
        row.p_value = pooled_p(draws, excess)
        row.used_in = sum(bool(d.entry.used) for d in draws)
    return row


def decide(rows: list[MethodRow]) -> None:
    """Each row's verdict: Holm over the task's layers on the pooled p-values (a row without one is no test, and
    not used), then :func:`verdict` with the seeds' own tests."""
    for r, rejected in zip(rows, holm_tested([r.p_value for r in rows])):
        r.verdict = verdict(rejected, [bool(e.used) for e in r.seeds])


def task_rows(tasks: list[Items], runs: list[SeedRun]) -> list[TaskRow]:
    """One :class:`TaskRow` per task from every seed's run (``runs``, the first seed's first)."""
    out = []
    for t, items in enumerate(tasks):
        per_seed = [run.tasks[t] for run in runs]
        rows = []
        for k, first in enumerate(per_seed[0].layers):
            layer = [s.layers[k] for s in per_seed]
            rows.append(LayerRow(
                layer=first.layer, majority=_mean(s.majority for s in layer),
                accuracy=_mean(s.accuracy for s in layer), accuracy_ci=envelope([s.accuracy_ci for s in layer]),
                leace=method_row([s.leace for s in layer], runs[0].scorer is not None),
                inlp=method_row([s.inlp for s in layer], runs[0].scorer is not None)))
        if runs[0].scorer is not None:
            for m in METHODS:
                decide([r.method(m) for r in rows])
        held = []
        for run, seeded in zip(runs, per_seed):
            if run.scorer is None:
                continue
            diffs = [s.leace.excess_diff for s in seeded.layers if s.leace.excess_diff is not None]
            held.append(HeldOut(run.seed, run.scorer.units_id, np.mean(diffs, axis=0).tolist(),
                                run.scorer.counts.tolist()))
        out.append(TaskRow(task=items.name, n_items=len(items.labels), n_train=per_seed[0].n_train,
                           n_test=per_seed[0].n_test, n_classes=len(items.classes), classes=items.classes,
                           notes=items.notes, layers=rows, held_out=held))
    return out


def layer_verdicts(entry: TaskRow, method: str) -> dict[int, str] | None:
    """Layer -> verdict of ``method`` for one task (None: no loss was measured). A file written before the
    verdicts existed (one seed, no test across layers) reads each layer as its 95% interval says: used when it
    lies above 0, else not used."""
    if method not in METHODS:
        raise ValueError(method)
    rows = [r for r in entry.layers if r.method(method).excess_loss_ci is not None]
    if not rows:
        return None
    out = {}
    for r in rows:
        m = r.method(method)
        ci = m.excess_loss_ci or [0.0, 0.0]
        out[r.layer] = m.verdict if m.verdict is not None else ("used" if ci[0] > 0 else "not used")
    return out


def headline_sample(entry: TaskRow, resamples: int) -> stats.Sample | None:
    """LEACE's excess loss averaged over the task's layers, mean over seeds, with every seed's bootstrap
    replicates pooled (each seed's resampled with its own weights, so two results of the same sentences and
    seeds pair); None without a measured loss."""
    if not entry.held_out:
        return None
    points, reps = [], []
    for h in entry.held_out:
        diff, counts = np.asarray(h.excess_sums, np.float64), np.asarray(h.scored_tokens, np.float64)
        points.append(float(diff.sum() / counts.sum()))
        reps.append(stats.ratio_replicates(diff, counts, stats.resample_weights(len(diff), resamples, h.seed)))
    pairing = ("|".join(h.units_id for h in entry.held_out), tuple(h.seed for h in entry.held_out), resamples)
    return stats.Sample(float(np.mean(points)), np.concatenate(reps), sum(len(h.excess_sums) for h in entry.held_out),
                        "sentence", pairing, LEVEL)
