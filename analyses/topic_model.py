"""The topic model of :mod:`analyses.topics`: LDA topics of texts (gensim, with the documented preprocessing,
seeded; a fit is done once and reused from memory and from the run's activation cache, :func:`fit_lda`) and the
Jensen-Shannon divergence between two topic distributions (base 2, the divergence, in [0, 1])."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import numpy as np

from probes.errors import ProbeError
from probes.io import atomic_write, loads_json


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


# the LdaModel arguments fit_lda fixes (the others come from the Config); part of the cache key
LDA_FIXED = {"chunksize": 2000, "alpha": "symmetric", "minimum_probability": 0.0, "eval_every": None}
# bump when what a saved LDA holds or how its key is made changes: older ones are fitted again (2: lda.json
# checksums its own fields too, the word list that indexes the arrays among them)
LDA_FORMAT = 2
LDA_FOLDER = ".lda"  # below the activation cache (hidden, as .tuned-lens: `probes cache` lists no entry of it)
MEMO_SIZE = 8  # fitted LDAs kept in memory, the most recently used
_MEMO: OrderedDict[str, tuple] = OrderedDict()
log = logging.getLogger(__name__)


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


def lda_settings(cfg: LdaSettings) -> dict:
    """Every setting that decides the fit: the Config's and the fixed LdaModel arguments (:data:`LDA_FIXED`)."""
    return {"topics": cfg.topics, "no_below": cfg.no_below, "no_above": cfg.no_above, "lda_passes": cfg.lda_passes,
            "lda_iterations": cfg.lda_iterations, "seed": cfg.seed, **LDA_FIXED}


def lda_key(texts: list[str], cfg: LdaSettings) -> str:
    """sha256 of everything that decides the fit: the training texts, :func:`lda_settings`, the gensim and numpy
    versions (the preprocessing and the arithmetic) and :data:`LDA_FORMAT`."""
    import gensim

    h = hashlib.sha256()
    for text in texts:  # each text prefixed by its length: no two lists of texts hash alike
        data = text.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    doc = {"format": LDA_FORMAT, "texts_sha256": h.hexdigest(), "n_texts": len(texts), "settings": lda_settings(cfg),
           "gensim": gensim.__version__, "numpy": np.__version__}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def lda_folder(cache_dir) -> Path | None:
    """Where fitted LDAs are kept for an activation cache ``cache_dir`` (a folder, ``USER_CACHE``: the per-user
    cache, :func:`probes.capture.store.user_cache_dir`): ``<cache>/.lda``; None for ``cache_dir=None``."""
    from probes.capture.store import cache_subfolder

    return cache_subfolder(cache_dir, LDA_FOLDER)


def fit_lda(texts: list[str], cfg: LdaSettings, cache_dir=None):
    """(LdaModel, Dictionary) fitted on ``texts`` with the documented preprocessing; seeded.

    A fit is done once per :func:`lda_key` and reused: kept in memory for the process, and saved under
    ``<cache_dir>/.lda/<key>/`` (``cache_dir``: the run's activation cache, a folder or ``USER_CACHE``; None:
    memory only). The model read back is the fitted one to the bit (its sufficient statistics, priors and
    dictionary); a saved LDA that is damaged, cut short or of another key or version is fitted again, with a
    warning. The model returned may be shared with other callers: do not train it further."""
    key = lda_key(texts, cfg)
    folder = lda_folder(cache_dir)
    entry = folder / key if folder is not None else None
    if key in _MEMO:
        _MEMO.move_to_end(key)
        lda, dictionary = _MEMO[key]
        if entry is not None and not (entry / "lda.json").is_file():
            save_lda(entry, key, lda, dictionary, cfg)
        return lda, dictionary
    got = None
    if entry is not None and (entry / "lda.json").exists():
        try:
            got = load_lda(entry, key, cfg)
            log.info("LDA read from %s", entry)
        except Exception as e:  # whatever is wrong with the files: fit again, never a wrong number
            warnings.warn(f"the saved LDA {entry} cannot be used ({type(e).__name__}: {e}); fitting it again",
                          stacklevel=2)
    if got is None:
        got = _fit(texts, cfg)
        if entry is not None:
            save_lda(entry, key, got[0], got[1], cfg)
    _MEMO[key] = got
    while len(_MEMO) > MEMO_SIZE:
        _MEMO.popitem(last=False)
    return got


def _fit(texts: list[str], cfg: LdaSettings):
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
                   iterations=cfg.lda_iterations, **LDA_FIXED)
    return lda, dictionary


def clear_memo() -> None:
    """Forget the fits kept in memory (the next :func:`fit_lda` reads the cache or fits again)."""
    _MEMO.clear()


def arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    """sha256 of the arrays' names, dtypes, shapes and bytes (not of the .npz file, whose zip entries hold the time
    they were written)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode("utf-8"))
        h.update(a.tobytes())
    return h.hexdigest()


def record_sha256(meta: dict) -> str:
    """sha256 of every field of lda.json but this checksum itself: the words by id, the counts and the random
    state's position (what indexes and continues the arrays, whose own sha256 is one of the fields)."""
    body = {k: v for k, v in meta.items() if k != "record_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def save_lda(entry: Path, key: str, lda, dictionary, cfg: LdaSettings) -> None:
    """Write ``entry/lda.npz`` (sufficient statistics, eta, alpha, the dictionary's document and collection
    frequencies, the RNG's key; no pickle) and then ``entry/lda.json`` (the key, versions, settings, the words by id
    and the arrays' sha256), each atomically. A failure to write is a warning: the next run fits the LDA again."""
    import gensim

    n = len(dictionary)
    by_id = sorted((i, t) for t, i in dictionary.token2id.items())
    if [i for i, _ in by_id] != list(range(n)):  # filter_extremes numbers the words 0..n-1; anything else: no file
        log.info("LDA not saved: its dictionary's ids are not 0..%d", n - 1)
        return
    tokens = [t for _, t in by_id]
    arrays = {"sstats": lda.state.sstats, "eta": lda.eta, "alpha": lda.alpha,
              "dfs": np.array([dictionary.dfs.get(i, 0) for i in range(n)], dtype=np.int64),
              "cfs": np.array([dictionary.cfs.get(i, 0) for i in range(n)], dtype=np.int64)}
    rng, rng_keys, rng_pos, has_gauss, gauss = lda.random_state.get_state()
    arrays["random_state"] = np.asarray(rng_keys, dtype=np.uint32)
    meta = {"format": LDA_FORMAT, "key": key, "gensim": gensim.__version__, "numpy": np.__version__,
            "settings": lda_settings(cfg), "num_topics": lda.num_topics, "num_terms": lda.num_terms,
            "numdocs": int(lda.state.numdocs), "num_updates": int(lda.num_updates),
            "random_state": {"generator": rng, "pos": int(rng_pos), "has_gauss": int(has_gauss), "gauss": float(gauss)},
            "dictionary": {"num_docs": dictionary.num_docs, "num_pos": dictionary.num_pos,
                           "num_nnz": dictionary.num_nnz},
            "arrays_sha256": arrays_sha256(arrays), "tokens": tokens}
    meta["record_sha256"] = record_sha256(meta)
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    try:
        atomic_write(entry / "lda.npz", buf.getvalue())
        atomic_write(entry / "lda.json", json.dumps(meta, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (OSError, ProbeError) as e:
        warnings.warn(f"cannot save the fitted LDA to {entry} ({e}); it is fitted again by the next run", stacklevel=3)


def load_lda(entry: Path, key: str, cfg: LdaSettings):
    """(LdaModel, Dictionary) read from ``entry`` as :func:`save_lda` wrote it: the same words with the same ids,
    and a model whose sufficient statistics, priors and so ``expElogbeta`` are the fitted model's. Raises
    ValueError (or the reader's error) for a file that is not a complete one of this ``key`` and version."""
    import gensim
    from gensim.corpora import Dictionary
    from gensim.models import LdaModel

    meta = loads_json((entry / "lda.json").read_bytes())
    if not isinstance(meta, dict):
        raise ValueError(f"lda.json holds a JSON {type(meta).__name__}, not an object")
    for field, want in (("format", LDA_FORMAT), ("key", key), ("gensim", gensim.__version__),
                        ("numpy", np.__version__), ("settings", lda_settings(cfg))):
        if meta.get(field) != want:
            raise ValueError(f"its {field} is {meta.get(field)!r}, this run's {want!r}")
    if meta.get("record_sha256") != record_sha256(meta):  # the words index the arrays: both are checksummed
        raise ValueError("lda.json's fields are not the ones it was written with")
    tokens, K, V = meta["tokens"], meta["num_topics"], meta["num_terms"]
    if (not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens) or len(set(tokens)) != len(tokens)
            or len(tokens) != V or K != cfg.topics or V < 1):
        raise ValueError("its words are not a list of distinct words, one per term")
    with np.load(entry / "lda.npz", allow_pickle=False) as z:
        arrays = {name: z[name] for name in ("sstats", "eta", "alpha", "dfs", "cfs", "random_state")}
    if arrays_sha256(arrays) != meta["arrays_sha256"]:
        raise ValueError("lda.npz is not the file lda.json was written with")

    logging.getLogger("gensim").setLevel(logging.WARNING)
    dictionary = Dictionary()
    dictionary.token2id = {t: i for i, t in enumerate(tokens)}
    dictionary.id2token = dict(enumerate(tokens))
    dictionary.dfs = {i: int(v) for i, v in enumerate(arrays["dfs"])}
    dictionary.cfs = {i: int(v) for i, v in enumerate(arrays["cfs"])}
    for name in ("num_docs", "num_pos", "num_nnz"):
        setattr(dictionary, name, int(meta["dictionary"][name]))
    lda = LdaModel(id2word=dictionary, num_topics=K, random_state=cfg.seed, passes=cfg.lda_passes,
                   iterations=cfg.lda_iterations, **LDA_FIXED)
    for name, want in (("sstats", lda.state.sstats), ("eta", lda.eta), ("alpha", lda.alpha)):
        got = arrays[name]
        if got.dtype != want.dtype or got.shape != want.shape or not np.isfinite(got).all():
            raise ValueError(f"its {name} is {got.dtype} {got.shape}, not the model's {want.dtype} {want.shape}")
    lda.eta = lda.state.eta = arrays["eta"]
    lda.alpha = arrays["alpha"]
    lda.state.sstats = arrays["sstats"]
    lda.state.numdocs = int(meta["numdocs"])
    lda.num_updates = int(meta["num_updates"])
    rng = meta["random_state"]  # where the fit left the RNG: inference without a reseed draws what it would have
    lda.random_state.set_state((rng["generator"], arrays["random_state"], int(rng["pos"]), int(rng["has_gauss"]),
                                float(rng["gauss"])))
    lda.sync_state()  # expElogbeta = exp(E[log beta]) of eta + sstats: what the fit's last M step set
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
