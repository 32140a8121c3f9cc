"""What causal probing reads: the sentence sample's activations, each sentence's document (task source) and the
model's own objective (:mod:`probes.capture.objective`), and the word items its tasks label.

Every task is probed, and erased, on word tokens (the first sub-token of each word, special tokens never), the
units an intervention edits, and on words of every kind, so that an eraser is fitted on the states it will edit:
position as probing builds it; token_identity over every word, the N most frequent word types a class each and
all other words the class "other" (probing keeps the N types' words only); a sentence task (sent_len,
word_content, source) labels every word of each sentence probing keeps for it with that sentence's label (at
most ``max_items`` words, seeded). bigram_shift has no causal version: its positive items are perturbed
sentences, and an eraser fitted on them would be applied to texts that hold no swap.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from analyses.inputs import Sentences, is_object
from analyses.probing import cap_items, make_task
from analyses.probing import tasks as pt
from analyses.probing.inputs import ProbingInputs
from probes.capture.store import USER_CACHE
from probes.config import tqdm_class
from probes.errors import ProbeError

TASKS = ("position", "token_identity", "sent_len", "word_content", "source")


@dataclasses.dataclass(frozen=True)
class CausalInputs(ProbingInputs):
    """Probing's inputs (no perturbed sentences), plus ``objective``: the model with its head
    (:class:`probes.capture.objective.Objective`), or None with ``objective_skipped``, why."""

    def activations(self, model, cfg, texts: list[str] | None = None, **options):
        """The sentence sample of ``cfg.sample_seed``, whatever ``cfg.seed``: the sentences are the data, the
        seeds only the protocol's draws (as for the caller's own texts), so runs from different base seeds probe
        the same sentences."""
        return super().activations(model, dataclasses.replace(cfg, seed=cfg.sample_seed), texts, **options)

    def load(self, unit: tuple, cfg) -> dict:
        return {**super().load(unit, cfg), **objective_of(unit[0], cfg)}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        if not cfg.task:  # the caller's labels only (causal_probing.run(labels=)): the sentences are all it reads
            inputs = {**Sentences.from_python(self, model, texts, cfg, tokenizer=tokenizer, name=name,
                                              cache_dir=cache_dir), "doc_of": None, "doc_names": None}
            return {**inputs, **objective_of(model, cfg, tokenizer, name)}
        inputs = super().from_python(model, texts, cfg, tokenizer=tokenizer, name=name, cache_dir=cache_dir)
        return {**inputs, **objective_of(model, cfg, tokenizer, name)}

    def task_inputs(self, model, acts, cfg, corpus, **options) -> dict:
        out = super().task_inputs(model, acts, cfg, corpus, **options)
        out.pop("shifted")
        return out


def objective_of(model, cfg, tokenizer=None, name=None) -> dict:
    """``{"objective": ..., "objective_skipped": None}``, or None and the reason (said on stderr) when the model
    has no head to score its objective with."""
    from probes.capture.objective import NoObjective, load_objective

    try:
        return {"objective": load_objective(model, tokenizer=tokenizer if is_object(model) else None,
                                            name=name if is_object(model) else None, device=cfg.device),
                "objective_skipped": None}
    except NoObjective as e:
        tqdm_class().write(f"causal_probing: {e}; only the probes' accuracy after erasure is measured",
                           file=sys.stderr)
        return {"objective": None, "objective_skipped": str(e)}


@dataclasses.dataclass(frozen=True)
class Items:
    """One task's word items: token indices into the activations, their labels, sentences and class names."""

    name: str
    tokens: np.ndarray  # (n,) index into the token axis
    labels: np.ndarray  # (n,) 0..K-1
    groups: np.ndarray  # (n,) sentence of each item
    classes: list[str]
    notes: dict


def task_items(name: str, acts, cfg, doc_of=None, doc_names=None) -> Items:
    """The word items of task ``name`` (see the module docstring); ProbeError when the sample cannot build it."""
    if name not in TASKS:
        raise ProbeError(f"task {name} has no causal version (tasks: {', '.join(TASKS)})")
    if name == "token_identity":
        return _identity_items(acts, cfg)
    task = make_task(name, acts, cfg, doc_of, doc_names)
    if task.level == "token":
        task = cap_items(task, cfg.max_items, cfg.seed)
        return Items(name, task.items, task.labels, task.groups, task.classes, task.notes)
    first, text, _, _ = pt.word_units(acts)
    label_of = dict(zip(task.items.tolist(), task.labels.tolist()))
    keep = np.flatnonzero(np.isin(text, task.items))
    if len(keep) > cfg.max_items:
        keep = np.sort(np.random.default_rng([cfg.seed, 13]).choice(keep, size=cfg.max_items, replace=False))
    labels = np.array([label_of[t] for t in text[keep].tolist()], np.int64)
    present = np.unique(labels)  # classes with no word left after the cap are dropped, the rest renumbered
    if len(present) < 2:
        raise ProbeError(f"task {name}: fewer than 2 classes among its words; use more sentences")
    return Items(name, first[keep], np.searchsorted(present, labels), text[keep],
                 [task.classes[c] for c in present], {**task.notes, "n_sentences": len(np.unique(text[keep]))})


def _identity_items(acts, cfg) -> Items:
    """token_identity over every word: the ``identity_types`` most frequent word types a class each (those with at
    least ``min_per_class`` words), every other word the class "other" (at most ``max_items`` words, seeded)."""
    first, text, names, types = pt.word_units(acts)
    freq = np.bincount(types, minlength=len(names))
    ranked = sorted(range(len(names)), key=lambda t: (-freq[t], names[t]))[:cfg.identity_types]
    top = np.sort(np.array([t for t in ranked if freq[t] >= cfg.min_per_class], np.int64))
    if len(top) < 1:
        raise ProbeError(f"task token_identity: no word type has {cfg.min_per_class} words; use more sentences")
    keep = np.arange(len(first))
    if len(keep) > cfg.max_items:
        keep = np.sort(np.random.default_rng([cfg.seed, 6]).choice(keep, size=cfg.max_items, replace=False))
    pos = np.searchsorted(top, types[keep])
    labels = np.where((pos < len(top)) & (top[np.minimum(pos, len(top) - 1)] == types[keep]), pos, len(top))
    classes = [names[t] for t in top] + (["other"] if (labels == len(top)).any() else [])  # none: every word is one
    if len(np.unique(labels)) < 2:
        raise ProbeError("task token_identity: fewer than 2 classes among the words; use more sentences")
    return Items("token_identity", first[keep], np.searchsorted(np.unique(labels), labels), text[keep],
                 [classes[c] for c in np.unique(labels)], {"n_word_types": len(top)})


def sentence_split(n_texts: int, test_size: float, seed: int) -> np.ndarray:
    """(T,) bool: the sentences held out (seeded), shared by every task: no eraser or probe is fitted on them, and
    the objective is scored on them."""
    if n_texts < 2:
        raise ProbeError("causal probing needs at least 2 sentences (one to fit on, one to test on)")
    n_test = min(max(1, int(round(test_size * n_texts))), n_texts - 1)
    out = np.zeros(n_texts, bool)
    out[np.random.default_rng([seed, 41]).choice(n_texts, size=n_test, replace=False)] = True
    return out

