"""The kinds of input an analysis reads, each an object that owns its options and how its inputs are made.

An analysis declares one kind (:class:`analyses.analysis.Analysis` ``inputs=``); the command line and the
Python call (``<analysis>.run``) both ask it for the inputs of ``compute(cfg, **inputs)``:

==========================  ===========================================  ====================================
kind                        inputs of ``compute``                        options (its Config base)
==========================  ===========================================  ====================================
:class:`Sentences`          ``acts``: a seeded sentence sample's states  :class:`SentenceConfig`
:class:`Windows`            ``acts``: windows of running text, per       :class:`WindowConfig`
                            window length
:class:`Pairs`              ``acts_a``, ``acts_b``: two models on the    :class:`SentenceConfig`
                            same sentence sample
:class:`LM`                 ``lm`` (and ``documents`` from Python)       :class:`LMConfig`
:class:`LMPair`             ``lm_a``, ``lm_b``, ``corpus``               :class:`LMPairConfig`
:class:`Timing`             ``runners``: models built for timing         :class:`TimedConfig`
==========================  ===========================================  ====================================

A kind's Config base composes exactly the probes.config groups its inputs use, so a flag that could only be
refused is never offered. On the command line a kind names the units of a run (:meth:`Inputs.units`: one
model, or a pair), resolves each model once, checks it before any work (:meth:`Inputs.check_model`) and
loads a unit's inputs from the cache under ``<out>/cache`` (:meth:`Inputs.load`). From Python
(:meth:`Inputs.from_python`) it takes a model (a name, a folder, ``hf:org/name`` or a loaded object with its
``tokenizer=``) and the caller's texts or a corpus, and builds the same inputs.

The analyses never run a model themselves, with two documented exceptions: an LM analysis's ``compute``
runs the LM it is given (scoring windows, generating), and speed's times the runners.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from analyses.options import (  # noqa: F401 - re-exported: the options of each kind, with the kinds
    CALLER_TEXTS,
    LMConfig,
    LMPairConfig,
    SentenceConfig,
    TimedConfig,
    WindowConfig,
    caller_texts,
    caller_texts_list,
    corpus_of,
)
from probes.capture.store import USER_CACHE, UserCache
from probes.errors import ProbeError

# ----------------------------------------------------------------------------- helpers


def resolve_spec(model):
    """The CheckpointSpec of a name, folder or spec, or of an Encoder already made (a wrapped model object)."""
    from probes.checkpoints.names import get_spec
    from probes.models.encoder import Encoder

    return model.spec if isinstance(model, Encoder) else get_spec(model)


def is_object(model) -> bool:
    from probes.models.user import is_model_object

    return is_model_object(model)


def record_model_requested(acts, model):
    """Record the model as the caller named it (an ``hf:`` id, a folder) beside the resolved spec."""
    if isinstance(model, str):
        acts.meta["model_requested"] = model
    return acts


def cli_cache(cfg) -> dict:
    """The command line's cache: ``<out>/cache``."""
    return {"cache_dir": Path(cfg.out) / "cache"}


def python_cache(cache_dir) -> dict:
    """The Python call's cache, as ``probes.extract`` takes it: probes' default (a per-user cache) for
    ``USER_CACHE``, the folder given, or None: no cache (the states stay in memory)."""
    return {} if isinstance(cache_dir, UserCache) else {"cache_dir": cache_dir}


def object_options(model, tokenizer, name) -> dict:
    """``extract``'s keywords for a model: a loaded object's ``tokenizer=`` and ``name=``, nothing for a name."""
    if is_object(model):
        return {"tokenizer": tokenizer, "name": name}
    if tokenizer is not None or name is not None:
        raise ProbeError("tokenizer= and name= go with a model object (a loaded transformers model); a model "
                         f"name or folder ({model!r:.60}) brings its own")
    return {}


# ----------------------------------------------------------------------------- the kinds


