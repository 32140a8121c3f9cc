"""Probing: what each layer makes linearly readable (Conneau et al. 2018; Hewitt & Liang 2019).

For every task (see ``analyses.probing.tasks``: sent_len, word_content, bigram_shift, source on the
model's sentence vector; position, token_identity on token vectors) and every layer l = 0..L:

* split the items once per task into train and test (``--test-size``; a seeded, stratified split
  for sentence tasks, a seeded split by sentence for token tasks, so a sentence's tokens are never
  on both sides); at most ``--max-items`` items per task (seeded subsample);
* a linear probe: ``Pipeline(StandardScaler, LogisticRegressionCV)``: L2-regularised multinomial
  logistic regression, solver lbfgs (on minilm-l6 features ~10x faster than saga, same accuracy), the
  inverse regularisation C picked from ``--cs`` by ``--cv-folds``-fold cross-validation on the
  training split only (folds by sentence for token tasks), then refit on the whole training split.
  The scaler is fit on the training split once, before the folds (a negligible leak inside the CV).
  For speed lbfgs stops at ``--tol`` 1e-3 or ``--max-iter`` 100 iterations (a fit stopped early is
  still a linear probe; its held-out accuracy is what is reported). The cross-validation fits stop at
  the same tolerance; ``--cv-tol 1e-2`` stops them earlier (1.6x faster on minilm-l6) but is biased: an
  early-stopped fit at a large C is implicitly regularised, so it ranks large C too well (at the demo's
  settings C changed in 25 of 102 probes, one accuracy by 0.07); and each task has at most
  ``--max-items`` 2000 items: minilm-l6 (6 layers, 384 wide) takes ~25 s of CPU once its activations are cached;
* held-out accuracy with a 95% percentile-bootstrap interval over test *sentences* (``--n-boot``
  seeded resamples; for token tasks a sentence's tokens are resampled together), the majority-class
  baseline (the training split's most frequent label, scored on the test split) and the probe's
  capacity: parameters ((d + 1) * K, or d + 1 for two classes) and the chosen C;
* token tasks also get a control task (Hewitt & Liang): each word type a random label drawn from the
  task's label distribution, probed the same way on the same split; selectivity = task accuracy -
  control accuracy, with a paired bootstrap interval over the same test sentences. A task whose label is
  the word type itself (token_identity) has none: the control would be the task relabelled, and its
  selectivity 0 by construction (the result's task entry says so under ``control``).

No model runs here: the inputs (:class:`ProbingInputs`) are the sentence sample's cached activations, for
bigram_shift also those of the perturbed sentences (same cache, same extraction path), and for source each
sentence's document. From Python, ``probing.run(model, texts)`` builds the same inputs; a task the texts
cannot give (source: a list of texts has no documents) is skipped and the result says why.

    $ python -m analyses.probing --model minilm-l6 [--model slstm-small] [--task sent_len --task position]
          [--corpus PATH] [--n-sentences 2000] [--seed 0] [--out out]

Writes out/results/probing/<model>.json (+ .csv, one row per task and layer) and
out/figures/probing.{png,pdf} (accuracy by relative depth l / L, one panel per task, one line per
model with its interval band, dashed: majority baseline, dotted: control task) and
out/figures/probing-selectivity.{png,pdf} (selectivity of the token tasks that have a control task).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from analyses import common, records, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity
from analyses.probing import tasks as pt
from analyses.probing.inputs import ProbingInputs, check_tasks
from analyses.probing.rows import LayerRow, Skipped, Split, TaskResult
from probes.capture.activations import Activations
from probes.config import arg, tqdm_class
from probes.errors import ProbeError

LEVEL = 0.95  # interval coverage


@dataclass
class ProbeOptions(SentenceConfig):
    """The tasks' and the linear probe's settings, shared by probing (:class:`Config`) and causal probing
    (``analyses.causal_probing.Config``, which sets a few other defaults)."""

    task: list[str] = arg(list(pt.TASKS), f"tasks to probe, from: {', '.join(pt.TASKS)}", choices=pt.TASKS)
    max_items: int = arg(2000, "at most this many items per task (seeded subsample); bounds the probe's cost", min=10)
    test_size: float = arg(0.25, "share of items (sentences, for token tasks) held out for the test split",
                           min=0.05, max=0.95)
    cs: list[float] = arg([0.001, 0.01, 0.1, 1.0], "grid of inverse L2 strengths C for the cross-validation", min=1e-12)
    cv_folds: int = arg(3, "cross-validation folds on the training split that choose C", min=2)
    max_iter: int = arg(100, "lbfgs iterations per fit (a capped fit is still a valid probe; see the docstring)", min=1)
    tol: float = arg(1e-3, "lbfgs stopping tolerance of the refit (scikit-learn default: 1e-4)", min=0.0)
    cv_tol: float = arg(0.0, "lbfgs stopping tolerance of the cross-validation fits, which only rank the C grid "
                             "(0: --tol, scikit-learn's protocol; 1e-2 is ~1.6x faster but favours large C)", min=0.0)
    n_boot: int = arg(1000, "bootstrap resamples of the test sentences for the 95% intervals", min=1)
    min_per_class: int = arg(10, "a class needs at least this many items (else the class is dropped or it is an error)",
                             min=1)
    sent_len_bins: int = arg(6, "sent_len classes (length bins)", min=2)
    word_content_vocab: int = arg(1000, "word_content: at most this many mid-frequency words (Conneau et al.: 1000)",
                                  min=2)
    word_content_skip: int = arg(100, "word_content: skip this many most frequent words before the vocabulary", min=0)
    position_bins: int = arg(5, "position classes (relative position bins)", min=2)
    identity_types: int = arg(30, "token_identity: the N most frequent word types", min=2)


@dataclass
class Config(ProbeOptions):
    """Linear probes with control tasks, per layer, on sentence and token vectors (--seed: every random
    choice, the sample, labels, splits and bootstrap)."""

    min_test_items: int = arg(50, "a task with fewer test items is marked small in its result and figure "
                                  "(its accuracy is too noisy to read)", min=1)


# ----------------------------------------------------------------------------- one probe


def split(labels: np.ndarray, groups: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) item indices: stratified when every item is its own group, else by group."""
    from sklearn.model_selection import GroupShuffleSplit, train_test_split

    idx = np.arange(len(labels))
    if len(np.unique(groups)) == len(groups):
        strat = labels if np.bincount(labels).min() >= 2 else None
        train, test = train_test_split(idx, test_size=test_size, random_state=seed, stratify=strat)
        return np.sort(train), np.sort(test)
    return next(GroupShuffleSplit(1, test_size=test_size, random_state=seed).split(idx, labels, groups))


