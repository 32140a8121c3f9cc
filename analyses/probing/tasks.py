"""Probing tasks built from raw text: labels for sentence and token vectors, and control labellings.

Every task is a :class:`Task`: integer labels, the items they belong to (a sentence, or one token of
the activations' token axis) and the sentence of each item (train/test splits and bootstrap
resamples never separate the tokens of one sentence). Definitions follow Conneau et al. 2018
(SentEval probing tasks) where they apply; differences are listed in each builder's docstring and
in :data:`DEFINITIONS`, which result files copy.

Words. Sentence-level tasks count whitespace-separated words (what ``probes.corpus.sample_sentences``
counts). Token-level tasks use one vector per *tokenizer word*: the first sub-token of each word,
where a sub-token continues a word when it starts with ``##`` (WordPiece) or, for tokenizers that
mark word starts with ``Ġ`` / ``▁`` (byte-level BPE, SentencePiece), when it lacks that mark; a
sub-token without letters or digits (punctuation) always starts a word of its own. Special tokens
are never items. A word's *type* is its sub-tokens joined, markers removed, lower-cased.

Control tasks (Hewitt & Liang 2019): every word type seen among a task's items gets one label drawn
(seeded) from the task's empirical label distribution; an item's control label is its type's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from probes.capture.activations import Activations
from probes.errors import ProbeError

SENTENCE_TASKS = ("sent_len", "word_content", "bigram_shift", "source")
TOKEN_TASKS = ("position", "token_identity")
TASKS = SENTENCE_TASKS + TOKEN_TASKS

DEFINITIONS = {
    "sent_len": "SentLen: the sentence's length in whitespace words, in 6 bins with (near-)equal counts on this "
                "sample (quantile edges on integer lengths), every bin then cut to the smallest bin's size "
                "(seeded). Conneau et al. use 6 fixed length ranges; ours adapt to the corpus.",
    "word_content": "WordContent: which of K mid-frequency words (lower-cased alphabetic words ranked by the number "
                    "of sampled sentences containing them, the most frequent skipped) the sentence contains; "
                    "only sentences with exactly one of the K; K <= the configured vocabulary (1000 in Conneau "
                    "et al.) and only words with enough such sentences are kept; balanced by cutting every word "
                    "to the rarest kept word's count (seeded). Frequencies come from the sample, not a 2k-3k "
                    "rank band of a large corpus: a small corpus has too few sentences per word; K is scaled down "
                    "(halved from the configured size) to the K that keeps the most words.",
    "bigram_shift": "BigramShift: label 1 if two adjacent words were swapped, 0 if the sentence is original. A "
                    "seeded half of the sentences that have a swappable pair is perturbed, the other half are "
                    "the originals (no sentence appears in both forms; sentences without a swappable pair are "
                    "left out, so eligibility cannot leak the label). Swappable pairs are two different, purely "
                    "alphabetic, lower-case words, not the first word of the sentence: unlike Conneau et al., "
                    "swaps never move capitals or punctuation, which would be surface cues.",
    "source": "Source: which document (book) of the corpus the sentence comes from (not a SentEval task); "
              "documents with too few sampled sentences are dropped; balanced by cutting every document to "
              "the smallest kept one's count (seeded).",
    "position": "Position: the relative position of a word in its sentence, floor(bins * i / n) for word i of n "
                "(first sub-token of each word, special tokens excluded); near-uniform by construction.",
    "token_identity": "TokenIdentity: which of the N most frequent word types (over the sample) the word is; "
                      "only words of those types are items; classes keep their natural frequencies. No control "
                      "task: the label is the word type, so a control task (a random label per type) is the task "
                      "relabelled, and its selectivity would be 0 by construction.",
}


@dataclass
class Task:
    """Labelled items of one probing task."""

    name: str
    level: str  # "sentence" (items are sentence vectors) or "token" (token vectors)
    labels: np.ndarray  # (n,) int labels 0..K-1
    classes: list[str]  # (K,) name of each label
    items: np.ndarray  # (n,) sentence index (sentence level) or index into the token axis N (token level)
    groups: np.ndarray  # (n,) sentence each item belongs to (splits and bootstrap keep a sentence together)
    types: np.ndarray | None = None  # (n,) word-type id per item, token level only (control task)
    shifted: np.ndarray | None = None  # (n,) bool, bigram_shift only: item comes from the perturbed texts
    notes: dict = field(default_factory=dict)  # numbers about how the task was built (sizes, K, ...)

    def balance(self) -> dict:
        """Items per class name."""
        counts = np.bincount(self.labels, minlength=len(self.classes))
        return {c: int(n) for c, n in zip(self.classes, counts)}


# ----------------------------------------------------------------------------- words


def _alpha_words(text: str) -> list[str]:
    return [w.lower() for w in text.split() if w.isalpha()]


def word_units(acts: Activations) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """The tokenizer words of every text: (first, text, type_names, type_ids).

    first (W,) index into the token axis of each word's first sub-token; text (W,) its sentence;
    type_ids (W,) index into type_names (the words' lower-cased strings, sorted)."""
    flat = [tok for toks in acts.tokens for tok in toks]
    special = np.asarray(acts.special, bool)
    marked = any(t[:1] in ("Ġ", "▁") for t, s in zip(flat, special) if not s)
    text_of = acts.text_index()
    first: list[int] = []
    words: list[str] = []
    for i, (tok, sp) in enumerate(zip(flat, special)):
        if sp:
            continue
        starts = (tok[:1] in ("Ġ", "▁")) if marked else not tok.startswith("##")
        starts = starts or not any(ch.isalnum() for ch in tok)  # split-off punctuation is its own word
        if starts or not first or text_of[first[-1]] != text_of[i] or special[i - 1]:
            first.append(i)
            words.append(tok.lstrip("Ġ▁"))
        else:
            words[-1] += tok.removeprefix("##")
    names, type_ids = np.unique([w.lower() for w in words], return_inverse=True)
    return np.array(first, np.int64), text_of[np.array(first, np.int64)], list(names), type_ids


# ----------------------------------------------------------------------------- helpers


# the setting that sets each task's number of classes: (command-line flag, Config field)
CLASS_SETTINGS = {"sent_len": ("--sent-len-bins", "sent_len_bins"), "position": ("--position-bins", "position_bins"),
                  "token_identity": ("--identity-types", "identity_types")}
MORE_TEXTS = "use more sentences (--n-sentences; from Python, more texts)"


def _check_classes(name: str, counts: np.ndarray, min_per_class: int, what: str) -> None:
    if len(counts) < 2 or counts.min() < min_per_class:
        flag, field = CLASS_SETTINGS.get(name, ("", ""))
        fewer = f", fewer classes ({flag}, {field}=)" if flag else ""
        raise ProbeError(f"corpus too small for task {name}: {len(counts)} {what} with at least "
                         f"{min_per_class} items each are needed and at least 2 classes; {MORE_TEXTS}{fewer} or "
                         "a lower --min-per-class (min_per_class=)")


def _equalize(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices keeping an equal, seeded random share of each label (the rarest label's count)."""
    m = np.bincount(labels).min()
    keep = [np.sort(rng.choice(np.flatnonzero(labels == c), size=m, replace=False)) for c in np.unique(labels)]
    return np.sort(np.concatenate(keep))


# ----------------------------------------------------------------------------- sentence tasks


def sent_len(texts: list[str], seed: int, bins: int = 6, min_per_class: int = 10) -> Task:
    """SentLen: whitespace word count in ``bins`` quantile bins, balanced by subsampling."""
    n_words = np.array([len(t.split()) for t in texts])
    edges = np.unique(np.quantile(n_words, np.linspace(0, 1, bins + 1)[1:-1], method="nearest"))
    labels = np.searchsorted(edges, n_words, side="right")  # bin k: edges[k-1] < n <= edges[k]
    if len(edges) < bins - 1:
        raise ProbeError(f"corpus too small for task sent_len: only {len(edges) + 1} distinct length bins "
                         f"for {bins} classes; {MORE_TEXTS} or fewer classes (--sent-len-bins, sent_len_bins=)")
    _check_classes("sent_len", np.bincount(labels, minlength=bins), min_per_class, "length bins")
    keep = _equalize(labels, np.random.default_rng([seed, 1]))
    lo = np.concatenate([[n_words.min()], edges + 1])
    hi = np.concatenate([edges, [n_words.max()]])
    classes = [f"{a}-{b} words" for a, b in zip(lo, hi)]
    return Task("sent_len", "sentence", labels[keep], classes, keep, keep)


def _word_content_classes(sets: list[set], ranked: list[str], min_per_class: int) -> tuple[list[str], dict]:
    """(kept words, sentence -> its one vocabulary word) for the vocabulary ``ranked``."""
    chosen = set(ranked)
    word_of = {}
    for i, s in enumerate(sets):
        hit = s & chosen
        if len(hit) == 1:
            word_of[i] = next(iter(hit))
    per_word = Counter(word_of.values())
    return sorted(w for w in ranked if per_word[w] >= min_per_class), word_of


def word_content(texts: list[str], seed: int, vocab: int = 1000, skip_top: int = 100,
                 min_per_class: int = 10) -> Task:
    """WordContent: which of K mid-frequency words the sentence contains (exactly one of them).

    K is scaled down for small samples: of K = vocab, vocab/2, vocab/4, ..., 2 the one that keeps
    the most words with ``min_per_class`` sentences (ties: the larger K); notes record it."""
    sets = [set(_alpha_words(t)) for t in texts]
    df = Counter(w for s in sets for w in s)
    ranked = sorted(df, key=lambda w: (-df[w], w))[skip_top:]
    best: tuple[list[str], dict, int] = ([], {}, 0)  # (kept words, sentence -> word, vocabulary size)
    k = vocab
    while k >= 2:
        kept, word_of = _word_content_classes(sets, ranked[:k], min_per_class)
        if len(kept) > len(best[0]):
            best = (kept, word_of, k)
        k //= 2
    kept, word_of, k = best
    if len(kept) < 2:
        raise ProbeError(f"corpus too small for task word_content: fewer than 2 mid-frequency words have "
                         f"{min_per_class} sentences containing exactly one vocabulary word; {MORE_TEXTS}, a lower "
                         "--min-per-class (min_per_class=) or --word-content-skip (word_content_skip=)")
    index = {w: c for c, w in enumerate(kept)}
    items = np.array(sorted(i for i, w in word_of.items() if w in index), np.int64)
    labels = np.array([index[word_of[i]] for i in items], np.int64)
    keep = _equalize(labels, np.random.default_rng([seed, 2]))
    notes = {"vocabulary_size": k, "vocabulary_asked": vocab, "skipped_most_frequent": skip_top,
             "classes_kept": len(kept)}
    return Task("word_content", "sentence", labels[keep], kept, items[keep], items[keep], notes=notes)


def _swappable(words: list[str]) -> list[int]:
    """Positions j whose pair (j, j+1) may be swapped: two different purely alphabetic lower-case
    words, not the sentence's first word."""
    return [j for j in range(1, len(words) - 1) if words[j].isalpha() and words[j + 1].isalpha()
            and words[j].islower() and words[j + 1].islower() and words[j] != words[j + 1]]


def bigram_shift_plan(texts: list[str], seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Which sentences stay original and which are perturbed: (originals, perturbed, perturbed_texts).

    Only sentences with a swappable pair take part (so the label cannot be read off a property that
    decides eligibility, such as length); a seeded half of them is perturbed. originals, perturbed:
    sorted sentence indices; perturbed_texts[k] is texts[perturbed[k]] with one swappable pair
    swapped (seeded). Pure function of (texts, seed): the CLI extracts the perturbed texts with it
    and :func:`bigram_shift` rebuilds the same plan."""
    rng = np.random.default_rng([seed, 3])
    pairs = [_swappable(t.split()) for t in texts]
    eligible = np.array([i for i, p in enumerate(pairs) if p], np.int64)
    is_pert = np.zeros(len(texts), bool)
    is_pert[rng.permutation(eligible)[: len(eligible) // 2]] = True
    perturbed, new_texts = np.flatnonzero(is_pert), []
    for i in perturbed:
        w = texts[i].split()
        j = pairs[i][rng.integers(len(pairs[i]))]
        w[j], w[j + 1] = w[j + 1], w[j]
        new_texts.append(" ".join(w))
    return np.setdiff1d(eligible, perturbed), perturbed, new_texts


def bigram_shift(texts: list[str], seed: int, min_per_class: int = 10) -> Task:
    """BigramShift: originals (0) vs sentences with two adjacent words swapped (1).

    Items of the perturbed class index the perturbed texts (``shifted`` is True for them)."""
    orig, pert, _ = bigram_shift_plan(texts, seed)
    _check_classes("bigram_shift", np.array([len(orig), len(pert)]), min_per_class, "classes")
    items = np.concatenate([orig, np.arange(len(pert))])
    labels = np.concatenate([np.zeros(len(orig), np.int64), np.ones(len(pert), np.int64)])
    groups = np.concatenate([orig, pert])  # the sentence each item was made from
    shifted = labels.astype(bool)
    return Task("bigram_shift", "sentence", labels, ["original", "swapped"], items, groups, shifted=shifted)


def source(doc_of: np.ndarray, doc_names: list[str], seed: int, min_per_class: int = 10) -> Task:
    """Source: the document of each sentence (doc_of (T,) document index), balanced by subsampling."""
    counts = np.bincount(doc_of, minlength=len(doc_names))
    docs = np.flatnonzero(counts >= min_per_class)
    _check_classes("source", counts[docs] if len(docs) else np.array([0]), min_per_class, "documents")
    items = np.flatnonzero(np.isin(doc_of, docs))
    labels = np.searchsorted(docs, doc_of[items])
    keep = _equalize(labels, np.random.default_rng([seed, 4]))
    return Task("source", "sentence", labels[keep], [doc_names[d] for d in docs], items[keep], items[keep])


# ----------------------------------------------------------------------------- token tasks


def position(acts: Activations, seed: int, bins: int = 5, max_items: int = 2000) -> Task:
    """Position: relative position bin of each word's first sub-token (at most ``max_items``, seeded)."""
    first, text, names, types = word_units(acts)
    if len(first) == 0:
        raise ProbeError("corpus too small for task position: no words in the sampled sentences")
    starts = np.searchsorted(text, text, side="left")  # first word of the same sentence
    n_in = np.bincount(text, minlength=acts.n_texts)[text]
    labels = (bins * (np.arange(len(first)) - starts)) // n_in
    sel = np.random.default_rng([seed, 5])
    keep = np.sort(sel.choice(len(first), size=min(max_items, len(first)), replace=False))
    _check_classes("position", np.bincount(labels[keep], minlength=bins), 2, "position bins")
    classes = [f"{k}/{bins}-{k + 1}/{bins}" for k in range(bins)]
    return Task("position", "token", labels[keep], classes, first[keep], text[keep], types[keep],
                notes={"n_word_types": len(np.unique(types[keep]))})


def token_identity(acts: Activations, seed: int, n_types: int = 30, max_items: int = 2000,
                   min_per_class: int = 10) -> Task:
    """TokenIdentity: which of the ``n_types`` most frequent word types a word is."""
    first, text, names, types = word_units(acts)
    freq = np.bincount(types, minlength=len(names))
    ranked = sorted(range(len(names)), key=lambda t: (-freq[t], names[t]))[:n_types]
    frequent = [t for t in ranked if freq[t] >= min_per_class]
    _check_classes("token_identity", freq[frequent] if frequent else np.array([0]), min_per_class, "word types")
    top = np.sort(np.array(frequent))
    pool = np.flatnonzero(np.isin(types, top))
    keep = np.sort(np.random.default_rng([seed, 6]).choice(pool, size=min(max_items, len(pool)), replace=False))
    labels = np.searchsorted(top, types[keep])
    return Task("token_identity", "token", labels, [names[t] for t in top], first[keep], text[keep], types[keep],
                notes={"n_word_types": len(top)})


def label_follows_type(types: np.ndarray, labels: np.ndarray) -> bool:
    """Whether every word type of a token task has one label (TokenIdentity: the label is the type). A control
    task then measures nothing: it relabels the task's own classes, so a probe that finds the type scores the
    same on both and selectivity is 0 whatever the model."""
    pairs = np.unique(np.stack([np.asarray(types), np.asarray(labels)]), axis=1)
    return len(np.unique(pairs[0])) == pairs.shape[1]


def control_labels(types: np.ndarray, labels: np.ndarray, n_classes: int, seed: int) -> np.ndarray:
    """Hewitt & Liang control task: each distinct type gets a label drawn from the empirical
    distribution of ``labels``; returns (n,) the label of each item's type."""
    p = np.bincount(labels, minlength=n_classes) / len(labels)
    uniq, inv = np.unique(types, return_inverse=True)
    per_type = np.random.default_rng([seed, 7]).choice(n_classes, size=len(uniq), p=p)
    return per_type[inv]