class Inputs:
    """How one kind of input is made; see the module docstring. Subclasses set ``kind`` and ``Config``."""

    kind: ClassVar[str] = ""
    Config: ClassVar[type] = object
    # a result is of two models, A and B: its identity's model is {"a": A's description, "b": B's}
    paired: ClassVar[bool] = False

    def units(self, cfg) -> list[tuple[str, ...]]:
        """The models of each compute of a run, as named on the command line: one model each."""
        return [(m,) for m in cfg.models()]

    def resolve(self, name: str):
        """A model name as the loader takes it (a CheckpointSpec; unknown names fail before any work)."""
        return resolve_spec(name)

    def check_model(self, spec, cfg) -> None:
        """One error line, before any work, if this kind cannot read ``spec`` (e.g. not a causal LM)."""

    def load(self, unit: tuple, cfg) -> dict:
        """The keyword inputs of ``compute(cfg, **inputs)`` for one unit of resolved models (the CLI's path)."""
        raise NotImplementedError

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        """The keyword inputs of ``compute`` for a model (a name, a folder, ``hf:`` id or a loaded object) and
        ``texts`` (a list of strings, or a corpus name or path; None: ``cfg.corpus``)."""
        raise NotImplementedError

    def results(self, computed) -> list:
        """The Results one compute gives (one; speed's gives one per model)."""
        return [computed]

    def with_corpus(self, cfg, texts):
        """``cfg`` with the corpus ``texts`` names, when ``texts`` is a corpus name or path."""
        corpus = corpus_of(texts)
        return dataclasses.replace(cfg, corpus=corpus) if corpus is not None and hasattr(cfg, "corpus") else cfg


@dataclasses.dataclass(frozen=True)
class Sentences(Inputs):
    """A seeded sentence sample of a corpus (or the caller's texts), encoded by one model: ``{"acts": ...}``.

    ``maps``: also capture the attention maps and every map the encoder declares; ``token_states=False``:
    keep no token states (an analysis of sentence vectors or maps only: a smaller cache entry); ``family``:
    only models registered with that family (``needs`` says what the analysis needs, in the error: "analyses.mog
    needs a Graph-Transformer")."""

    maps: bool = False
    token_states: bool = True
    family: str | None = None
    needs: str = ""

    kind: ClassVar[str] = "sentences"
    Config: ClassVar[type] = SentenceConfig

    def check_model(self, spec, cfg) -> None:
        if self.family is not None and spec.family != self.family:
            raise ProbeError(f"model '{spec.name}' is of family {spec.family}: {self.needs}, registered with family "
                             f"{self.family}")

    def activations(self, model, cfg, texts: list[str] | None = None, **options):
        """The activations of ``cfg``'s sentence sample (or of ``texts``) for ``model``; ``options``: more
        keywords of :func:`probes.extract` (``cache_dir``, a model object's ``tokenizer=`` and ``name=``)."""
        from probes.capture.extract import extract

        corpus = None
        if texts is None:
            texts, corpus = cfg.draw(cfg.corpus, cfg.seed)
        acts = extract(model, texts, maps=self.maps, layers=None if self.token_states else (), corpus=corpus,
                       **options, **cfg.extract_kwargs())
        return record_model_requested(acts, model)

    def load(self, unit: tuple, cfg) -> dict:
        return {"acts": self.activations(unit[0], cfg, **cli_cache(cfg))}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        if not is_object(model):
            self.check_model(resolve_spec(model), cfg)
        given = None if texts is None or corpus_of(texts) is not None else caller_texts_list(texts)
        return {"acts": self.activations(model, cfg, given, **python_cache(cache_dir),
                                         **object_options(model, tokenizer, name))}


