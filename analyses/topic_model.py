"""The topic model of :mod:`analyses.topics`: LDA topics of texts (gensim, with the documented preprocessing,
seeded) and the Jensen-Shannon divergence between two topic distributions (base 2, the divergence, in [0, 1])."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from probes.errors import ProbeError


class LdaSettings(Protocol):
    """The settings :func:`fit_lda` reads (fields of :class:`analyses.topics.Config`)."""

    topics: int
    seed: int
    lda_passes: int
    lda_iterations: int
    no_below: int
    no_above: float


# ----------------------------------------------------------------------------- JSD


def js_divergence(p, q):
    """Jensen-Shannon divergence in bits (base 2): 0.5 KL(p || m) + 0.5 KL(q || m), m = (p + q) / 2.

    The divergence itself, in [0, 1], not scipy's distance (its square root). Rows (last axis) of
    ``p`` and ``q`` are distributions; 0 log 0 = 0. Returns a float for 1-D inputs, else an array.

    Written out rather than ``scipy.spatial.distance.jensenshannon(p, q, base=2) ** 2`` because
    scipy renormalises p and q first: the LDA topic distributions are normalised in float32 (gensim's
    gamma), so that renormalisation moves the reported JSDs by up to 8e-8 (measured on the demo)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise ProbeError(f"js_divergence: shapes differ, {p.shape} vs {q.shape}")
    m = 0.5 * (p + q)

    def kl(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, a * np.log2(a / m), 0.0)
        return terms.sum(-1)

    d = np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0)
    return float(d) if d.ndim == 0 else d


# ----------------------------------------------------------------------------- LDA


def preprocess(text: str) -> list[str]:
    """Lowercase alphabetic tokens of 3-15 letters (gensim simple_preprocess), stop words removed."""
    from gensim.parsing.preprocessing import STOPWORDS
    from gensim.utils import simple_preprocess

    return [w for w in simple_preprocess(text, deacc=True, min_len=3, max_len=15) if w not in STOPWORDS]


def training_chunks(texts: list[str], min_words: int) -> list[str]:
    """Consecutive paragraphs of each text grouped until a group has at least ``min_words`` words."""
    chunks = []
    for text in texts:
        group, n = [], 0
        for para in text.split("\n\n"):
            para = para.strip()
            if not para:
                continue
            group.append(para)
            n += len(para.split())
            if n >= min_words:
                chunks.append("\n\n".join(group))
                group, n = [], 0
        if group:
            chunks.append("\n\n".join(group))
    return chunks


def fit_lda(texts: list[str], cfg: LdaSettings):
    """(LdaModel, Dictionary) fitted on ``texts`` with the documented preprocessing; seeded."""
    import logging

    from gensim.corpora import Dictionary
    from gensim.models import LdaModel

    logging.getLogger("gensim").setLevel(logging.WARNING)
    docs = [preprocess(t) for t in texts]
    dictionary = Dictionary(docs)
    dictionary.filter_extremes(no_below=cfg.no_below, no_above=cfg.no_above, keep_n=None)
    if len(dictionary) == 0:
        raise ProbeError(f"no word survives the LDA dictionary filter (no_below={cfg.no_below}, "
                         f"no_above={cfg.no_above}) in {len(texts)} training chunks; use a larger corpus")
    bows = [dictionary.doc2bow(d) for d in docs]
    lda = LdaModel(bows, id2word=dictionary, num_topics=cfg.topics, random_state=cfg.seed, passes=cfg.lda_passes,
                   iterations=cfg.lda_iterations, chunksize=2000, alpha="symmetric", minimum_probability=0.0,
                   eval_every=None)
    return lda, dictionary


def topic_distributions(lda, dictionary, texts: list[str], seed: int = 0) -> np.ndarray:
    """(n, K) topic distributions; the inference RNG restarts from ``seed`` for every text."""
    out = np.empty((len(texts), lda.num_topics))
    for i, t in enumerate(texts):
        lda.random_state = np.random.RandomState(seed)
        gamma, _ = lda.inference([dictionary.doc2bow(preprocess(t))])
        out[i] = gamma[0] / gamma[0].sum()
    return out


def top_words(lda, n: int = 10) -> list[list[str]]:
    return [[w for w, _ in lda.show_topic(k, topn=n)] for k in range(lda.num_topics)]
