"""Text corpora: reading them, splitting them into sentences, and seeded sampling.

A :class:`Corpus` is an ordered tuple of :class:`Document` s plus a hash that identifies it in
result files. :func:`load_corpus` reads the embedded default corpus (public-domain English
prose in ``data/corpus/``, built by ``scripts/build_corpus.py``), a folder of ``.txt`` files,
a single ``.txt`` file, or a ``.jsonl`` file. Everything downstream draws from it with an
explicit seed: :func:`sample_sentences`, :func:`sample_documents`, :func:`token_windows`.
:func:`corpus_split` gives the train / held-out part of every document (:func:`split_text`).
Every user error raises :class:`~probes.errors.CorpusError` with one line naming the path
and the problem.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import probes.resources as resources
from probes.errors import CorpusError, ProbeError
from probes.io import loads_json, read_regular

__all__ = [
    "DEFAULT_CORPUS_DIR",
    "HELD_OUT_FRACTION",
    "SPLITS",
    "Corpus",
    "Document",
    "load_corpus",
    "corpus_split",
    "sample_documents",
    "sample_sentences",
    "sentences",
    "split_sentences",
    "split_shares",
    "split_text",
    "token_windows",
]

DEFAULT_CORPUS_DIR: Path = resources.default_corpus_dir()  # shipped inside the package (probes/_data)

_SUPPORTED = (".txt", ".jsonl")


@dataclass(frozen=True)
class Document:
    """One text: a book, a file, or one line of a jsonl file."""

    name: str  # file stem (relative path without .txt in folders), jsonl "id"/"title", or "line-<k>"
    text: str


@dataclass(frozen=True)
class Corpus:
    """An ordered collection of documents with a content hash.

    ``sha256`` covers document names and texts in order; build instances with
    :meth:`from_documents` so that it is always consistent.
    """

    name: str  # "default" for the embedded corpus, else the path as given
    documents: tuple[Document, ...]
    sha256: str
    held_out: dict | None = None  # a part made by corpus_split: how much of the text went to held-out (split_shares)

    @classmethod
    def from_documents(cls, name: str, documents: tuple[Document, ...] | list[Document],
                       held_out: dict | None = None) -> Corpus:
        """Make a corpus and compute its hash."""
        documents = tuple(documents)
        return cls(name=name, documents=documents, sha256=_corpus_hash(documents), held_out=held_out)

    def identity(self) -> dict:
        """What result files record about the corpus (a part of a split: also its ``held_out`` record)."""
        ident = {
            "name": self.name,
            "sha256": self.sha256,
            "n_documents": len(self.documents),
            "n_characters": sum(len(d.text) for d in self.documents),
        }
        if self.held_out is not None:
            ident["held_out"] = self.held_out
        return ident


def _corpus_hash(documents: tuple[Document, ...]) -> str:
    """sha256 over length-prefixed names and texts, in order (unambiguous framing)."""
    h = hashlib.sha256()
    for doc in documents:
        for part in (doc.name, doc.text):
            data = part.encode("utf-8")
            h.update(f"{len(data)}:".encode("ascii"))
            h.update(data)
    return h.hexdigest()


# --------------------------------------------------------------------------- reading


def _read_text(path: Path) -> str:
    """Decode a file as UTF-8 (BOM dropped, line endings normalised to \\n)."""
    try:
        text = read_regular(path).decode("utf-8")  # a FIFO or a device: an OSError, never a hang
    except UnicodeDecodeError as exc:
        raise CorpusError(f"corpus file {path} is not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise CorpusError(f"corpus file {path} cannot be read: {exc.strerror}") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _read_folder(folder: Path) -> list[Document]:
    """Every .txt under ``folder`` (recursive), sorted by relative path."""
    files = sorted(
        (p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".txt"),
        key=lambda p: p.relative_to(folder).as_posix(),
    )
    if not files:
        raise CorpusError(f"corpus folder {folder} contains no .txt files")
    return [Document(p.relative_to(folder).with_suffix("").as_posix(), _read_text(p)) for p in files]


def _read_jsonl(path: Path) -> list[Document]:
    """One document per non-blank line: {"text": ..., optional "id" or "title"}."""
    documents = []
    for k, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = loads_json(line)
        except ValueError as exc:  # json.JSONDecodeError, or nested too deeply
            raise CorpusError(f"corpus file {path}, line {k}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(record, dict):
            raise CorpusError(f"corpus file {path}, line {k}: expected a JSON object")
        if "text" not in record:
            raise CorpusError(f'corpus file {path}, line {k}: no "text" field')
        if not isinstance(record["text"], str):
            raise CorpusError(f'corpus file {path}, line {k}: "text" is not a string')
        name = record.get("id", record.get("title"))
        documents.append(Document(f"line-{k}" if name is None else str(name), record["text"]))
    return documents


def load_corpus(path: str | os.PathLike | None = None) -> Corpus:
    """Read a corpus.

    ``None`` or ``"default"``: the embedded corpus (every .txt in :data:`DEFAULT_CORPUS_DIR`,
    sorted by name). A folder: every .txt in it, recursively, sorted by relative path. A
    ``.txt`` file: one document. A ``.jsonl`` file: one document per line.
    """
    if path is None or (isinstance(path, str) and path == "default"):
        if not DEFAULT_CORPUS_DIR.is_dir():
            raise CorpusError(f"default corpus {DEFAULT_CORPUS_DIR} is missing; "
                              + ("run scripts/build_corpus.py" if resources.in_clone() else "reinstall probes-suite"))
        name, folder = "default", DEFAULT_CORPUS_DIR
        documents = _read_folder(folder)
    else:
        name = os.fspath(path)
        p = Path(name)
        if not p.exists():
            raise CorpusError(f"corpus path {name} does not exist")
        if p.is_dir():
            documents = _read_folder(p)
        elif p.suffix.lower() == ".txt":
            documents = [Document(p.stem, _read_text(p))]
        elif p.suffix.lower() == ".jsonl":
            documents = _read_jsonl(p)
        else:
            raise CorpusError(f"corpus file {name} has unsupported extension "
                              f"{p.suffix or '(none)'!r}; expected one of {', '.join(_SUPPORTED)} "
                              "or a folder")
    if not any(d.text.strip() for d in documents):
        raise CorpusError(f"corpus {name} is empty (no document has any text)")
    return Corpus.from_documents(name, documents)


# --------------------------------------------------------------------------- sentences

# Abbreviations (lower case, without the final period) after which "." does not end a sentence.
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "messrs", "mme", "mlle", "dr", "st", "esq", "jr", "sr", "prof", "rev",
    "revd", "capt", "col", "gen", "lt", "sgt", "hon", "gov", "sen", "rep", "maj", "adm", "fr",
    "vol", "vols", "chap", "ch", "fig", "viz", "vs", "cf", "co", "inc", "ltd", "ed", "eds",
    "e.g", "i.e", "ft", "mt", "ave", "approx", "dept", "univ",
})
_OPENERS = "\"'\u201c\u2018([{"
_CLOSERS = "\"'\u201d\u2019)]}"
_UPPER = "A-Z\u00c0-\u00d6\u00d8-\u00de"
# Sentence-final punctuation (+ closing quotes/brackets), a space, then an uppercase letter or
# an opening quote. Applied to one paragraph whose whitespace is already collapsed.
_BOUNDARY = re.compile(
    rf"([.!?]+[{re.escape(_CLOSERS)}]*) (?=[{_UPPER}]|[{re.escape(_OPENERS)}][{_UPPER}\"'\u201c\u2018])"
)
_INITIAL = re.compile(rf"[{_UPPER}]")  # "J." in "J. Smith" (the pronoun "I" is excluded below)
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # "A.D", "U.S" (before the final period)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\f\v]*\n")


def _is_abbreviation(paragraph: str, period_at: int) -> bool:
    """Whether the word ending just before ``paragraph[period_at] == '.'`` is an abbreviation."""
    word = paragraph[paragraph.rfind(" ", 0, period_at) + 1:period_at].lstrip(_OPENERS)
    if word.lower() in _ABBREVIATIONS:
        return True
    if word != "I" and _INITIAL.fullmatch(word):
        return True
    return bool(_DOTTED.fullmatch(word))


def _split_paragraph(paragraph: str) -> list[str]:
    """Sentences of one whitespace-collapsed paragraph."""
    out = []
    start = 0
    for m in _BOUNDARY.finditer(paragraph):
        if m.group(1) == "." and _is_abbreviation(paragraph, m.start(1)):
            continue
        piece = paragraph[start:m.end(1)].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def split_sentences(text: str) -> list[str]:
    """Split English prose into sentences with regular expressions (deterministic, no models).

    A sentence ends at ``.``, ``!`` or ``?`` (optionally followed by closing quotes or
    brackets, e.g. ``."`` or ``?'``) when whitespace and an uppercase letter or an opening
    quote follow; not after common abbreviations (Mr., Mrs., Dr., St., Esq., Messrs., ...),
    single capital initials (``J.``) or dotted abbreviations (``A.D.``). Blank lines
    (paragraph breaks) always end a sentence. Internal whitespace, newlines included, is
    collapsed to single spaces.
    """
    result: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        collapsed = " ".join(paragraph.split())
        if collapsed:
            result.extend(_split_paragraph(collapsed))
    return result


_SENTENCE_CACHE: dict[str, tuple[tuple[int, str], ...]] = {}
_CANDIDATE_CACHE: dict[tuple[str, int, int], tuple[str, ...]] = {}
_SENTENCE_CACHE_SIZE = 8  # corpora (or corpus and word limits) kept by each cache; the oldest goes first


def _kept(cache: dict, key, make: Callable[[], Any]):
    """``cache[key]``, made by ``make()`` the first time; the oldest entry goes when the cache is full."""
    if key not in cache:
        value = make()
        if len(cache) >= _SENTENCE_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return cache[key]


def _cached_sentences(corpus: Corpus) -> tuple[tuple[int, str], ...]:
    """All (document index, sentence) pairs, cached by corpus hash."""
    return _kept(_SENTENCE_CACHE, corpus.sha256, lambda: tuple(
        (i, s) for i, doc in enumerate(corpus.documents) for s in split_sentences(doc.text)))


def _candidates(corpus: Corpus, min_words: int, max_words: int) -> tuple[str, ...]:
    """The distinct sentences of ``min_words`` to ``max_words`` words, first occurrences in corpus order; cached
    by corpus hash and word limits (filtering the 40,837 sentences of the 5 MB default corpus takes about 50 ms,
    and every model of a run draws from the same candidates)."""
    def make() -> tuple[str, ...]:
        seen: set[str] = set()
        found: list[str] = []
        for _, s in _cached_sentences(corpus):
            if min_words <= len(s.split()) <= max_words and s not in seen:
                seen.add(s)
                found.append(s)
        return tuple(found)

    return _kept(_CANDIDATE_CACHE, (corpus.sha256, min_words, max_words), make)


def sentences(corpus: Corpus) -> list[tuple[int, str]]:
    """Every sentence of the corpus as (document index, sentence), in corpus order."""
    return list(_cached_sentences(corpus))


# --------------------------------------------------------------------------- sampling


def _check_count(what: str, n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise CorpusError(f"number of {what} must be a non-negative integer, got {n!r}")


def sample_sentences(corpus: Corpus, n: int, seed: int = 0, min_words: int = 5,
                     max_words: int = 60) -> list[str]:
    """``n`` distinct sentences with ``min_words <= words <= max_words``, in corpus order.

    Words are whitespace-separated tokens. Candidates are de-duplicated by text (first
    occurrence kept), then ``n`` are drawn uniformly without replacement with
    ``numpy.random.default_rng(seed)`` and returned sorted by position.
    """
    _check_count("sentences", n)
    if min_words > max_words:
        raise CorpusError(f"min_words ({min_words}) is greater than max_words ({max_words})")
    candidates = _candidates(corpus, min_words, max_words)
    if n > len(candidates):
        raise CorpusError(f"corpus {corpus.name} has only {len(candidates)} distinct sentences of "
                          f"{min_words}-{max_words} words; asked for {n}")
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(candidates), size=n, replace=False))
    return [candidates[i] for i in chosen]


def sample_documents(corpus: Corpus, n: int, seed: int = 0) -> list[Document]:
    """``n`` distinct non-empty documents drawn uniformly with the seed, in corpus order."""
    _check_count("documents", n)
    candidates = [d for d in corpus.documents if d.text.strip()]
    if n > len(candidates):
        raise CorpusError(f"corpus {corpus.name} has only {len(candidates)} non-empty documents; "
                          f"asked for {n}")
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(candidates), size=n, replace=False))
    return [candidates[i] for i in chosen]


def _document_ids(doc: Document, tokenize: Callable[[str], list[int]]) -> list[int]:
    """Token ids of a document: each paragraph tokenized on its own, ids concatenated."""
    ids: list[int] = []
    for paragraph in _PARAGRAPH_BREAK.split(doc.text):
        paragraph = paragraph.strip()
        if paragraph:
            ids.extend(int(t) for t in tokenize(paragraph))
    return ids


def token_windows(corpus: Corpus, tokenize: Callable[[str], list[int]], n_tokens: int,
                  n_windows: int, seed: int = 0) -> list[list[int]]:
    """``n_windows`` non-overlapping windows of exactly ``n_tokens`` ids from running text.

    ``tokenize(text) -> list[int]`` should return ids without special tokens. Windows never
    cross document boundaries. Sampling, with ``numpy.random.default_rng(seed)``: first the
    number of windows per document (``n_windows`` slots drawn without replacement among the
    ``len(ids) // n_tokens`` slots of every document), then, within a document, a uniformly
    random non-overlapping placement of its windows at arbitrary offsets. Returned in corpus
    order (document, then position): a list of ``n_windows`` lists of ``n_tokens`` ints.
    """
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens < 1:
        raise CorpusError(f"n_tokens must be a positive integer, got {n_tokens!r}")
    _check_count("windows", n_windows)
    doc_ids = [_document_ids(doc, tokenize) for doc in corpus.documents]
    capacity = np.array([len(ids) // n_tokens for ids in doc_ids], dtype=np.int64)
    if n_windows > capacity.sum():
        raise CorpusError(f"corpus {corpus.name} is too short: its {len(doc_ids)} documents "
                          f"({sum(map(len, doc_ids))} tokens) hold {int(capacity.sum())} "
                          f"non-overlapping windows of {n_tokens} tokens; asked for {n_windows}. Windows never "
                          f"cross documents (each text given from Python is one): ask for fewer windows "
                          f"(--n-windows, n_windows=) or shorter ones (--window-length, window_length=), or give "
                          f"longer documents (one running text: [' '.join(texts)])")
    rng = np.random.default_rng(seed)
    slots = rng.choice(int(capacity.sum()), size=n_windows, replace=False)
    per_doc = np.bincount(np.searchsorted(np.cumsum(capacity), slots, side="right"),
                          minlength=len(doc_ids))
    windows: list[list[int]] = []
    for ids, k in zip(doc_ids, per_doc):
        if k == 0:
            continue
        # k sorted distinct values in [0, free + k) map one-to-one onto non-overlapping starts.
        free = len(ids) - k * n_tokens
        values = np.sort(rng.choice(free + k, size=k, replace=False))
        starts = values + np.arange(k) * (n_tokens - 1)
        windows.extend(ids[s:s + n_tokens] for s in starts.tolist())
    return windows


# ----------------------------------------------------------------------------- train / held-out split
# The split the training recipe (recipes.train_lm) and the evaluations (analyses.perplexity,
# analyses.topics) share: the last HELD_OUT_FRACTION of every document, cut at a paragraph break.

HELD_OUT_FRACTION = 0.1  # the last 10% of every document (cut at a paragraph break) is never trained on
SPLITS = ("train", "heldout", "all")


def split_text(text: str, held_out: float = HELD_OUT_FRACTION) -> tuple[str, str]:
    """(train part, held-out part) of one document, cut at the target ``at = (1 - held_out) * len(text)``
    characters (rounded). The cut is, in this order of preference:

    1. the first paragraph break (a line holding only whitespace, as the corpus reader counts them) at or
       after ``at`` (less than ``held_out`` is held out where that break lies far after the target);
    2. else the LAST paragraph break before ``at``: a document whose paragraph breaks all lie before the
       target (a book that stops using blank lines, a short book of few paragraphs) holds out more than
       ``held_out``: all the text after that break;
    3. only in a document without any paragraph break: the same with line breaks (the first at or after
       ``at``, else the last before it);
    4. without either, the character position ``at`` itself.

    A break counts only where both sides hold text, so trailing or leading blank lines never leave a part
    empty; a document with text on both sides of some break always contributes to both parts. Both parts are
    stripped. The held-out share this gives each document is recorded by :func:`corpus_split` (``held_out``
    of the part's identity, :func:`split_shares`); the recipes trained the committed models on this split, so
    it is kept as it is."""
    if not 0 < held_out < 1:
        raise ProbeError(f"held-out fraction must be in (0, 1), got {held_out}")
    at = int(round((1 - held_out) * len(text)))
    # text[:k] holds text iff the first non-whitespace character lies before k; text[k:] iff the last lies at or
    # after k (whitespace as str.strip sees it): one pass over the text instead of a strip of each side per break
    first, end = len(text) - len(text.lstrip()), len(text.rstrip())
    for sep in (_PARAGRAPH_BREAK, re.compile(r"\n")):
        cuts = [m.start() for m in sep.finditer(text) if first < m.start() < end]
        later = [k for k in cuts if k >= at]
        earlier = [k for k in cuts if k < at]
        for k in later[:1] or earlier[-1:]:
            return text[:k].strip(), text[k:].strip()
    return text[:at].strip(), text[at:].strip()


def split_shares(parts: list[tuple[str, str, str]], held_out: float = HELD_OUT_FRACTION) -> dict:
    """The record of a split that a part's identity carries: the target ``fraction``, the held-out ``share``
    of all the text (held-out characters / characters of both stripped parts) and ``documents``, each
    document's own share; ``parts``: [(name, train part, held-out part)]. Shares are rounded to 4 digits."""
    per_doc, train_chars, held_chars = {}, 0, 0
    for name, train, test in parts:
        total = len(train) + len(test)
        per_doc[name] = round(len(test) / total, 4) if total else 0.0
        train_chars, held_chars = train_chars + len(train), held_chars + len(test)
    both = train_chars + held_chars
    return {"fraction": held_out, "share": round(held_chars / both, 4) if both else 0.0, "documents": per_doc}


def corpus_split(corpus: Corpus, part: str, held_out: float = HELD_OUT_FRACTION) -> Corpus:
    """The ``train`` or ``heldout`` part of every document (``all``: the corpus itself).
    Documents keep their names; empty parts are dropped; the hash is recomputed."""
    if part not in SPLITS:
        raise ProbeError(f"split must be one of {', '.join(SPLITS)}, not {part!r}")
    if part == "all":
        return corpus
    docs, lost, parts = [], [], []
    for d in corpus.documents:
        train, test = split_text(d.text, held_out)
        parts.append((d.name, train, test))
        text = train if part == "train" else test
        if text:
            docs.append(Document(d.name, text))
        elif d.text.strip():
            lost.append(d.name)
    if lost:  # a document too short to cut in two contributes to one part only: say so
        warnings.warn(f"{len(lost)} document(s) of {corpus.name} have no {part} part: {', '.join(lost[:5])}",
                      stacklevel=2)
    if not docs:
        raise ProbeError(f"corpus {corpus.name} has no text in its {part} part")
    return Corpus.from_documents(f"{corpus.name} [{part}: {'first' if part == 'train' else 'last'} "
                                 f"{100 * (1 - held_out if part == 'train' else held_out):g}% of each document]",
                                 docs, held_out=split_shares(parts, held_out))
