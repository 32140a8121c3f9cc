"""The caller's own labels as a causal probing task, and the labelled word states of a layer.

``labels=`` (:func:`user_items`) is one of

* a sentence label per text: a sequence of T values (``labels[t]`` the label of text t: an int, a bool, a
  string ...). Every word of text t (its first sub-token, special tokens never, as for the built-in sentence
  tasks) is an item with that label;
* a token label per token: a sequence of T sequences, ``labels[t]`` with one value per token of text t's
  activations (``acts.tokens[t]``, special tokens included, in that order). Every real token is an item with its
  label; special tokens never are, whatever their label says;
* a function of a text returning either (called once per text, in order).

``None`` as a label leaves that text (sentence labels) or token (token labels) out. Classes are the distinct
values, sorted, named by ``str``; they keep their natural frequencies (nothing is balanced; the majority
baseline is reported beside every accuracy). At most ``max_items`` items are kept (seeded).

:func:`word_states` gives what every eraser and probe is fitted on: X (n, d), y (n,) and the text of each item
(n,), for a built-in task or the caller's labels, at one layer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyses.causal_probing.inputs import TASKS, Items, task_items
from analyses.probing import tasks as pt
from probes.capture.activations import Activations, layer_index
from probes.errors import ProbeError


@dataclass(frozen=True)
class WordStates:
    """One task's labelled states at one layer: the inputs of :func:`analyses.causal_probing.leace` and
    :func:`analyses.causal_probing.inlp` (``inlp(states.X, states.y, states.groups)``)."""

    name: str  # the task
    layer: int  # 0..L
    X: np.ndarray  # (n, d) float64: the items' states at the layer
    y: np.ndarray  # (n,) int64 labels 0..K-1 (classes[y[i]] is item i's label)
    groups: np.ndarray  # (n,) int64: the text of each item (an index into acts.texts)
    tokens: np.ndarray  # (n,) int64: each item's index into the activations' token axis
    classes: list[str]  # (K,)


def _is_sequence(value: Any) -> bool:
    if isinstance(value, (str, bytes)) or value is None:
        return False
    try:
        return np.ndim(value) >= 1
    except ValueError:  # a ragged nested sequence: not a flat list of labels, said by the length check
        return True


def _sorted_classes(values: list) -> list:
    distinct = list(dict.fromkeys(values))
    try:
        return sorted(distinct)
    except TypeError:  # values of kinds that do not compare (3 and "a"): by their text
        return sorted(distinct, key=repr)


def label_values(labels: Any, acts: Activations) -> tuple[str, list]:
    """(level, values): ``"sentence"`` and one label per text, or ``"token"`` and one list per text with one
    label per token of its activations; one error line for anything else (see the module docstring)."""
    if callable(labels):
        values = [labels(t) for t in acts.texts]
    elif isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__"):
        raise ProbeError(f"labels= takes one label per text, one sequence of token labels per text, or a function "
                         f"of a text returning either; not {type(labels).__name__}")
    else:
        values = list(labels)
    if len(values) != acts.n_texts:
        raise ProbeError(f"labels= gives {len(values)} labels for {acts.n_texts} texts: give one per text (sentence "
                         "labels) or one sequence of token labels per text")
    kinds = [_is_sequence(v) for v in values]
    if any(kinds) and not all(kinds):
        t = kinds.index(not kinds[0])
        raise ProbeError(f"labels= mixes sentence labels and token label sequences: text 0 has "
                         f"{'a sequence' if kinds[0] else 'one label'}, text {t} {'a sequence' if kinds[t] else 'one'}")
    if not all(kinds):
        return "sentence", values
    rows = [list(v) for v in values]
    lengths = np.diff(acts.offsets)
    for t, (row, n) in enumerate(zip(rows, lengths)):
        if len(row) != n:
            shown = " ".join(acts.tokens[t])
            raise ProbeError(f"labels= for text {t} ({acts.texts[t][:40]!r}) has {len(row)} token labels and its "
                             f"activations have {n} tokens, special tokens included ({shown[:80]}); give one label "
                             "per token of acts.tokens[t] (None for a token that is no item)")
    return "token", rows


def user_items(labels: Any, acts: Activations, max_items: int, seed: int, name: str = "labels") -> Items:
    """The items of the caller's ``labels`` (see the module docstring) as a task named ``name``."""
    level, values = label_values(labels, acts)
    if level == "sentence":
        first, text, _, _ = pt.word_units(acts)
        tokens, groups = first, text
        item_labels = [values[t] for t in text.tolist()]
    else:
        groups = acts.text_index()
        tokens = np.arange(len(groups), dtype=np.int64)
        item_labels = [v for row in values for v in row]
    special = np.asarray(acts.special, bool)[tokens]
    keep = np.flatnonzero([lab is not None and not sp for lab, sp in zip(item_labels, special)])
    if len(keep) > max_items:
        keep = np.sort(np.random.default_rng([seed, 14]).choice(keep, size=max_items, replace=False))
    kept = [item_labels[i] for i in keep.tolist()]
    classes = _sorted_classes(kept)
    if len(classes) < 2:
        raise ProbeError(f"task {name}: its items hold {len(classes)} distinct label{'' if len(classes) == 1 else 's'}"
                         "; an eraser needs at least two classes")
    index = {c: k for k, c in enumerate(classes)}
    digest = hashlib.sha256(json.dumps(values, default=str).encode()).hexdigest()  # what was given, every text
    notes = {"source": "labels given by the caller", "level": level, "labels_sha256": digest,
             "n_sentences": len(np.unique(groups[keep]))}
    return Items(name, np.asarray(tokens[keep], np.int64), np.array([index[c] for c in kept], np.int64),
                 np.asarray(groups[keep], np.int64), [str(c) for c in classes], notes)


def word_states(acts: Activations, layer: int, task: str | None = None, *, labels: Any = None,
                name: str = "labels", config: Any = None, doc_of: np.ndarray | None = None,
                doc_names: list[str] | None = None) -> WordStates:
    """The labelled word states of ``layer`` (0 = embeddings, -1 = last) that causal probing fits its erasers and
    probes on: for the built-in ``task`` (one of ``TASKS``; ``source`` needs ``doc_of``, ``doc_names``), or for
    the caller's ``labels=`` (see the module docstring; the task is called ``name``). ``config``: a causal
    probing Config (its ``max_items``, ``seed`` and task settings; default: the defaults). One of ``task`` and
    ``labels`` is given; a bad one is one error line.

        s = word_states(acts, 2, labels=[("," in t) for t in acts.texts], name="comma")
        s.X.shape, s.y.shape, s.groups.shape     # (n, d), (n,), (n,): groups is the text of each item
    """
    from analyses.causal_probing import Config

    cfg = config if config is not None else Config()
    if (task is None) == (labels is None):
        raise ProbeError(f"word_states takes a task ({', '.join(TASKS)}) or labels=, one of them")
    if labels is not None:
        items = user_items(labels, acts, cfg.max_items, cfg.seed, name)
    else:
        items = task_items(str(task), acts, cfg, doc_of, doc_names)
    lyr = layer_index(layer, acts.n_layers)
    X = np.asarray(acts.layer_hidden(lyr, items.tokens), np.float64)
    return WordStates(items.name, lyr, X, items.labels, items.groups, items.tokens, items.classes)