@dataclasses.dataclass(frozen=True)
class Pairs(Sentences):
    """Two models on the same sentence sample: the first --model with every other (alone: with itself),
    ``{"acts_a": ..., "acts_b": ...}`` (the same object twice for a model with itself)."""

    kind: ClassVar[str] = "pair"
    paired: ClassVar[bool] = True

    def units(self, cfg) -> list[tuple[str, ...]]:
        models = cfg.models()
        return [(models[0], b) for b in models[1:] or models[:1]]

    def load(self, unit: tuple, cfg) -> dict:
        a, b = unit
        acts_a = self.activations(a, cfg, **cli_cache(cfg))
        return {"acts_a": acts_a, "acts_b": acts_a if b == a else self.activations(b, cfg, **cli_cache(cfg))}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        """``model``: the pair (A, B); ``tokenizer=`` and ``name=``: a pair too where A or B is a loaded object."""
        a, b = _pair(model, "models to compare")
        given = None if texts is None or corpus_of(texts) is not None else caller_texts_list(texts)
        acts = [self.activations(m, cfg, given, **python_cache(cache_dir), **object_options(m, t, n))
                for m, t, n in zip((a, b), _two(tokenizer), _two(name))]
        return {"acts_a": acts[0], "acts_b": acts[0] if _same(a, b) else acts[1]}


def _pair(model, what: str) -> tuple:
    if not isinstance(model, (tuple, list)) or len(model) != 2:
        raise ProbeError(f"model= takes the pair of {what}, (A, B)")
    return tuple(model)


def _two(x) -> tuple:
    """A per-side option: (A's, B's) as given, or the one value for both."""
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def _same(a, b) -> bool:
    return a is b or (isinstance(a, str) and a == b)


@dataclasses.dataclass(frozen=True)
class Windows(Inputs):
    """Windows of exactly n token ids of running text (never across documents) for every n in the Config's
    ``window_length``, ``n_windows`` of each (non-overlapping, seeded; :func:`probes.corpus.token_windows`),
    encoded by one model as one sequence each: ``{"acts": [one Activations per n]}``. Only the token states of
    the Config's ``layer`` are cached. The analysis's Config declares those three fields; every length is
    checked against each model's limit before anything is extracted (:func:`check_window_lengths`)."""

    kind: ClassVar[str] = "windows"
    Config: ClassVar[type] = WindowConfig

    def check_model(self, spec, cfg) -> None:
        check_window_lengths(spec, cfg.window_length)

    def load(self, unit: tuple, cfg) -> dict:
        return {"acts": self.activations(unit[0], cfg, **cli_cache(cfg))}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        """``texts``: a corpus name or path, or the caller's texts (each a document the windows are cut from)."""
        from probes.corpus import Corpus, Document
        from probes.models.user import wrap_encoder

        corpus = None
        if texts is not None and corpus_of(texts) is None:
            docs = [Document(f"text-{i}", t) for i, t in enumerate(caller_texts_list(texts))]
            corpus = Corpus.from_documents(CALLER_TEXTS, docs)
        if is_object(model):
            model = wrap_encoder(model, tokenizer, name=name)
        else:
            object_options(model, tokenizer, name)
        return {"acts": self.activations(model, cfg, corpus, **python_cache(cache_dir))}

    def activations(self, model, cfg, corpus=None, **options) -> list:
        """One Activations per window length of ``cfg`` for ``model`` (a name, spec or loaded Encoder), cut from
        ``corpus`` (default: ``cfg.corpus``); ``options``: more keywords of :func:`probes.extract` (``cache_dir``)."""
        from probes.capture.extract import extract
        from probes.corpus import load_corpus, token_windows
        from probes.models.encoder import Encoder

        spec = model.spec if isinstance(model, Encoder) else resolve_spec(model)
        tok = check_window_lengths(spec, cfg.window_length, model.tokenizer if isinstance(model, Encoder) else None)
        corp = load_corpus(cfg.corpus) if corpus is None else corpus
        encode = paragraph_encoder(tok)  # each paragraph tokenized once for all n, and for models sharing tok
        out = []
        for n in cfg.window_length:
            ids = token_windows(corp, encode, n, cfg.n_windows, cfg.seed)
            ident = {**corp.identity(), "unit": "token window of running text", "window": n, "n_windows": len(ids),
                     "seed": cfg.seed, "sampling": "probes.corpus.token_windows: non-overlapping, within one document"}
            acts = extract(model if isinstance(model, Encoder) else spec, ids, layers=(cfg.layer,), corpus=ident,
                           **options, **cfg.extract_kwargs())
            got = non_special_counts(acts)
            if (got != n).any():  # the encoder must add its own special tokens and flag exactly those
                raise ProbeError(f"model '{spec.name}': windows of {n} ids came back with {int(got[0])} non-special "
                                 "tokens")
            out.append(record_model_requested(acts, model))
        return out