def _cv_splits(labels: np.ndarray, groups: np.ndarray, folds: int, seed: int) -> list:
    from sklearn.model_selection import GroupKFold, StratifiedKFold

    if len(np.unique(groups)) == len(groups):
        k = max(2, min(folds, np.bincount(labels)[np.unique(labels)].min()))
        return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(labels, labels))
    return list(GroupKFold(min(folds, len(np.unique(groups)))).split(labels, labels, groups))


def fit_probe(X: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, groups: np.ndarray,
              cfg: Config, control: np.ndarray | None = None) -> dict | tuple[dict, dict]:
    """Fit a standardised L2 logistic probe on X[train] (C by CV on the training split only) and
    predict X[test]. X (n, d); y, groups (n,). Returns predictions and capacity; with ``control``
    (n,) control labels, also the control probe's (same split and folds, fitted in the same batch:
    :func:`analyses.probing.fit.fit_probes`)."""
    return fit_probe_layers([X], y, train, test, groups, cfg, control)[0]


class ProbeSettings(Protocol):
    """The settings a probe fit reads (this analysis's Config, causal probing's Config)."""

    cv_folds: int
    seed: int
    cs: list[float]
    max_iter: int
    tol: float
    cv_tol: float


def fit_probe_layers(layers, y: np.ndarray, train: np.ndarray, test: np.ndarray, groups: np.ndarray,
                     cfg: ProbeSettings, control: np.ndarray | None = None) -> list:
    """:func:`fit_probe` of every layer (a sequence of (n, d) features) in one batch
    (:func:`analyses.probing.fit.fit_layers`): one result per layer."""
    from analyses.probing.fit import fit_layers

    if len(np.unique(y[train])) < 2:
        raise ProbeError("the training split has a single class; use more sentences")
    cv = _cv_splits(y[train], groups[train], cfg.cv_folds, cfg.seed)
    Xs = [np.asarray(X) for X in layers]
    labellings = [y[train]] + ([] if control is None else [np.asarray(control)[train]])
    out = []
    for fits in fit_layers([X[train] for X in Xs], labellings, cv, list(cfg.cs), [X[test] for X in Xs],
                           max_iter=cfg.max_iter, tol=cfg.tol, cv_tol=cfg.cv_tol or None):
        found = [{"pred": f.pred, "C": f.C, "n_params": f.n_params} for f in fits]
        out.append(found[0] if control is None else (found[0], found[1]))
    return out


