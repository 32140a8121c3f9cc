"""Causal probing: does the model use what a probe reads at a layer? (amnesic probing, Elazar et al. 2021)

For every task (word items, :mod:`analyses.causal_probing.inputs`: position, token_identity (the N most frequent
word types and "other", over every word), and the sentence tasks sent_len, word_content, source with each word
labelled by its sentence; from Python also the caller's own labels, ``run(model, texts, labels=...)``: a label
per text, a label per token or a function of the text, :mod:`analyses.causal_probing.labels`) and every layer l:

* the sentences are split, seeded, into a training part and a held-out part (``--test-size``), shared by every
  task; erasers and probes are fitted on the training part's words only;
* two erasers of the task's concept from layer l's word states: LEACE (closed form, Belrose et al. 2023; rank <=
  K - 1 for K classes) and INLP (iterative nullspace projection, Ravfogel et al. 2020: at most
  ``--inlp-iterations`` logistic classifiers), and for each ``--random-draws`` random controls that remove the same
  share of the layer's variance as the eraser (on the training states, within 1%): random directions tilted
  towards higher- or lower-variance directions until they do, of the eraser's rank where a subspace of that rank
  can (:func:`analyses.causal_probing.erasers.matched_random`); both shares are in the result;
* the probe's accuracy after erasure: probing's linear probe (standardised logistic regression, C by
  cross-validation on the training part) refitted on the erased training states and scored on the erased held-out
  states, with a 95% bootstrap interval over held-out sentences, against the majority baseline (LEACE's should fall
  to it) and against the probe on the unerased states;
* the change in the model's own objective when the eraser edits layer l during the forward pass
  (:mod:`probes.intervention`, every real token of the layer, special tokens included): masked-LM loss for an
  encoder (a seeded 15% of each held-out sentence's tokens masked, the same positions in every condition),
  next-token loss for a causal LM (:mod:`probes.capture.objective`), in nats per scored token, over the held-out
  sentences. ``delta_loss`` = loss(erased) - loss(clean); ``excess_loss`` = delta_loss(eraser) -
  delta_loss(random controls, mean over draws): the cost of removing this concept beyond removing as much of the
  states' variance at random;
* all of the above ``--seeds`` N times (default 3), with seeds ``--seed`` .. ``--seed`` + N - 1: the split, the
  masked positions, the random controls, INLP's own split, the words drawn for each task (``--max-items``) and the
  bootstraps (the sentence sample drawn from a corpus is ``--sample-seed``'s, 0 unless given, whatever ``--seed``:
  two base seeds probe the same sentences). Numbers are means over seeds; a loss change's 95% interval
  pools every seed's bootstrap replicates over its held-out sentences (paired across conditions, a ratio of summed
  losses to summed scored tokens). The verdict per layer (:mod:`analyses.causal_probing.verdict`): Holm's test
  over the task's layers (one-sided, family-wise 2.5%) of "the excess is above 0", on the pooled replicates and in
  each seed; a layer is **used** when the pooled test and every seed's say so, **not used** when the pooled test
  does not and fewer than half the seeds' do, **inconclusive** otherwise (:func:`used_layers`, :func:`verdicts`).
  The headline number (:meth:`Result.headline_numbers`, what a series draws): per task, LEACE's excess loss
  averaged over the layers.

A model without a head to score its objective (a bare ``BertModel`` object) gets the accuracies only; the result
says why. For the S-LSTM an edit reaches its token states h (hidden[l]), not its cell states c, which carry what
was erased on to the next step (probes.intervention.sites).

    $ python -m analyses.causal_probing --model bert-small [--model slstm-small] [--task position --task sent_len]
          [--layer 2] [--n-sentences 1000] [--out out]

Public pieces: :func:`leace` and :func:`inlp` (the erasers, on any (n, d) states and (n,) labels) and
:func:`word_states` (a layer's labelled word states X (n, d), y (n,) and their texts (n,), for a task or labels).

Writes out/results/causal_probing/<model>.json (+ .csv, one row per task and layer) and
out/figures/causal-probing.{png,pdf} (excess loss by relative depth, one panel per task, one line per model; the
layers used filled) and causal-probing-accuracy.{png,pdf} (the probe's accuracy before and after LEACE, and the
majority baseline).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field

import numpy as np

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.causal_probing import figures, protocol
from analyses.causal_probing.erasers import inlp, leace
from analyses.causal_probing.figures import plot, plot_accuracy
from analyses.causal_probing.inputs import TASKS, CausalInputs, task_items
from analyses.causal_probing.labels import WordStates, user_items, word_states
from analyses.causal_probing.protocol import LEVEL, MATCH_TOL, METHODS
from analyses.causal_probing.rows import ObjectiveBlock, SkippedTask, TaskRow
from analyses.causal_probing.verdict import headline_sample, layer_verdicts, task_rows
from analyses.common import activations_identity
from analyses.probing import ProbeOptions
from analyses.records import Definitions, from_json
from probes.capture.activations import layer_index
from probes.config import arg, tqdm_class
from probes.errors import ProbeError


@dataclass
class Config(ProbeOptions):
    """Erase each probed property at each layer (LEACE, INLP) and measure the probe's accuracy and the model's own
    loss against random erasures of the same share of variance, over --seeds seeds (--seed: the first; the
    splits, masks, controls and bootstrap; the sentence sample is --sample-seed's)."""

    n_sentences: int = arg(1000, "random sentences (the same sample and cache as the other sentence analyses)", min=2)
    sample_seed: int = arg(0, "seed of the sentence sample drawn from the corpus: the data, the same whatever --seed "
                              "(which seeds the protocol's draws)", min=0)
    # probing's settings (analyses.probing.ProbeOptions); these defaults differ from probing's because every item
    # is a word (a sentence task labels each of its words), bigram_shift has no causal version, and the probe is
    # refitted five times per layer and seed (the states, two erasers, two controls): fewer classes (LEACE's rank
    # is K - 1, and each class needs words among the training sentences) and a shorter grid of C
    task: list[str] = arg(["position", "token_identity", "sent_len"], f"tasks, from: {', '.join(TASKS)}",
                          choices=TASKS)
    cs: list[float] = arg([0.01, 0.1, 1.0], "grid of inverse L2 strengths C of the accuracy probe", min=1e-12)
    sent_len_bins: int = arg(3, "sent_len classes (length bins)", min=2)
    position_bins: int = arg(3, "position classes (relative position bins)", min=2)
    identity_types: int = arg(10, "token_identity: the N most frequent word types", min=2)
    # causal probing's own
    layer: list[int] = arg([], "layers to erase at (0 = embeddings, -1 = last); none given: every layer", min=-1)
    inlp_iterations: int = arg(10, "INLP: at most this many classifiers' directions removed", min=1)
    inlp_c: float = arg(1.0, "INLP: inverse L2 strength of its logistic classifiers", min=1e-12)
    shrinkage: bool = arg(True, "LEACE: shrink the covariance towards a multiple of the identity (--no-shrinkage: "
                                "the sample covariance)")
    random_draws: int = arg(3, "random controls per eraser and seed, each removing the eraser's share of the "
                               "layer's variance (their mean loss change)", min=1)
    mask_prob: float = arg(0.15, "masked-LM objective: share of each sentence's tokens masked", min=0.01, max=0.9)
    seeds: int = arg(3, "run the protocol (split, masks, controls, INLP's split) with seeds --seed .. --seed + N - 1;"
                        " a layer is used when the pooled test and every seed's say so", min=1)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's causal probing: per task and layer the erasers' ranks and shares of variance removed, the
    probe's accuracy before and after erasure, the loss changes and the verdict over seeds; the objective's clean
    loss on the held-out sentences."""

    scikit_learn: str
    definitions: Definitions
    objective: ObjectiveBlock
    tasks: list[TaskRow]
    bootstrap: stats.Bootstrap | None = None  # the first seed's, over its held-out sentences
    skipped: list[SkippedTask] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)  # the protocol's seeds ([]: a file of one run, before seeds)

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the first task's LEACE excess loss per layer."""
        return common.as_floats(row.leace.excess_loss for row in self.tasks[0].layers)

    def headline(self) -> dict[str, str]:
        out = {}
        for t in self.tasks:
            rows = [r for r in t.layers if r.leace.excess_loss is not None]
            seeds = f"{len(self.seeds)} seeds" if len(self.seeds) != 1 else "1 seed"
            if rows:
                best = max(rows, key=lambda r: float(r.leace.excess_loss or 0.0))
                lo, hi = best.leace.excess_loss_ci or [float("nan")] * 2
                used = used_layers(self, t.task) or []
                unsure = [k for k, v in (verdicts(self, t.task) or {}).items() if v == "inconclusive"]
                out[t.task] = ((f"LEACE used at layers {used}" if used else "LEACE used at no layer") +
                               (f", inconclusive at {unsure}" if unsure else "") +
                               f" ({seeds}); at layer {best.layer}: loss {best.leace.excess_loss:+.3f} "
                               f"[{lo:.3f}, {hi:.3f}] nats beyond random; accuracy {best.accuracy:.2f} -> "
                               f"{best.leace.accuracy:.2f} (majority {best.majority:.2f})")
            else:
                r = t.layers[-1]
                out[t.task] = (f"layer {r.layer}: accuracy {r.accuracy:.2f} -> {r.leace.accuracy:.2f} after LEACE "
                               f"(majority {r.majority:.2f})")
        return out

    def headline_numbers(self) -> dict[str, stats.Sample]:
        """Per task, LEACE's excess loss (nats per scored token) averaged over the layers probed, mean over seeds,
        with every seed's bootstrap replicates over its held-out sentences: what a series draws against training
        step (a rise says the model starts to use the property). Empty without a measured loss."""
        resamples = self.bootstrap.resamples if self.bootstrap is not None else stats.RESAMPLES
        out = {}
        for t in self.tasks:
            sample = headline_sample(t, resamples)
            if sample is not None:
                out[f"{t.task}: LEACE excess loss, mean over layers"] = sample
        return out

    @style.drawing
    def plot(self, ax=None, task: str | None = None, method: str = "leace", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: the excess loss
        (``method``'s loss change minus its random controls', nats per token) of ``task`` (default: the first)
        against relative depth, with its 95% band over seeds and held-out sentences (filled markers: layers used,
        open: inconclusive); no title unless ``title=``. ``kwargs`` (``color=``, ``label=`` ...) go to the line;
        fonts and colours follow the caller's rcParams. Returns the Axes."""
        entry = figures.task_entry(self, task)
        ax = style.one_axes(ax, (3.6, 2.8))
        figures.excess_panel(ax, [style.on_axes(ax, self, kwargs)], entry.task, method)
        return style.finish(ax)


def verdicts(result: Result, task: str, method: str = "leace") -> dict[int, str] | None:
    """Layer -> ``"used"``, ``"not used"`` or ``"inconclusive"`` for erasing ``task`` with ``method`` (None: the
    task was not run, or the loss was not measured); see the module docstring for the rule."""
    if method not in METHODS:
        raise ProbeError(f"causal probing has no method {method!r}; its methods are {', '.join(METHODS)}")
    entry = next((t for t in result.tasks if t.task == task), None)
    return None if entry is None else layer_verdicts(entry, method)


def used_layers(result: Result, task: str, method: str = "leace") -> list[int] | None:
    """The layers where erasing ``task`` with ``method`` raises the model's loss more than random erasures of the
    same share of variance, by the pooled test and in every seed's run (Holm's test over the layers in each;
    :func:`verdicts` names the inconclusive ones). None: the task was not run, or the loss was not measured."""
    found = verdicts(result, task, method)
    return None if found is None else [k for k, v in found.items() if v == "used"]


# ----------------------------------------------------------------------------- compute


def compute(cfg: Config | None = None, *, acts, objective=None, objective_skipped: str | None = None,
            doc_of=None, doc_names=None, labels=None, label_name: str = "labels") -> Result:
    """Erase every task at every layer of ``cfg`` and measure, over ``cfg.seeds`` seeds (see the module
    docstring). ``objective``: the model's :class:`probes.capture.objective.Objective` (None: accuracies only,
    ``objective_skipped`` says why). ``labels``: the caller's own labels (:mod:`analyses.causal_probing.labels`),
    one more task named ``label_name``; with labels and no ``cfg`` the built-in tasks are not run
    (``Config(task=[...])`` adds them)."""
    import sklearn

    cfg = cfg or Config(task=[] if labels is not None else Config().task)
    if labels is not None and label_name in cfg.task:
        raise ProbeError(f"label_name={label_name!r} is a built-in task's name; name the labels otherwise")
    if labels is None and not cfg.task:
        raise ProbeError(f"no causal probing task: name built-in tasks ({', '.join(TASKS)}) or give labels=")
    L = acts.n_layers
    layers = sorted({layer_index(x, L) for x in cfg.layer}) if cfg.layer else list(range(L + 1))
    name = acts.meta["model"]["name"]
    tasks, skipped = [], []
    for task in dict.fromkeys(cfg.task):
        try:
            tasks.append(task_items(task, acts, cfg, doc_of, doc_names))
        except ProbeError as e:
            skipped.append(SkippedTask(task, str(e)))
            tqdm_class().write(f"causal_probing {name}: skipped task {task}: {e}", file=sys.stderr)
    if callable(labels):  # a function of the text: called once per text, its values serve every seed
        labels = [labels(t) for t in acts.texts]
    if labels is not None:  # the caller's labels: an error in them is the caller's, never skipped
        tasks.append(user_items(labels, acts, cfg.max_items, cfg.seed, label_name))
    if not tasks:
        raise ProbeError("no causal probing task could be built from these sentences: "
                         + "; ".join(f"{s.task}: {s.reason}" for s in skipped))
    built = [t.name for t in tasks if labels is None or t is not tasks[-1]]

    def items_of(seed: int) -> list:
        """Each seed draws its own words (the --max-items cap) from the same sentences and labels."""
        if seed == cfg.seed:
            return tasks
        seeded = dataclasses.replace(cfg, seed=seed)
        out = [task_items(t, acts, seeded, doc_of, doc_names) for t in built]
        return out + ([] if labels is None else [user_items(labels, acts, cfg.max_items, seed, label_name)])

    def progress(items, desc):
        return tqdm_class()(items, desc=f"{name} {desc}", unit="layer", leave=False)

    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    runs = [protocol.run_seed(items_of(s), acts, layers, s, cfg, objective, progress) for s in seeds]
    first = runs[0].scorer
    boot = None if first is None else stats.bootstrap_block("sentence", len(first.texts), cfg.n_boot, LEVEL,
                                                            cfg.seed, units_id=first.units_id)
    return Result(identity=activations_identity(acts, cfg), scikit_learn=sklearn.__version__,
                  definitions=_definitions(cfg), objective=_objective_block(runs, objective_skipped, cfg),
                  tasks=task_rows(tasks, runs), bootstrap=boot, skipped=skipped, seeds=seeds)


def _objective_block(runs: list[protocol.SeedRun], skipped: str | None, cfg: Config) -> ObjectiveBlock:
    scorer = runs[0].scorer
    if scorer is None:
        return ObjectiveBlock(skipped=skipped or "no objective was given")
    loss = float(scorer.clean.sum() / scorer.counts.sum())
    ci = stats.interval(scorer.replicates(scorer.clean), LEVEL).tolist()
    described = scorer.objective.describe(cfg.mask_prob, cfg.seed)
    block: ObjectiveBlock = from_json(ObjectiveBlock, described, "objective")  # an unknown key: one warning
    return dataclasses.replace(block, n_texts=len(scorer.texts), scored_tokens=int(scorer.counts.sum()), loss=loss,
                               loss_ci=ci, mask_seeds=[run.seed for run in runs])


def _definitions(cfg: Config) -> Definitions:
    return Definitions({
        "items": "word tokens (first sub-token of each word, special tokens never); token_identity: every word, "
                 "the N most frequent types a class each and 'other'; a sentence task labels every word of a "
                 "sentence with the sentence's label",
        "split": "sentences, seeded, shared by every task: erasers and probes fitted on the training part, the "
                 f"accuracy and the objective measured on the held-out part ({cfg.test_size:.0%})",
        "seeds": f"the protocol runs {cfg.seeds} times, seeds {cfg.seed}..{cfg.seed + cfg.seeds - 1}: the words "
                 "drawn (the --max-items cap), the split, the masked positions, the random controls, INLP's split "
                 "and the bootstraps; the sentence sample is --sample-seed's, whatever --seed. Numbers are means "
                 "over seeds (per seed: seeds)",
        "leace": "Belrose et al. 2023, closed form (analyses.causal_probing.erasers); rank <= K - 1",
        "inlp": "Ravfogel et al. 2020: logistic classifiers' row spaces removed until a held-out fifth of the "
                f"training part is at majority + 0.01, at most {cfg.inlp_iterations}; mean kept",
        "removed_variance": "the share of the training states' variance an erasure removes: ||X - e(X)||^2 / "
                            "||X - mean||^2 (the mean squared change over the total variance)",
        "random": "an orthogonal projection onto random directions that removes the eraser's share of variance "
                  f"(within {MATCH_TOL:.0%}, relative): Gaussian directions in the covariance's eigenbasis tilted by "
                  "Lambda^(a/2), a found by bisection; the eraser's rank where a subspace of that rank can remove "
                  f"that share, else the nearest rank that can. The loss change is the mean over {cfg.random_draws} "
                  "draws per seed, the accuracy the first draw's",
        "accuracy": "probing's probe refitted on the erased training states, scored on the erased held-out states; "
                    "mean over seeds, the interval the envelope of the seeds' 95% bootstrap intervals over held-out "
                    "sentences",
        "delta_loss": "loss(erased at the layer) - loss(clean), nats per scored token on the held-out sentences",
        "excess_loss": "delta_loss(eraser) - delta_loss(random controls)",
        "interval": "95% percentile interval of every seed's bootstrap replicates pooled (resamples of its held-out "
                    "sentences, paired across conditions, a ratio of sums): the spread over seeds and sentences",
        "verdict": "Holm's step-down test over the task's layers, one-sided at family-wise 2.5%, on the share p of "
                   "bootstrap replicates of the excess at or below 0: once on every seed's replicates pooled (p_value)"
                   " and once per seed (seeds[].p_value, used); used: the pooled test and every seed's reject; not "
                   "used: the pooled test does not and fewer than half the seeds' do; inconclusive: otherwise",
        "headline": "per task, LEACE's excess loss averaged over the layers, mean over seeds",
    })


def table_rows(result: Result) -> list[dict]:
    """One row per task and layer: the probe's accuracy, then each method's rank, shares of variance removed,
    accuracies, loss changes (with their intervals' ends) and verdict, flat."""
    rows = []
    for t in result.tasks:
        for r in t.layers:
            row: dict = {"task": t.task, "layer": r.layer, "majority": r.majority, "accuracy": r.accuracy,
                         "accuracy_low": r.accuracy_ci[0], "accuracy_high": r.accuracy_ci[1]}
            for m in METHODS:
                e = r.method(m)
                row.update({f"{m}_rank": e.rank, f"{m}_removed_variance": e.removed_variance,
                            f"{m}_random_removed_variance": e.random_removed_variance})
                for k in ("accuracy", "random_accuracy", "delta_loss", "random_delta_loss", "excess_loss"):
                    ci = getattr(e, f"{k}_ci")
                    row.update({f"{m}_{k}": getattr(e, k), f"{m}_{k}_low": None if ci is None else ci[0],
                                f"{m}_{k}_high": None if ci is None else ci[1]})
                row.update({f"{m}_verdict": e.verdict, f"{m}_used_in": e.used_in})
                if m == "inlp":
                    row.update(inlp_iterations=e.iterations, inlp_dev_majority=e.dev_majority)
            rows.append(row)
    return rows


ANALYSIS = Analysis(
    name="causal_probing",
    inputs=CausalInputs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("causal-probing", plot, "How much more the model's own loss rises when LEACE erases the property at a "
               "layer than when random directions removing as much of the layer's variance are erased (nats per "
               "token; band: 95% interval over seeds and held-out sentences; filled: a layer used (the pooled test "
               "and every seed), open: inconclusive). Above 0: the model uses the property there."),
        Figure("causal-probing-accuracy", plot_accuracy, "The probe's held-out accuracy on the layer's word states "
               "(solid), after LEACE erased the property (dashed: it should sit on the majority baseline, dotted)."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "40", "--max-items", "200", "--n-boot", "20", "--task",
             "position", "--layer", "1", "--cv-folds", "2", "--cs", "1.0", "--random-draws", "1",
             "--inlp-iterations", "2", "--min-per-class", "3", "--seeds", "2"),
    python_inputs={"labels": {"task": []}, "label_name": {}},  # the caller's labels: their task only, unless task=
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call (labels=, label_name=: compute's) and the command line


if __name__ == "__main__":
    ANALYSIS.main()

__all__ = ["ANALYSIS", "Config", "Result", "WordStates", "compute", "inlp", "leace", "main", "plot", "plot_accuracy",
           "run", "table_rows", "used_layers", "verdicts", "word_states"]
