"""Word units shared by two tokenizers: words found from token strings, sub-word states averaged.

Models with different tokenizers split a sentence into different tokens, but into (nearly) the
same words. A word is a run of a text's non-special tokens; a new word starts

* WordPiece (BERT, MiniLM, the suite's wordpiece-4096): at a token without the ``##`` mark;
* SentencePiece (ALBERT, T5, XLNet): at a token starting with ``▁``;
* byte-level BPE (GPT-2, RoBERTa): at a token whose decoded text starts with a space (``Ġ``);
* in every scheme: at a token made only of punctuation, and right after one (BERT's pre-tokenizer
  makes each punctuation mark a word, so this makes the other schemes agree with it).

The scheme of a model is the most frequent marker in its token strings. A word's string is its
tokens' text with the markers removed, lower-cased, accents stripped; two models' words of a text
are aligned when the lists of strings are equal, and a text where they differ is dropped. A word's
state at a layer is the mean of its sub-word states.

    $ python -c "from analyses.similarity.words import segment_words as s; \
        print(s(['[CLS]', 'fond', '##ly', ',', '[SEP]'], \
          [1, 0, 0, 0, 1], 'wordpiece'))"
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from probes.capture.activations import Activations

_BYTE_DECODER: dict[str, int] = {}


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet back to bytes (the inverse of its bytes_to_unicode)."""
    if not _BYTE_DECODER:
        bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
        cs, extra = bs[:], 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + extra)
                extra += 1
        _BYTE_DECODER.update({chr(c): b for b, c in zip(bs, cs)})
    return _BYTE_DECODER


def tokenizer_scheme(tokens: list[list[str]]) -> str:
    """"wordpiece" (## continues a word), "sentencepiece" (▁ starts one) or "bytebpe" (Ġ = a space
    before), by the most frequent marker in the token strings (wordpiece if none is seen)."""
    counts = {"wordpiece": 0, "sentencepiece": 0, "bytebpe": 0}
    for text in tokens:
        for t in text:
            counts["wordpiece"] += t.startswith("##") and len(t) > 2
            counts["sentencepiece"] += t.startswith("▁")
            counts["bytebpe"] += t.startswith("Ġ")
    return max(counts, key=lambda k: (counts[k], k == "wordpiece"))


def _is_punct(ch: str) -> bool:
    """BERT's punctuation: ASCII non-alphanumeric symbols and Unicode category P*."""
    cp = ord(ch)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 \
        or unicodedata.category(ch).startswith("P")


def _normalize(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn").lower()


def segment_words(tokens: list[str], special, scheme: str) -> list[tuple[str, list[int]]]:
    """A text's words: (normalised string, positions of its tokens) in order; special tokens skipped."""
    words: list[list] = []
    cur: list | None = None  # the word being read: [text, [token positions]]
    prev_punct, pending = False, False
    for i, (tok, sp) in enumerate(zip(tokens, special)):
        if sp:
            cur, prev_punct = None, False
            continue
        if scheme == "wordpiece":
            cont = tok.startswith("##") and len(tok) > 2
            text, start = (tok[2:], False) if cont else (tok, True)
        elif scheme == "sentencepiece":
            text, start = (tok[1:], True) if tok.startswith("▁") else (tok, False)
        else:
            dec = _byte_decoder()
            text = bytes(dec.get(c, 63) for c in tok).decode("utf-8", errors="replace")
            start, text = text[:1].isspace(), text.strip()
        if not text:  # a bare word-start marker: the next token starts a word
            pending = pending or start
            continue
        punct = all(_is_punct(c) for c in text)
        if cur is None or start or pending or punct or prev_punct:
            cur = [text, [i]]
            words.append(cur)
        else:
            cur[0] += text
            cur[1].append(i)
        prev_punct, pending = punct, False
    return [(_normalize(w), idx) for w, idx in words]


@dataclass
class WordUnits:
    """Word units shared by two models: for each side, the flat token indices of the words
    (concatenated, word by word) and where each word starts among them."""

    tokens_a: np.ndarray  # (n_tok_a,) indices into acts_a's token axis
    starts_a: np.ndarray  # (n_words,) start of each word in tokens_a
    tokens_b: np.ndarray
    starts_b: np.ndarray
    n_texts_kept: int
    n_texts_dropped: int
    schemes: tuple[str, str]

    def select(self, words: np.ndarray) -> WordUnits:
        """The subset ``words`` (sorted word indices)."""
        def pick(tok, starts):
            ends = np.append(starts[1:], len(tok))
            spans = [tok[starts[w]:ends[w]] for w in words]
            return np.concatenate(spans), np.cumsum([0] + [len(s) for s in spans[:-1]])
        ta, sa = pick(self.tokens_a, self.starts_a)
        tb, sb = pick(self.tokens_b, self.starts_b)
        return WordUnits(ta, sa, tb, sb, self.n_texts_kept, self.n_texts_dropped, self.schemes)


def align_words(acts_a: Activations, acts_b: Activations) -> WordUnits:
    """The words both models segment identically, text by text (texts that disagree are dropped)."""
    sa, sb = tokenizer_scheme(acts_a.tokens), tokenizer_scheme(acts_b.tokens)
    tok_a, st_a, tok_b, st_b = [], [], [], []
    na = nb = kept = 0
    for t in range(acts_a.n_texts):
        wa = segment_words(acts_a.tokens[t], acts_a.special[acts_a.offsets[t]:acts_a.offsets[t + 1]], sa)
        wb = segment_words(acts_b.tokens[t], acts_b.special[acts_b.offsets[t]:acts_b.offsets[t + 1]], sb)
        if not wa or [w for w, _ in wa] != [w for w, _ in wb]:
            continue
        kept += 1
        for (_, ia), (_, ib) in zip(wa, wb):
            st_a.append(na)
            st_b.append(nb)
            tok_a += [acts_a.offsets[t] + i for i in ia]
            tok_b += [acts_b.offsets[t] + i for i in ib]
            na, nb = na + len(ia), nb + len(ib)
    return WordUnits(np.array(tok_a, np.int64), np.array(st_a, np.int64), np.array(tok_b, np.int64),
                     np.array(st_b, np.int64), kept, acts_a.n_texts - kept, (sa, sb))


def word_states(acts, tokens: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """(L+1, n_words, d) float32: per layer, the mean of each word's sub-word states. ``acts``: Activations
    (every layer read with ``layer_hidden``: one a partial extraction lacks is refused, naming it), or a
    hidden array (L+1, N, d)."""
    counts = np.diff(np.append(starts, len(tokens)))[:, None]
    if hasattr(acts, "layer_hidden"):
        n_layers, d, read = acts.n_layers + 1, acts.hidden.shape[2], lambda lyr: acts.layer_hidden(lyr, tokens)
    else:
        n_layers, d, read = acts.shape[0], acts.shape[2], lambda lyr: acts[lyr][tokens]
    out = np.empty((n_layers, len(starts), d), np.float32)
    for lyr in range(n_layers):
        H = np.asarray(read(lyr), np.float64)  # (n_tok, d)
        out[lyr] = np.add.reduceat(H, starts, axis=0) / counts
    return out
