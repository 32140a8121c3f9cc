"""Causal probing: does the model use what a probe reads at a layer? (amnesic probing, Elazar et al. 2021)

For every task (word items, :mod:`analyses.causal_probing.inputs`: position, token_identity (the N most frequent
word types and "other", over every word), and the sentence tasks sent_len, word_content, source with each word
labelled by its sentence; from Python also the caller's own labels, ``run(model, texts, labels=...)``: a label
per text, a label per token or a function of the text, :mod:`analyses.causal_probing.labels`) and every layer l:

* the sentences are split once, seeded, into a training part and a held-out part (``--test-size``), shared by
  every task; erasers and probes are fitted on the training part's words only;
* two erasers of the task's concept from layer l's word states: LEACE (closed form, Belrose et al. 2023; rank <=
  K - 1 for K classes) and INLP (iterative nullspace projection, Ravfogel et al. 2020: at most
  ``--inlp-iterations`` logistic classifiers), and for each a control that erases a random subspace of the same
  rank (LEACE's in its whitened coordinates: the same share of whitened variance; INLP's orthonormal), ``--random-
  draws`` of them (:mod:`analyses.causal_probing.erasers`);
* the probe's accuracy after erasure: probing's linear probe (standardised logistic regression, C by
  cross-validation on the training part) refitted on the erased training states and scored on the erased held-out
  states, with a 95% bootstrap interval over held-out sentences, against the majority baseline (LEACE's should fall
  to it) and against the probe on the unerased states;
* the change in the model's own objective when the eraser edits layer l during the forward pass
  (:mod:`probes.intervention`, every real token of the layer, special tokens included): masked-LM loss for an
  encoder (a seeded 15% of each held-out sentence's tokens masked, the same positions in every condition),
  next-token loss for a causal LM (:mod:`probes.capture.objective`), in nats per scored token, over the held-out
  sentences. ``delta_loss`` = loss(erased) - loss(clean); ``excess_loss`` = delta_loss(eraser) -
  delta_loss(random control, mean over draws): the cost of removing this concept beyond removing as much of the
  states at random. Intervals: 95% percentile bootstrap over held-out sentences, paired (the same resamples for
  every condition; a ratio of summed losses to summed scored tokens). An excess whose interval lies above 0 says
  the model uses the property at that layer (more than an arbitrary subspace of that size).

A model without a head to score its objective (a bare ``BertModel`` object) gets the accuracies only; the result
says why. For the S-LSTM an edit reaches its token states h (hidden[l]), not its cell states c, which carry what
was erased on to the next step (probes.intervention.sites).

    $ python -m analyses.causal_probing --model bert-small [--model slstm-small] [--task position --task sent_len]
          [--layer 2] [--n-sentences 1000] [--out out]

Public pieces: :func:`leace` and :func:`inlp` (the erasers, on any (n, d) states and (n,) labels) and
:func:`word_states` (a layer's labelled word states X (n, d), y (n,) and their texts (n,), for a task or labels).

Writes out/results/causal_probing/<model>.json (+ .csv, one row per task and layer) and
out/figures/causal-probing.{png,pdf} (excess loss by relative depth, one panel per task, one line per model) and
causal-probing-accuracy.{png,pdf} (the probe's accuracy before and after LEACE, and the majority baseline).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.causal_probing import erasers
from analyses.causal_probing.erasers import inlp, leace
from analyses.causal_probing.inputs import TASKS, CausalInputs, sentence_split, task_items
from analyses.causal_probing.labels import WordStates, user_items, word_states
from analyses.common import SentenceConfig, activations_identity
from analyses.probing import bootstrap_interval, fit_probe_layers
from probes.capture.activations import layer_index
from probes.config import arg, tqdm_class
from probes.errors import ProbeError
from probes.intervention import Intervention

LEVEL = 0.95
METHODS = ("leace", "inlp")


@dataclass
class Config(SentenceConfig):
    """Erase each probed property at each layer (LEACE, INLP) and measure the probe's accuracy and the model's own
    loss against random erasures of the same rank (--seed: the sample, splits, masks, controls and bootstrap)."""

    n_sentences: int = arg(1000, "random sentences (the same sample and cache as the other sentence analyses)", min=2)
    task: list[str] = arg(["position", "token_identity", "sent_len"], f"tasks, from: {', '.join(TASKS)}",
                          choices=TASKS)
    layer: list[int] = arg([], "layers to erase at (0 = embeddings, -1 = last); none given: every layer", min=-1)
    max_items: int = arg(2000, "at most this many words per task (seeded)", min=10)
    test_size: float = arg(0.25, "share of the sentences held out (probe test, objective)", min=0.05, max=0.95)
    inlp_iterations: int = arg(10, "INLP: at most this many classifiers' directions removed", min=1)
    inlp_c: float = arg(1.0, "INLP: inverse L2 strength of its logistic classifiers", min=1e-12)
    shrinkage: bool = arg(True, "LEACE: shrink the covariance towards a multiple of the identity (--no-shrinkage: "
                                "the sample covariance)")
    random_draws: int = arg(2, "random subspaces per eraser for the control (their mean loss change)", min=1)
    mask_prob: float = arg(0.15, "masked-LM objective: share of each sentence's tokens masked", min=0.01, max=0.9)
    cs: list[float] = arg([0.01, 0.1, 1.0], "grid of inverse L2 strengths C of the accuracy probe", min=1e-12)
    cv_folds: int = arg(3, "cross-validation folds on the training part that choose the probe's C", min=2)
    max_iter: int = arg(100, "lbfgs iterations per probe fit", min=1)
    tol: float = arg(1e-3, "lbfgs stopping tolerance of the probe's refit", min=0.0)
    cv_tol: float = arg(0.0, "lbfgs stopping tolerance of the cross-validation fits (0: --tol)", min=0.0)
    n_boot: int = arg(1000, "bootstrap resamples of the held-out sentences", min=1)
    min_per_class: int = arg(10, "a class needs at least this many items (else it is dropped)", min=1)
    sent_len_bins: int = arg(3, "sent_len classes (length bins)", min=2)
    word_content_vocab: int = arg(1000, "word_content: at most this many mid-frequency words", min=2)
    word_content_skip: int = arg(100, "word_content: skip this many most frequent words", min=0)
    position_bins: int = arg(3, "position classes (relative position bins)", min=2)
    identity_types: int = arg(10, "token_identity: the N most frequent word types", min=2)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's causal probing: per task and layer the erasers' ranks, the probe's accuracy before and after
    erasure and the loss changes; the objective's clean loss on the held-out sentences."""

    scikit_learn: str
    definitions: dict
    objective: dict  # kind, masking, n_texts, scored_tokens, loss (+ interval); or {"skipped": why}
    tasks: list[dict]  # per task: task, classes, sizes, layers (one row each, see compute)
    bootstrap: dict | None = None  # over held-out sentences (stats.bootstrap_block)
    skipped: list[dict] = field(default_factory=list)

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the first task's LEACE excess loss per layer."""
        return common.as_floats(row["leace"]["excess_loss"] for row in self.tasks[0]["layers"])

    def headline(self) -> dict[str, str]:
        out = {}
        for t in self.tasks:
            rows = [r for r in t["layers"] if r["leace"].get("excess_loss") is not None]
            if rows:
                best = max(rows, key=lambda r: r["leace"]["excess_loss"])
                lo, hi = best["leace"]["excess_loss_ci"]
                out[t["task"]] = (f"LEACE at layer {best['layer']}: loss +{best['leace']['excess_loss']:.3f} "
                                  f"[{lo:.3f}, {hi:.3f}] nats beyond random; accuracy {best['accuracy']:.2f} -> "
                                  f"{best['leace']['accuracy']:.2f} (majority {best['majority']:.2f})")
            else:
                r = t["layers"][-1]
                out[t["task"]] = (f"layer {r['layer']}: accuracy {r['accuracy']:.2f} -> {r['leace']['accuracy']:.2f} "
                                  f"after LEACE (majority {r['majority']:.2f})")
        return out

    @style.drawing
    def plot(self, ax=None, task: str | None = None, method: str = "leace", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: the excess loss
        (``method``'s loss change minus its random control's, nats per token) of ``task`` (default: the first)
        against relative depth, with its 95% band; no title unless ``title=``. ``kwargs`` (``color=``, ``label=``
        ...) go to the line; fonts and colours follow the caller's rcParams. Returns the Axes."""
        entry = _task_entry(self, task)
        ax = style.one_axes(ax, (3.6, 2.8))
        _excess_panel(ax, [style.on_axes(ax, self, kwargs)], entry["task"], method)
        return style.finish(ax)


def used_layers(result: Result, task: str, method: str = "leace") -> list[int] | None:
    """The layers where erasing ``task`` with ``method`` raises the model's loss more than a random erasure of the
    same rank, the excess's interval above 0 (None: the task was not run, or the loss was not measured).

    One run's verdict: the interval resamples the held-out sentences only, not what the run's ``seed`` also draws
    (the sentence sample, the split, the masked positions, the random control, INLP's own split), so another seed
    can move a layer across 0. Read a layer as used only where runs of several seeds agree."""
    if method not in METHODS:
        raise ProbeError(f"causal probing has no method {method!r}; its methods are {', '.join(METHODS)}")
    entry = next((t for t in result.tasks if t["task"] == task), None)
    rows = [] if entry is None else [r for r in entry["layers"] if r[method].get("excess_loss_ci") is not None]
    if not rows:
        return None
    return [r["layer"] for r in rows if r[method]["excess_loss_ci"][0] > 0]


def _task_entry(result: Result, task: str | None) -> dict:
    names = [t["task"] for t in result.tasks]
    task = task or (names[0] if names else None)
    if task not in names:
        have = ", ".join(names) or "none"
        raise ProbeError(f"{result.model_name} has no causal probing task {task!r}; it has {have}")
    return result.tasks[names.index(task)]


# ----------------------------------------------------------------------------- compute


def compute(cfg: Config | None = None, *, acts, objective=None, objective_skipped: str | None = None,
            doc_of=None, doc_names=None, labels=None, label_name: str = "labels") -> Result:
    """Erase every task at every layer of ``cfg`` and measure (see the module docstring). ``objective``: the
    model's :class:`probes.capture.objective.Objective` (None: accuracies only, ``objective_skipped`` says why).
    ``labels``: the caller's own labels (:mod:`analyses.causal_probing.labels`), one more task named
    ``label_name``; with labels and no ``cfg`` the built-in tasks are not run (``Config(task=[...])`` adds them)."""
    import sklearn

    cfg = cfg or Config(task=[] if labels is not None else Config().task)
    if labels is not None and label_name in cfg.task:
        raise ProbeError(f"label_name={label_name!r} is a built-in task's name; name the labels otherwise")
    if labels is None and not cfg.task:
        raise ProbeError(f"no causal probing task: name built-in tasks ({', '.join(TASKS)}) or give labels=")
    L = acts.n_layers
    layers = sorted({layer_index(x, L) for x in cfg.layer}) if cfg.layer else list(range(L + 1))
    held = sentence_split(acts.n_texts, cfg.test_size, cfg.seed)
    if (~held).sum() < 2:
        raise ProbeError(f"causal probing needs 2 training sentences (INLP stops on a held-out fifth of them), and "
                         f"{acts.n_texts} sentences with --test-size {cfg.test_size} leave {int((~held).sum())}; use "
                         "more sentences or a smaller --test-size")
    tasks, skipped = [], []
    for name in dict.fromkeys(cfg.task):
        try:
            tasks.append(task_items(name, acts, cfg, doc_of, doc_names))
        except ProbeError as e:
            skipped.append({"task": name, "reason": str(e)})
            tqdm_class().write(f"causal_probing {acts.meta['model']['name']}: skipped task {name}: {e}",
                               file=sys.stderr)
    if labels is not None:  # the caller's labels: an error in them is the caller's, never skipped
        tasks.append(user_items(labels, acts, cfg.max_items, cfg.seed, label_name))
    if not tasks:
        raise ProbeError("no causal probing task could be built from these sentences: "
                         + "; ".join(f"{s['task']}: {s['reason']}" for s in skipped))
    test_texts = np.flatnonzero(held)
    scorer = None if objective is None else _Scorer(objective, [acts.texts[t] for t in test_texts], cfg)
    out = []
    for items in tasks:
        test = held[items.groups]
        rows = [_layer_row(items, acts, layer, test, cfg, scorer)
                for layer in tqdm_class()(layers, desc=f"{acts.meta['model']['name']} {items.name}", unit="layer",
                                          leave=False)]
        out.append({"task": items.name, "n_items": len(items.labels), "n_train": int((~test).sum()),
                    "n_test": int(test.sum()), "n_classes": len(items.classes), "classes": items.classes,
                    "notes": items.notes, "layers": rows})
    boot = None
    if scorer is not None:
        boot = stats.bootstrap_block("sentence", len(test_texts), cfg.n_boot, LEVEL, cfg.seed,
                                     units_id=stats.units_id([acts.texts[t] for t in test_texts]))
    return Result(identity=activations_identity(acts, cfg), scikit_learn=sklearn.__version__,
                  definitions=_definitions(cfg), objective=_objective_block(scorer, objective_skipped, cfg),
                  tasks=out, bootstrap=boot, skipped=skipped)


class _Scorer:
    """The objective on the held-out sentences: clean once, then under each eraser; paired bootstrap weights."""

    def __init__(self, objective, texts: list[str], cfg: Config):
        self.objective, self.texts, self.cfg = objective, texts, cfg
        self.clean, self.counts = objective.score(texts, (), cfg.mask_prob, cfg.seed, cfg.batch_size)
        self.W = stats.resample_weights(len(texts), cfg.n_boot, cfg.seed)

    def sums(self, layer: int, eraser) -> np.ndarray:
        if eraser is None:  # nothing erased: the clean forward pass
            return self.clean
        return self.objective.score(self.texts, [Intervention(layer, eraser)], self.cfg.mask_prob, self.cfg.seed,
                                    self.cfg.batch_size)[0]

    def delta(self, sums: np.ndarray) -> tuple[float, list[float]]:
        """The loss change (nats per scored token) of these per-sentence loss sums, with its interval."""
        diff = sums - self.clean
        point = float(diff.sum() / self.counts.sum())
        return point, stats.interval(stats.ratio_replicates(diff, self.counts, self.W), LEVEL).tolist()


def _layer_row(items, acts, layer: int, test: np.ndarray, cfg: Config, scorer: _Scorer | None) -> dict:
    """Fit the erasers on the training words of ``layer``, probe before and after, and score the objective."""
    X = np.asarray(acts.layer_hidden(layer, items.tokens), np.float64)
    y, g = items.labels, items.groups
    train, tst = np.flatnonzero(~test), np.flatnonzero(test)
    if len(np.unique(y[train])) < 2 or len(np.unique(y[tst])) < 1:
        raise ProbeError(f"task {items.name}: the training part holds a single class; use more sentences")
    leace = erasers.leace(X[train], y[train], shrinkage=cfg.shrinkage)
    inlp = erasers.inlp(X[train], y[train], g[train], cfg.inlp_iterations, C=cfg.inlp_c, seed=cfg.seed)
    fitted = {"leace": leace, "inlp": inlp.eraser}
    controls = {"leace": [erasers.leace_random(X[train], leace.rank, cfg.seed + k, cfg.shrinkage)
                          for k in range(cfg.random_draws)],
                "inlp": [] if inlp.eraser is None else [erasers.orthogonal_random(X[train], inlp.eraser.rank,
                                                                                  cfg.seed + k)
                                                        for k in range(cfg.random_draws)]}
    features = [X] + [X if e is None else e.apply_numpy(X) for e in (leace, inlp.eraser)]
    features += [X if not controls[m] else controls[m][0].apply_numpy(X) for m in METHODS]
    fits = fit_probe_layers(features, y, train, tst, g, cfg)
    scores = [_accuracy(f["pred"], y[tst], g[tst], cfg) for f in fits]
    majority = float((y[tst] == np.bincount(y[train]).argmax()).mean())
    row = {"layer": layer, "majority": majority, "accuracy": scores[0][0], "accuracy_ci": scores[0][1]}
    for k, m in enumerate(METHODS):
        e = fitted[m]
        entry = {"rank": 0 if e is None else e.rank, "accuracy": scores[1 + k][0], "accuracy_ci": scores[1 + k][1],
                 "random_accuracy": scores[3 + k][0], "random_accuracy_ci": scores[3 + k][1]}
        if m == "inlp":
            entry.update(iterations=inlp.iterations, dev_accuracy=inlp.dev_accuracy, dev_majority=inlp.dev_majority)
        if scorer is not None:
            erased = scorer.sums(layer, e)
            rand = np.mean([scorer.sums(layer, c) for c in controls[m]], axis=0) if controls[m] else scorer.clean
            entry["delta_loss"], entry["delta_loss_ci"] = scorer.delta(erased)
            entry["random_delta_loss"], entry["random_delta_loss_ci"] = scorer.delta(rand)
            entry["excess_loss"], entry["excess_loss_ci"] = scorer.delta(erased - rand + scorer.clean)
        row[m] = entry
    return row


def _accuracy(pred, truth, groups, cfg: Config) -> tuple[float, list[float]]:
    ok = (np.asarray(pred) == truth).astype(np.float64)
    return float(ok.mean()), list(bootstrap_interval(ok, groups, cfg.n_boot, cfg.seed, LEVEL))


def _objective_block(scorer: _Scorer | None, skipped: str | None, cfg: Config) -> dict:
    if scorer is None:
        return {"skipped": skipped or "no objective was given"}
    loss = float(scorer.clean.sum() / scorer.counts.sum())
    ci = stats.interval(stats.ratio_replicates(scorer.clean, scorer.counts, scorer.W), LEVEL).tolist()
    return {**scorer.objective.describe(cfg.mask_prob, cfg.seed), "n_texts": len(scorer.texts),
            "scored_tokens": int(scorer.counts.sum()), "loss": loss, "loss_ci": ci}


def _definitions(cfg: Config) -> dict:
    return {
        "items": "word tokens (first sub-token of each word, special tokens never); token_identity: every word, "
                 "the N most frequent types a class each and 'other'; a sentence task labels every word of a "
                 "sentence with the sentence's label",
        "split": "sentences, seeded, shared by every task: erasers and probes fitted on the training part, the "
                 f"accuracy and the objective measured on the held-out part ({cfg.test_size:.0%})",
        "leace": "Belrose et al. 2023, closed form (analyses.causal_probing.erasers); rank <= K - 1",
        "inlp": "Ravfogel et al. 2020: logistic classifiers' row spaces removed until a held-out fifth of the "
                f"training part is at majority + 0.01, at most {cfg.inlp_iterations}; mean kept",
        "random": "a random subspace of the eraser's rank (LEACE: in its whitened coordinates; INLP: orthonormal); "
                  f"the loss change is the mean over {cfg.random_draws} draws, the accuracy the first draw's",
        "accuracy": "probing's probe refitted on the erased training states, scored on the erased held-out states; "
                    "95% bootstrap over held-out sentences",
        "delta_loss": "loss(erased at the layer) - loss(clean), nats per scored token on the held-out sentences",
        "excess_loss": "delta_loss(eraser) - delta_loss(random control): > 0 with its interval means the model uses "
                       "the property there beyond an arbitrary subspace of the same size",
        "interval": "95% percentile bootstrap over held-out sentences, paired across conditions (ratio of sums)",
    }


def table_rows(result: Result) -> list[dict]:
    """One row per task and layer: accuracy, then each method's rank, accuracy and loss changes, flat."""
    rows = []
    for t in result.tasks:
        for r in t["layers"]:
            row = {"task": t["task"], "layer": r["layer"], "majority": r["majority"], "accuracy": r["accuracy"]}
            for m in METHODS:
                for k, v in r[m].items():
                    if k != "dev_accuracy":
                        row.update({f"{m}_{k}_low": v[0], f"{m}_{k}_high": v[1]} if isinstance(v, list)
                                   else {f"{m}_{k}": v})
            rows.append(row)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return [{k: row.get(k) for k in keys} for row in rows]


# ----------------------------------------------------------------------------- figures


def _depth(rows: list[dict], n_layers) -> np.ndarray:
    """Relative depth l / L of the rows (L: the model's layers, else the deepest layer of the rows)."""
    layers = np.array([r["layer"] for r in rows])
    return layers / max(int(n_layers or layers.max(initial=1)), 1)


def _excess_panel(ax, drawn: list, task: str, method: str) -> None:
    """The excess loss of ``method`` for ``task`` against relative depth, one line (and band) per result."""
    for d in drawn:
        entry = next((e for e in d.result.tasks if e["task"] == task), None)
        rows = [r for r in (entry or {}).get("layers", []) if r[method].get("excess_loss") is not None]
        if not rows:
            continue
        x = _depth(rows, d.result.model.num_layers)
        ax.plot(x, [r[method]["excess_loss"] for r in rows], **d.line(marker="o", ms=3))
        if d.band:
            ax.fill_between(x, [r[method]["excess_loss_ci"][0] for r in rows],
                            [r[method]["excess_loss_ci"][1] for r in rows], alpha=0.18, lw=0, color=d.color)
    ax.axhline(0, color="0.4", lw=0.6)
    ax.set_xlabel("relative depth l / L")
    ax.set_ylabel(f"{method.upper()} loss change - random's (nats)")


def _accuracy_panel(ax, drawn: list, task: str) -> None:
    for d in drawn:
        entry = next((e for e in d.result.tasks if e["task"] == task), None)
        if entry is None:
            continue
        rows = entry["layers"]
        x = _depth(rows, d.result.model.num_layers)
        ax.plot(x, [r["accuracy"] for r in rows], **d.line(marker="o", ms=3))
        ax.plot(x, [r["leace"]["accuracy"] for r in rows], ls="--", lw=1, color=d.color)
        ax.plot(x, [r["majority"] for r in rows], ls=":", lw=0.8, color=d.color)
    ax.set_xlabel("relative depth l / L")
    ax.set_ylabel("accuracy (-- after LEACE, : majority)")


def _panels(results: list[Result], fig, draw, legend: str):
    named = list(dict.fromkeys(e["task"] for r in results for e in r.tasks))
    present = [t for t in TASKS if t in named] + [t for t in named if t not in TASKS]  # the caller's tasks last
    cols = min(max(len(present), 1), 3)
    rows = -(-max(len(present), 1) // cols)
    fig = style.new_figure(fig, (3.0 * cols + 0.4, 2.6 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(present):]:
        ax.set_visible(False)
    drawn = style.in_figure(results)
    for ax, task in zip(axes, present):
        draw(ax, drawn, task)
        ax.set_title(task)
    if present:
        style.legend(axes[:len(present)], title=legend)
    return fig


@style.drawing
def plot(results: list[Result], fig=None):
    """The excess loss of LEACE (its loss change minus a random same-rank erasure's) against relative depth, one
    panel per task, one line per model (band: 95% interval over held-out sentences). ``fig``: a Figure or
    SubFigure to draw into (default: a new figure). Returns the figure."""
    return _panels(results, fig, lambda ax, drawn, task: _excess_panel(ax, drawn, task, "leace"),
                   f"band: {LEVEL:.0%} interval")


@style.drawing
def plot_accuracy(results: list[Result], fig=None):
    """The probe's held-out accuracy before (solid) and after LEACE (dashed) and the majority baseline (dotted)
    against relative depth, one panel per task."""
    return _panels(results, fig, _accuracy_panel, "solid: the states; dashed: after LEACE;\ndotted: majority")


ANALYSIS = Analysis(
    name="causal_probing",
    inputs=CausalInputs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("causal-probing", plot, "How much more the model's own loss rises when LEACE erases the property at a "
               "layer than when a random subspace of the same rank is erased (nats per token; band: 95% interval "
               "over held-out sentences). Above 0: the model uses the property there."),
        Figure("causal-probing-accuracy", plot_accuracy, "The probe's held-out accuracy on the layer's word states "
               "(solid), after LEACE erased the property (dashed: it should sit on the majority baseline, dotted)."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "40", "--max-items", "200", "--n-boot", "20", "--task",
             "position", "--layer", "1", "--cv-folds", "2", "--cs", "1.0", "--random-draws", "1",
             "--inlp-iterations", "2", "--min-per-class", "3"),
    python_inputs={"labels": {"task": []}, "label_name": {}},  # the caller's labels: their task only, unless task=
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call (labels=, label_name=: compute's) and the command line


if __name__ == "__main__":
    ANALYSIS.main()

__all__ = ["ANALYSIS", "Config", "Result", "WordStates", "compute", "inlp", "leace", "main", "plot", "plot_accuracy",
           "run", "table_rows", "used_layers", "word_states"]