def bootstrap_interval(values: np.ndarray, groups: np.ndarray, n_boot: int, seed: int,
                       level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of mean(values) when whole groups (sentences) are resampled with
    replacement. values, groups (n,)."""
    uniq, inv = np.unique(groups, return_inverse=True)
    sums = np.bincount(inv, weights=np.asarray(values, np.float64))
    counts = np.bincount(inv).astype(np.float64)
    pick = np.random.default_rng([seed, 11]).integers(len(uniq), size=(n_boot, len(uniq)))
    boot = sums[pick].sum(1) / counts[pick].sum(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def probe_layers(layers, labels: np.ndarray, groups: np.ndarray, cfg: Config,
                 control: np.ndarray | None = None, desc: str = "probe") -> tuple[list[LayerRow], Split]:
    """Probe every layer. ``layers``: a sequence (or (L+1, n, d) array) of (n, d) feature matrices,
    or a callable layer -> (n, d) with ``len``; labels, groups (n,); control (n,) control labels or
    None. Returns (rows, sizes): one row per layer (accuracy, interval, majority baseline, C,
    parameters and, with a control, its accuracy and the selectivity) and the split's sizes."""
    labels, groups = np.asarray(labels, np.int64), np.asarray(groups)
    train, test = split(labels, groups, cfg.test_size, cfg.seed)
    g = groups[test]
    majority = np.bincount(labels[train]).argmax()
    rows = []
    # every layer's probes in one batch: the solver's fixed cost per iteration is paid once, not per layer
    fitted = fit_probe_layers([layers[lyr] for lyr in range(len(layers))], labels, train, test, groups, cfg, control)
    for lyr, fit in enumerate(tqdm_class()(fitted, desc=desc, unit="layer", leave=False)):
        cfit = None
        if control is not None:
            fit, cfit = fit
        ok = (fit["pred"] == labels[test]).astype(np.float64)
        lo, hi = bootstrap_interval(ok, g, cfg.n_boot, cfg.seed)
        row = LayerRow(layer=lyr, accuracy=ok.mean(), ci_low=lo, ci_high=hi,
                       majority=float((labels[test] == majority).mean()), C=fit["C"], n_params=fit["n_params"])
        if control is not None and cfit is not None:  # cfit: the control task's fit, there exactly with control
            cok = (cfit["pred"] == control[test]).astype(np.float64)
            clo, chi = bootstrap_interval(cok, g, cfg.n_boot, cfg.seed)
            slo, shi = bootstrap_interval(ok - cok, g, cfg.n_boot, cfg.seed)  # paired: same resampled sentences
            row = dataclasses.replace(
                row, control_accuracy=cok.mean(), control_ci_low=clo, control_ci_high=chi,
                control_majority=float((control[test] == np.bincount(control[train]).argmax()).mean()),
                control_C=cfit["C"], control_n_params=cfit["n_params"], selectivity=ok.mean() - cok.mean(),
                selectivity_ci_low=slo, selectivity_ci_high=shi)
        rows.append(row)
    return rows, Split(n_train=len(train), n_test=len(test), n_test_sentences=len(np.unique(g)))


# ----------------------------------------------------------------------------- tasks -> results


def make_task(name: str, acts: Activations, cfg: Config, doc_of: np.ndarray | None = None,
              doc_names: list[str] | None = None) -> pt.Task:
    """Build one task's labels from the sampled texts (and their documents, for source)."""
    m, s = cfg.min_per_class, cfg.seed
    if name == "sent_len":
        return pt.sent_len(acts.texts, s, cfg.sent_len_bins, m)
    if name == "word_content":
        return pt.word_content(acts.texts, s, cfg.word_content_vocab, cfg.word_content_skip, m)
    if name == "bigram_shift":
        return pt.bigram_shift(acts.texts, s, m)
    if name == "source":
        if doc_of is None or doc_names is None:
            raise ProbeError("task source needs each sentence's document: sentences drawn from a corpus (a corpus "
                             "name or path as texts=, not a list of texts)")
        return pt.source(doc_of, doc_names, s, m)
    if name == "position":
        return pt.position(acts, s, cfg.position_bins, cfg.max_items)
    return pt.token_identity(acts, s, cfg.identity_types, cfg.max_items, m)


def cap_items(task: pt.Task, max_items: int, seed: int) -> pt.Task:
    if len(task.labels) <= max_items:
        return task
    keep = np.sort(np.random.default_rng([seed, 12]).choice(len(task.labels), size=max_items, replace=False))
    sub: dict[str, Any] = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in vars(task).items()}
    return pt.Task(**sub)