# one memo per distinct tokenizer (by the sha256 of its full serialisation): models that share a tokenizer (the
# suite's small models and their seeds) tokenize the corpus once between them, not once each. The memos of the
# MEMO_TOKENIZERS tokenizers used last are kept (a memo holds a corpus's ids: tens of MB for the default corpus).
_PARAGRAPH_IDS: OrderedDict[str, Callable[[str], list[int]]] = OrderedDict()
MEMO_TOKENIZERS = 2


def paragraph_encoder(tok) -> Callable[[str], list[int]]:
    """``tok.encode`` (a paragraph -> its ids, no special tokens) with a memo shared by every tokenizer equal to
    ``tok``; a tokenizer that cannot be identified (not a transformers tokenizer) gets a memo of its own."""
    from probes.models.user import tokenizer_sha256

    inner = getattr(tok, "tokenizer", None)  # the transformers tokenizer inside the suite's HFTokenizer
    if inner is None or not hasattr(inner, "get_vocab"):
        return functools.lru_cache(maxsize=None)(tok.encode)
    key = f"{type(tok).__module__}.{type(tok).__qualname__}:{tokenizer_sha256(inner)}"  # the wrapper's encode too
    memo = _PARAGRAPH_IDS.pop(key, None) or functools.lru_cache(maxsize=None)(tok.encode)
    _PARAGRAPH_IDS[key] = memo  # the most recent last
    while len(_PARAGRAPH_IDS) > MEMO_TOKENIZERS:
        _PARAGRAPH_IDS.popitem(last=False)
    return memo


def non_special_counts(acts):
    """(T,) the number of non-special tokens of each text of ``acts``."""
    import numpy as np

    kept = np.concatenate([[0], np.cumsum(~np.asarray(acts.special))])
    return kept[acts.offsets[1:]] - kept[acts.offsets[:-1]]


def check_window_lengths(model, windows: list[int], tokenizer=None):
    """One error line if a window of n tokens plus the model's special tokens exceeds its limit. Returns the
    tokenizer (loaded if not given: no weights are read)."""
    import numpy as np

    from probes.checkpoints.loaders import load_tokenizer

    tok = tokenizer if tokenizer is not None else load_tokenizer(model)
    for n in windows:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
            raise ProbeError(f"--window-length {n}: a window needs at least 2 tokens")
        if n + tok.n_special > tok.max_length:
            extra = f" plus its {tok.n_special} special tokens" if tok.n_special else ""
            raise ProbeError(f"--window-length {n} is too long for model '{getattr(model, 'name', model)}': "
                             f"{n} tokens{extra} = {n + tok.n_special} > its limit of {tok.max_length} tokens; "
                             f"use --window-length {tok.max_length - tok.n_special} or less")
    return tok


@dataclasses.dataclass(frozen=True)
class LM(Inputs):
    """One causal LM with its head, on ``--device``: ``{"lm": ...}``; from Python also the documents it scores
    (the caller's texts, one document each), ``{"lm", "documents"}``."""

    kind: ClassVar[str] = "lm"
    Config: ClassVar[type] = LMConfig

    def check_model(self, spec, cfg) -> None:
        from probes.models.lm import need_causal

        need_causal(spec)

    def load(self, unit: tuple, cfg) -> dict:
        from probes.models.lm import load_lm

        return {"lm": load_lm(unit[0], cfg.device)}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        from probes.models.lm import load_lm

        if not is_object(model):
            self.check_model(resolve_spec(model), cfg)
        object_options(model, tokenizer, name)
        lm = load_lm(model, cfg.device, tokenizer=tokenizer, model_name=name)
        if texts is None or corpus_of(texts) is not None:
            return {"lm": lm}
        return {"lm": lm, "documents": caller_documents(lm, caller_texts_list(texts))}


def caller_documents(lm, texts: list[str]) -> tuple[list[tuple[str, list[int], int]], dict]:
    """The caller's texts as the documents an LM analysis scores: ([(name, token ids, words)], identity)."""
    docs = [(f"text-{i}", lm.encode(t), len(t.split())) for i, t in enumerate(texts)]
    docs = [d for d in docs if len(d[1]) >= 2]
    if not docs:
        raise ProbeError("texts= holds no text of at least 2 tokens to score")
    return docs, caller_texts(texts)


@dataclasses.dataclass(frozen=True)
class LMPair(Inputs):
    """Two causal LMs (the Config's ``model_a``, ``model_b``) and the corpus they are compared on:
    ``{"lm_a", "lm_b", "corpus"}`` (one LM object when A is B)."""

    kind: ClassVar[str] = "lm_pair"
    Config: ClassVar[type] = LMPairConfig
    paired: ClassVar[bool] = True

    def units(self, cfg) -> list[tuple[str, ...]]:
        return [(cfg.model_a, cfg.model_b)]

    def check_model(self, spec, cfg) -> None:
        from probes.models.lm import need_causal

        need_causal(spec)

    def load(self, unit: tuple, cfg) -> dict:
        from probes.corpus import load_corpus
        from probes.models.lm import load_lm

        a, b = unit
        lm_a = load_lm(a, cfg.device)
        return {"lm_a": lm_a, "lm_b": lm_a if b == a else load_lm(b, cfg.device), "corpus": load_corpus(cfg.corpus)}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        """``model``: the pair (A, B); ``tokenizer=`` and ``name=``: a pair too where A or B is a loaded object;
        ``texts``: a corpus name or path, or the caller's texts as the corpus's documents."""
        from probes.corpus import Corpus, Document, load_corpus
        from probes.models.lm import load_lm

        a, b = _pair(model, "causal LMs to compare")
        lms = []
        for m, t, n in zip((a, b), _two(tokenizer), _two(name)):
            if not is_object(m):
                self.check_model(resolve_spec(m), cfg)
            lms.append(load_lm(m, cfg.device, **({"tokenizer": t, "model_name": n} if is_object(m) else {})))
        if texts is None or corpus_of(texts) is not None:
            corpus = load_corpus(cfg.corpus)
        else:
            docs = [Document(f"text-{i}", t) for i, t in enumerate(caller_texts_list(texts))]
            corpus = Corpus.from_documents(CALLER_TEXTS, docs)
        return {"lm_a": lms[0], "lm_b": lms[0] if _same(a, b) else lms[1], "corpus": corpus}


@dataclasses.dataclass(frozen=True)
class Timing(Inputs):
    """Every model of the run, built for timing (random weights of the seed for the random-init architectures,
    ``random_models``; any other name a checkpoints.yaml entry) and timed together: ``{"runners": [...]}``;
    one compute gives one Result per model."""

    random_models: tuple[str, ...] = ()

    kind: ClassVar[str] = "timing"
    Config: ClassVar[type] = TimedConfig

    def units(self, cfg) -> list[tuple[str, ...]]:
        return [tuple(cfg.models())]

    def resolve(self, name: str):
        return name if name in self.random_models else resolve_spec(name)

    def load(self, unit: tuple, cfg) -> dict:
        from probes.capture.timing import build_runner

        return {"runners": [build_runner(m, cfg.timing()) for m in unit]}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        if texts is not None:
            raise ProbeError("speed times random token ids: it takes no texts=")
        models = list(model) if isinstance(model, (tuple, list)) else [model]
        return self.load(tuple(self.resolve(m) if isinstance(m, str) else m for m in models), cfg)

    def results(self, computed) -> list:
        return list(computed.values())


KINDS: dict[str, type[Inputs]] = {k.kind: k for k in (Sentences, Pairs, Windows, LM, LMPair, Timing)}