class TaskLayers:
    """Lazy per-layer features of a task: layer -> (n, d)."""

    def __init__(self, task: pt.Task, acts: Activations, shifted: Activations | None):
        self.task, self.acts, self.shifted = task, acts, shifted

    def __len__(self) -> int:
        return self.acts.n_layers + 1

    def __getitem__(self, lyr: int) -> np.ndarray:
        t = self.task
        if t.level == "token":
            return np.asarray(self.acts.layer_hidden(lyr, t.items))  # (n, d)
        X = np.asarray(self.acts.sentence[lyr, t.items])  # (n, d)
        if t.shifted is not None:
            if self.shifted is None:
                raise ProbeError("task bigram_shift needs the activations of the perturbed sentences")
            X[t.shifted] = self.shifted.sentence[lyr, t.items[t.shifted]]
        return X


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's probing results: the identity (model, config, corpus), the scikit-learn version,
    definitions, and per task its build numbers and per-layer rows."""

    scikit_learn: str  # the version that fitted the probes
    definitions: records.Definitions  # prose (and n_layers, kept here for the files' layout; nothing reads it)
    tasks: list[TaskResult]  # per task: task, level ("sentence" / "token"), sizes, classes, balance, layers (rows)
    skipped: list[Skipped] = field(default_factory=list)  # tasks the data could not build: task, reason

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"{t.task}: best accuracy": stats.Sample(max(r.accuracy for r in t.layers)) for t in self.tasks}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the first task's held-out accuracy per layer."""
        return common.as_floats(row.accuracy for row in self.tasks[0].layers)

    def headline(self) -> dict[str, str]:
        out = {}
        for t in self.tasks:
            best = max(t.layers, key=lambda r: r.accuracy)
            small = f", only {t.n_test} test items" if t.small_test else ""
            out[t.task] = (f"best accuracy {best.accuracy:.3f} at layer {best.layer} (majority "
                           f"{best.majority:.3f}{small})")
        if self.skipped:
            out["skipped"] = "; ".join(f"{s.task}: {s.reason}" for s in self.skipped)
        return out

    @style.drawing
    def plot(self, ax=None, task: str | None = None, key: str = "accuracy", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: ``key``
        ("accuracy" or, for a token task, "selectivity") of ``task`` (default: the first task run) against
        relative depth, with its band, the majority baseline (dashed) and the control task (dotted).
        ``kwargs`` (``color=``, ``label=``, ``marker=``, ``linewidth=`` ...) go to the line; without
        ``color=`` the next colour of the Axes' cycle; the label (default: the model) enters the legend, so
        results drawn on one Axes overlay. Fonts and colours follow the caller's rcParams. Returns the Axes."""
        names = [e.task for e in self.tasks]
        task = task or (names[0] if names else None)
        if task is None or task not in names:
            raise ProbeError(f"{self.model_name} has no probing task {task!r}; it has {', '.join(names) or 'none'}")
        ax = style.one_axes(ax, (3.6, 2.8))
        _task_panel(ax, [style.on_axes(ax, self, kwargs)], task, key, warn=None, titled=False)
        ax.set_ylabel(f"{task}: {key}")  # short: the panel is 2.8 in high; the line styles go in the legend's title
        entry = self.tasks[names.index(task)]
        small = f"; only {entry.n_test} test items" if entry.small_test else ""
        lines = "; --: majority, : control" if key == "accuracy" else ""
        return style.finish(ax, title=f"band: {LEVEL:.0%} interval{lines}{small}")


def compute(cfg: Config | None = None, *, acts: Activations, shifted: Activations | None = None,
            doc_of: np.ndarray | None = None, doc_names: list[str] | None = None) -> Result:
    """Probe every requested task at every layer of one model's activations.

    ``shifted``: activations of ``bigram_shift_plan(acts.texts, cfg.seed)``'s perturbed texts
    (bigram_shift only); ``doc_of`` (T,) document index of each text and ``doc_names`` (source only)."""
    cfg = cfg or Config()
    names = check_tasks(cfg.task)
    if "bigram_shift" in names:
        want = pt.bigram_shift_plan(acts.texts, cfg.seed)[2]
        if want and (shifted is None or list(shifted.texts) != want):
            raise ProbeError("task bigram_shift needs the activations of the perturbed sentences "
                             "(analyses.probing.tasks.bigram_shift_plan with the same seed)")
    tasks, skipped = [], []
    for n in names:  # a task the data cannot build is skipped (one line: the task and the fix); the rest run
        try:
            tasks.append(cap_items(make_task(n, acts, cfg, doc_of, doc_names), cfg.max_items, cfg.seed))
        except ProbeError as e:
            skipped.append(Skipped(task=n, reason=str(e)))
    if not tasks:  # nothing to run: one error line (the task's own reason when only one was asked for)
        if len(skipped) == 1:
            raise ProbeError(skipped[0].reason)
        raise ProbeError("no probing task could be built from these sentences: "
                         + "; ".join(f"{s.task}: {s.reason}" for s in skipped))
    for s in skipped:
        tqdm_class().write(f"probing {acts.meta['model']['name']}: skipped task {s.task}: {s.reason}; or leave "
                         "it out (--task, or task= from Python)", file=sys.stderr)
    out = []
    for task in tasks:
        control, no_control = None, None
        if task.level == "token":
            if task.types is None:
                raise ValueError(f"token task {task.name} was built without its word types")
            if pt.label_follows_type(task.types, task.labels):
                no_control = ("no control task: each word type has one label, so a random label per type "
                              "relabels the task itself and selectivity would be 0 by construction")
            else:
                control = pt.control_labels(task.types, task.labels, len(task.classes), cfg.seed)
        rows, sizes = probe_layers(TaskLayers(task, acts, shifted), task.labels, task.groups, cfg, control,
                                   desc=f"{acts.meta['model']['name']} {task.name}")
        entry = TaskResult(task=task.name, level=task.level, n_items=len(task.labels), n_train=sizes.n_train,
                           n_test=sizes.n_test, n_test_sentences=sizes.n_test_sentences,
                           small_test=sizes.n_test < cfg.min_test_items, n_classes=len(task.classes),
                           classes=task.classes, balance=task.balance(), notes=task.notes, layers=rows)
        if entry.small_test:
            tqdm_class().write(f"probing {acts.meta['model']['name']}: task {task.name} has only {sizes.n_test} "
                             f"test items (< --min-test-items {cfg.min_test_items}): marked small; use more sentences "
                             "(--n-sentences, or more texts from Python)", file=sys.stderr)
        if no_control is not None:
            entry.control = no_control
        if control is not None:
            entry.control_balance = {c: int(k) for c, k in zip(task.classes, np.bincount(control, minlength=len(
                task.classes)))}
        out.append(entry)
    import sklearn

    definitions: dict[str, Any] = {
        "layers": "0 = embedding output, l = output of layer l; relative depth = l / L",
        "n_layers": acts.n_layers,
        "sentence_vector": acts.meta["model"]["sentence_vector"],
        "special_tokens": "excluded: never items of token tasks",
        "tasks": {t.task: pt.DEFINITIONS[t.task] for t in out},
        "probe": "Pipeline(StandardScaler, LogisticRegressionCV(lbfgs, L2, multinomial)); C from the grid by "
                 "cross-validated accuracy on the training split (folds by sentence for token tasks); refit on it",
        "interval": f"{LEVEL:.0%} percentile bootstrap over test sentences ({cfg.n_boot} resamples, seeded); "
                    "selectivity's is paired (the same resampled sentences for task and control)",
        "majority": "accuracy on the test split of always predicting the training split's most frequent label",
        "n_params": "weights + biases of the probe: (d + 1) * K, or d + 1 for two classes",
        "control": "Hewitt & Liang 2019: each word type a random label drawn from the task's label distribution; "
                   "selectivity = accuracy - control accuracy",
    }
    definitions["small_test"] = (f"true when the test split has fewer than {cfg.min_test_items} items "
                                 "(--min-test-items): the accuracy and its interval rest on too few items to read")
    return Result(identity=activations_identity(acts, cfg), scikit_learn=sklearn.__version__,
                  definitions=records.Definitions(definitions), tasks=out, skipped=skipped)


def table_rows(result: Result) -> list[dict]:
    """Flat CSV rows, one per (task, layer); control columns are empty for the tasks without a control task."""
    rows = [{"task": t.task, **records.to_json(row)} for t in result.tasks for row in t.layers]
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return [{k: row.get(k) for k in keys} for row in rows]


# ----------------------------------------------------------------------------- plot


PANEL_YLABELS = {"accuracy": "accuracy, fraction (-- majority, : control)",
                 "selectivity": "selectivity (accuracy difference)"}


def _task_panel(ax, drawn: list[style.Drawn], name: str, key: str, warn: str | None = "#b2182b",
                titled: bool = True) -> None:
    """Task ``name``'s ``key`` ("accuracy" or "selectivity", a token-task statistic) against relative
    depth on ``ax``, one line per result in its colour. Where ``titled`` (the module's figures; a
    ``Result.plot`` sets no title), the panel's title names the task, and a task with fewer test items than the
    result's minimum (``small_test``) says so there (in the colour ``warn``; None: the title's own)."""
    small: list[int] = []  # the test sizes too small to read an accuracy
    for d in drawn:
        entry = next((e for e in d.result.tasks if e.task == name), None)
        if entry is None or entry.layers[0].statistic(key) is None:  # not run, or no control task (no selectivity)
            continue
        rows = entry.layers
        x = np.array([r.layer for r in rows]) / max(len(rows) - 1, 1)
        lo, hi = (("ci_low", "ci_high") if key == "accuracy" else (f"{key}_ci_low", f"{key}_ci_high"))
        ax.plot(x, [r.statistic(key) for r in rows], **d.line(marker="o", ms=3))
        ax.fill_between(x, [r.statistic(lo) for r in rows], [r.statistic(hi) for r in rows], alpha=0.18, lw=0,
                        **d.quiet)
        if key == "accuracy":
            ax.plot(x, [r.majority for r in rows], ls="--", lw=0.8, **d.quiet)
            if rows[0].control_accuracy is not None:  # a token task with a control task
                ax.plot(x, [r.control_accuracy for r in rows], ls=":", lw=1, **d.quiet)
        if entry.small_test:
            small.append(int(entry.n_test))
    if key == "selectivity":
        ax.axhline(0, color="0.4", lw=0.6)
    if titled and small:  # too few test items to read the accuracy: said where the curve is
        ax.set_title(f"{name} (only {min(small)} test items)", **({"color": warn} if warn else {}))
    elif titled:
        ax.set_title(name)
    ax.set_xlabel("relative depth l / L")


def _panels(results: list[Result], key: str, tasks: tuple, fig):
    """One panel per task in ``tasks`` that some result holds, in ``fig`` (a Figure or SubFigure; None:
    a new one); ``key`` against relative depth, one line per model in its colour."""
    present = [t for t in tasks if any(e.task == t and e.layers[0].statistic(key) is not None for r in results
                                       for e in r.tasks)]
    fig, axes = style.panel_grid(fig, len(present))
    sentences = any(t in pt.SENTENCE_TASKS for t in present)  # panels of sentence vectors: label how each is made
    drawn = [d._replace(kw={k: v for k, v in d.kw.items() if k != "linestyle"})
             for d in style.in_figure(results, pooling=sentences)]
    for ax, name in zip(axes, present):
        _task_panel(ax, drawn, name, key)
        ax.set_ylabel(PANEL_YLABELS[key])
    if present:
        style.legend(axes[:len(present)], title=f"band: {LEVEL:.0%} interval")
    return fig


@style.drawing
def plot(results: list[Result], fig=None):
    """Held-out accuracy against relative depth, one panel per task, one line per model (band: 95%
    interval; dashed: majority baseline; dotted: control task). ``fig``: a Figure or SubFigure to draw
    into (default: a new figure). Returns the figure."""
    return _panels(results, "accuracy", pt.TASKS, fig)


@style.drawing
def plot_selectivity(results: list[Result], fig=None):
    """Selectivity (task - control accuracy) against relative depth, for the token tasks that have a control task
    (position; token_identity's label is the word type itself, so it has none)."""
    return _panels(results, "selectivity", pt.TOKEN_TASKS, fig)


ANALYSIS = Analysis(
    name="probing",
    inputs=ProbingInputs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("probing", plot, "Held-out accuracy of a linear probe per layer (relative depth) with its 95% "
               "bootstrap band; dashed: the majority baseline, dotted: the control task (token tasks). Higher than "
               "the control = the layer encodes the property, not just word identities."),
        Figure("probing-selectivity", plot_selectivity, "Selectivity = task accuracy - control accuracy per layer "
               "(Hewitt & Liang 2019), for the token tasks with a control task; near 0: the probe could as well be "
               "memorising word types."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "40", "--max-items", "40", "--n-boot", "10", "--task",
             "sent_len", "--task", "position", "--cv-folds", "2", "--cs", "1.0", "--sent-len-bins", "2",
             "--position-bins", "2", "--min-per-class", "3"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

__all__ = ["ANALYSIS", "Config", "ProbeOptions", "ProbingInputs", "Result", "bootstrap_interval", "compute",
           "fit_probe", "fit_probe_layers", "main", "make_task", "plot", "plot_selectivity", "probe_layers", "run",
           "split", "table_rows"]
