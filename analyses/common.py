"""What every analysis shares: the Result base and its identity, the config bases (the CLI helpers come from
probes.config), and, re-exported, the result files of :mod:`analyses.files`.

* A config is a dataclass whose fields are declared with :func:`probes.config.arg` (default, one line
  of help, valid range); :func:`probes.config.parse_config` builds the validated CLI from it. Each kind of
  input has its Config base (:class:`SentenceConfig`, :class:`WindowConfig`, :class:`LMConfig`,
  :class:`LMPairConfig`, :class:`TimedConfig`, defined with the kinds in :mod:`analyses.inputs`), composed
  of the probes.config groups that kind uses.
* Every result is an :class:`AnalysisResult`: one :class:`Identity` (model as requested and as resolved,
  corpus identity or the caller's texts, the settings actually used) saved flat at the top, then the numbers.
  In a notebook it shows as a few lines (:meth:`AnalysisResult.summary`), not as its every number.
* :func:`write_result` writes ``<out>/results/<analysis>/<model>.json`` and ``.csv`` atomically and strictly;
  :func:`read_results` reads them back as the analysis's Result objects; :func:`save_figure` writes PNG + PDF
  into ``<out>/figures/`` (all three in :mod:`analyses.files`).
* :func:`run_main` turns a user error into one line on stderr and exit code 2 (see probes.config).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from analyses import pairs
from analyses.edited import edit_label, edited_name, in_words, recorded_edits
from analyses.files import (
    jsonable,
    read_result,
    read_results,
    result_name,
    result_paths,
    save_drawings,
    save_figure,
    write_result,
)
from analyses.inputs import (
    CALLER_TEXTS,
    LMConfig,
    LMPairConfig,
    SentenceConfig,
    TimedConfig,
    WindowConfig,
    caller_texts,
)
from probes.config import (
    arg,
    check_device,
    check_writable,
    parse_config,
    run_main,
    unique,
)
from probes.errors import ProbeError
from probes.io import atomic_write, provenance

# The config -> CLI helpers and the atomic write live in probes/ (both sides use them), the Config bases in
# analyses.inputs (with the kinds of input they belong to), the result files in analyses.files; they are
# re-exported here so an analysis imports everything it needs from one module.
__all__ = ["AnalysisResult", "CALLER_TEXTS", "Identity", "LMConfig", "LMPairConfig", "Result", "SentenceConfig",
           "TimedConfig", "WindowConfig", "activations_identity", "arg", "as_floats", "atomic_write", "caller_texts",
           "check_device", "check_reached", "check_writable", "config_dict", "mark_final_norm", "pair_identity",
           "parse_config", "provenance", "read_result", "read_results", "result_name", "result_paths", "run_main",
           "save_drawings", "save_figure", "settings_used", "unique", "write_result"]


@dataclasses.dataclass
class Result:
    """Base of every analysis's result: a dataclass whose fields are the saved document's keys.

    Numbers live in typed fields; prose lives only in ``definitions`` (plots never read it).
    :meth:`to_json` gives the document :func:`write_result` saves (it adds ``analysis``,
    ``model_name`` and ``provenance``); :meth:`from_json` reads a saved document back, ignoring keys
    the class does not know (so fields may be added) and naming the first missing one."""

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, doc):
        if isinstance(doc, cls):
            return doc
        fields = dataclasses.fields(cls)
        required = [f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        missing = [n for n in required if n not in doc]
        if missing:
            raise KeyError(missing[0])
        names = {f.name for f in fields}
        return cls(**{k: v for k, v in doc.items() if k in names})


# ----------------------------------------------------------------------------- identity

IDENTITY_FIELDS = ("model_name", "model_requested", "config", "model", "activations", "corpus")


@dataclasses.dataclass
class Identity:
    """What a result was computed from: the one identity block of every result, saved flat at the top
    of the document under these keys (``model_name``, ``model_requested``, ``config``, ``model``,
    ``activations``, ``corpus``)."""

    model_name: str  # the model as resolved (registry name, or the spec's safe name); a pair: "<A>__<B>__<unit>"
    config: dict  # the settings actually used (see settings_used); ``out`` never
    model: dict  # the resolved model's description (sentence vector, final-norm convention, ...); a pair: a/b
    activations: dict | list | None = None  # the activation cache entry (entries; a pair: a/b); None: no activations
    corpus: dict | None = None  # corpus identity and sampling, or {"source": CALLER_TEXTS, "n_texts", "sha256"}
    model_requested: str | list | None = None  # the model as the caller named it (e.g. hf:org/name); None: as resolved

    def __post_init__(self) -> None:
        # a run under an edit of the model's states is named as one (the model's name and the edit's label,
        # analyses.edited), whether made now or read back from a file written before its name said so
        self.model_name = edited_name(self.model_name, self.edit)

    @property
    def edits(self) -> list[dict]:
        """The edits of the model's states the result was computed under, as it records them ([]: the model as
        it is)."""
        return recorded_edits(self.activations, self.model)

    @property
    def edit(self) -> str:
        """The label of the edit the result was computed under (:func:`analyses.edited.edit_label`); "" for a
        result of the model as it is."""
        return edit_label(self.edits)

    def to_json(self, keys: dict | None = None) -> dict:
        """The flat keys of the saved document. ``keys`` renames a field on disk: to another key, or,
        for a pair's ``{"a": ..., "b": ...}``, to two keys (e.g. ``("model_a", "model_b")``)."""
        keys, doc = keys or {}, {}
        for f in IDENTITY_FIELDS:
            value, key = getattr(self, f), keys.get(f, f)
            if f in ("activations", "model_requested") and value is None:
                continue
            if isinstance(key, tuple):
                doc.update({k: value[side] for k, side in zip(key, "ab")})
            else:
                doc[key] = value
        return doc

    @classmethod
    def from_json(cls, doc: dict, keys: dict | None = None) -> Identity:
        keys = keys or {}
        parts: dict[str, Any] = {}  # Identity's fields
        for f in IDENTITY_FIELDS:
            key = keys.get(f, f)
            if isinstance(key, tuple) and all(k in doc for k in key):
                parts[f] = {side: doc[k] for k, side in zip(key, "ab")}
            elif not isinstance(key, tuple) and key in doc:
                parts[f] = doc[key]
            elif f in ("model_name", "config", "model"):
                raise KeyError(key if not isinstance(key, tuple) else key[0])
        return cls(**parts)


@dataclasses.dataclass
class AnalysisResult(Result):
    """A Result with one :class:`Identity` field, saved flat ahead of the numbers (the on-disk keys of
    every result: model_name, config, model, activations, corpus). ``IDENTITY_KEYS`` renames an identity
    key on disk where saved files already use another name (similarity: model -> models)."""

    identity: Identity
    ANALYSIS: ClassVar[str] = ""  # the analysis whose Result this is (set by its declaration, analyses.analysis)
    # the declaration's table_rows(result) -> rows of the CSV beside the result (set by the declaration too)
    TABLE_ROWS: ClassVar[Any] = None
    FIRST_LAYER: ClassVar[int] = 0  # the first layer the result has numbers for (1: maps, which layers compute)
    IDENTITY_KEYS: ClassVar[dict] = {}
    SIDE_FILES: ClassVar[dict] = {}  # field -> file suffix: saved as JSON lines beside the result (write_result)
    # plot() draws one image (a heatmap: cmap= and colorbar= reach it) that refuses a second result on its Axes,
    # not lines or points that overlay; the display checks read it
    HEATMAP: ClassVar[bool] = False
    # a pair's result (analyses.pairs.PairInfo) is named A's and B's names joined by PAIR_JOIN, then, with
    # PAIR_UNIT, the result's unit
    PAIR_JOIN: ClassVar[str] = pairs.JOIN
    PAIR_UNIT: ClassVar[bool] = False

    def to_json(self) -> dict:
        rest = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "identity" and not (f.name in self.SIDE_FILES and getattr(self, f.name) is None)}
        return {**self.identity.to_json(self.IDENTITY_KEYS), **rest}

    @classmethod
    def from_json(cls, doc):
        if isinstance(doc, cls):
            return doc
        if isinstance(doc.get("identity"), Identity):
            return super().from_json(doc)
        return super().from_json({**doc, "identity": Identity.from_json(doc, cls.IDENTITY_KEYS)})

    # the identity's parts, read where the saved document has them
    model_name = property(lambda self: self.identity.model_name)
    config = property(lambda self: self.identity.config)
    model = property(lambda self: self.identity.model)
    activations = property(lambda self: self.identity.activations)
    corpus = property(lambda self: self.identity.corpus)

    @property
    def edit(self) -> str:
        """The label of the edit of the model's states the result was computed under ("" for the model as it is;
        :mod:`analyses.edited`)."""
        return self.identity.edit

    def to_frame(self):
        """The result's table as a pandas DataFrame: the rows of the CSV written beside it (one per layer, or per
        model and layer, ... as the analysis tabulates them). A result computed under an edit of the model's
        states gets a first column ``edit``, the edit's label (:func:`analyses.edited.edit_label`), so frames of
        clean and edited runs concatenated stay apart (a clean row's ``edit`` is then empty); a clean result's
        frame is the CSV's rows as they are, with no column added."""
        import pandas as pd

        if type(self).TABLE_ROWS is None:
            raise TypeError(f"{type(self).__qualname__} belongs to no declared analysis: no table_rows to read")
        frame = pd.DataFrame(type(self).TABLE_ROWS(self))
        if self.edit:
            frame.insert(0, "edit", self.edit)
        return frame

    # ------------------------------------------------------------------------- display
    # Each analysis's Result is declared ``@dataclass(repr=False)``, so that these, not a dataclass repr of
    # every number (tens of thousands of characters), show when a Result is the last line of a notebook cell.

    def headline(self) -> dict[str, str]:
        """A few numbers that say what the result found, as label -> formatted value (each analysis's own)."""
        return {}

    def plotted_values(self) -> np.ndarray:
        """The numbers the first series :meth:`plot` draws shows, read from the result's own fields (each
        analysis's own): a line's y values, an error bar's point, a histogram's heights, a scatter's (x, y)
        points, a heatmap's image. The display checks compare them with what was drawn."""
        raise NotImplementedError(f"{type(self).__module__}.{type(self).__qualname__} declares no plotted_values(): "
                                  "the numbers its plot() draws first (docs/adding-an-analysis.md)")

    def headline_numbers(self) -> dict:
        """The headline numbers as :class:`analyses.stats.Sample` s, label -> the value with its bootstrap
        replicates where the result keeps them: what :mod:`analyses.series` draws against training step (the
        first by default). Each analysis's own; empty: nothing to draw."""
        return {}

    def summary(self) -> dict[str, str]:
        """What the result is: analysis, model, inputs, layers, then :meth:`headline`."""
        layers = self.model.get("num_layers") if isinstance(self.model, dict) else None
        rows = {"analysis": self.ANALYSIS or _analysis_of(type(self)), "model": self.model_name,
                "inputs": _inputs_text(self.corpus)}
        if self.edit:  # not the model's own states: say which edit made them
            rows["edit"] = in_words(self.identity.edits)
        if isinstance(layers, int):
            rows["layers"] = (f"0..{layers} (0 = embeddings)" if self.FIRST_LAYER == 0 else
                              f"{self.FIRST_LAYER}..{layers} (layer l's own maps; the embeddings have none)")
        return {**rows, **self.headline()}

    def __repr__(self) -> str:
        rows = self.summary()
        head = f"<{rows.pop('analysis')} result: {rows.pop('model')}"
        return head + "".join(f"; {k} {v}" for k, v in rows.items() if v) + ">"

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>{escape(v)}</td>"
                       "</tr>" for k, v in self.summary().items() if v)
        return f"<table>{rows}</table>"


def as_floats(values: Iterable) -> np.ndarray:
    """``values`` as a float array, a null (None) as NaN."""
    return np.array([np.nan if v is None else v for v in values], float)


def _analysis_of(cls: type) -> str:
    """The analysis a Result class belongs to: its module's name below ``analyses`` (``analyses.maps.common``: maps)."""
    parts = cls.__module__.split(".")
    return parts[1] if parts[0] == "analyses" and len(parts) > 1 else parts[-1]


def _inputs_text(corpus) -> str:
    """A result's inputs in words: the caller's texts, a corpus's sentence sample or windows, or the corpus."""
    if not isinstance(corpus, dict):
        return ""
    if corpus.get("source") == CALLER_TEXTS:
        return f"{corpus.get('n_texts')} texts given by the caller"
    if corpus.get("unit") == "sentence":
        return f"{corpus.get('n_sampled')} sentences of corpus {corpus.get('requested', corpus.get('name'))}"
    if isinstance(corpus.get("windows"), dict):
        sizes = ", ".join(f"{n} of {length}" for length, n in corpus["windows"].items())
        return f"token windows ({sizes} tokens) of corpus {corpus.get('name')}"
    return f"corpus {corpus.get('name')}" + (f" ({corpus['split']} part)" if corpus.get("split") else "")


# config field -> key of the corpus block of a suite sentence sample (probes.config.SampleConfig.draw)
SAMPLE_FIELDS = {"corpus": "requested", "n_sentences": "n_requested", "min_words": "min_words",
                 "max_words": "max_words"}


def settings_used(cfg, meta: dict | None = None, corpus: dict | None = None, requested=None) -> dict:
    """The config a result records: ``cfg`` as resolved (without ``out`` and the options the analysis
    cannot apply), with what the inputs say in place of what they decide: ``model`` stays the run's list
    when it names the model computed (``requested``, a name or a pair), else it becomes that model; the
    forward and cache dtypes and the batch size are those of the activations (``meta``); the sample's
    corpus, size and length bounds those of its ``corpus`` block, and they are left out when the caller
    gave the texts (a default that did not apply is never written)."""
    d = config_dict(cfg)
    if requested is not None and "model" in d:
        asked = list(requested) if isinstance(requested, (list, tuple)) else [requested]
        if not set(asked) <= set(d["model"] if isinstance(d["model"], list) else [d["model"]]):
            d["model"] = asked  # the config's models did not apply: these activations are another model's
    if meta is not None:
        for f, k in (("dtype", "dtype"), ("cache_dtype", "cache_dtype_requested"), ("batch_size", "batch_size")):
            if f in d and k in meta:
                d[f] = meta[k]
    block = corpus or {}
    sample = block.get("unit") == "sentence"
    given = corpus is None or is_caller_texts(block)
    for f, k in SAMPLE_FIELDS.items():
        if f not in d:
            continue
        if sample and k in block:
            d[f] = block[k]
        elif sample and f == "n_sentences":
            d[f] = block["n_sampled"]
        elif given:
            del d[f]
    return d


def is_caller_texts(corpus: dict | None) -> bool:
    """Whether a result's corpus block is the caller's own texts: recorded by :func:`caller_texts` (``source``),
    or a corpus built from them (``probes.corpus.Corpus.from_documents(CALLER_TEXTS, ...)``: its ``name``, as the
    windows and the LM pairs record it)."""
    return isinstance(corpus, dict) and CALLER_TEXTS in (corpus.get("source"), corpus.get("name"))


def activations_entry(meta: dict) -> dict:
    """The activation cache entry a result records (with the device and dtypes that produced it)."""
    # batch_size: the one that produced the cache entry (states differ by up to ~5e-6 between sizes)
    # intervention: the edits of the forward pass that made the states (probes.intervention), when there were any
    # libraries: the releases of torch, transformers, tokenizers and kernels that computed the states (an entry read
    # under other releases was checked first: libraries_checked, probes.capture.libraries)
    return {k: meta[k] for k in ("key", "n_texts", "n_tokens", "truncated_texts", "batch_size", "device", "dtype",
                                 "cache_dtype", "cache_dtype_fallback", "cache_verify", "nonfinite_states",
                                 "intervention", "libraries", "libraries_checked")
            if k in meta}


def activations_identity(acts, cfg) -> Identity:
    """The identity of a result computed from one model's Activations: the model and the corpus as the
    activations' meta records them (the caller's texts when no corpus was recorded), and the settings used."""
    meta = acts.meta
    corpus = meta.get("corpus") or caller_texts(acts.texts)
    name = meta["model"]["name"]
    requested = meta.get("model_requested", name)
    return Identity(model_name=name, config=settings_used(cfg, meta, corpus, requested), model=meta["model"],
                    activations=activations_entry(meta), corpus=corpus,
                    model_requested=requested if requested != name else None)


def pair_identity(acts_a, acts_b, cfg, name: str | None = None) -> Identity:
    """The identity of a result computed from two models' Activations of the same texts: ``model`` and
    ``activations`` each ``{"a": A's, "b": B's}`` (what the report's model table and the claims read of a pair),
    the texts' corpus and the settings used; named ``"<A>__<B>"`` unless ``name`` is given."""
    a, b = activations_identity(acts_a, cfg), activations_identity(acts_b, cfg)
    pair = pairs.PairInfo(a.model_name, b.model_name)
    return Identity(model_name=name or pair.name(), config=settings_used(cfg, acts_a.meta, a.corpus, list(pair.names)),
                    model={"a": a.model, "b": b.model}, activations={"a": a.activations, "b": b.activations},
                    corpus=a.corpus)


def check_reached(acts, cfg) -> None:
    """ProbeError if ``cfg`` asked for a forward or cache dtype the activations were not made with: the
    option did not reach the extraction (the CLI runner checks this after loading the inputs)."""
    for f, k in (("dtype", "dtype"), ("cache_dtype", "cache_dtype_requested")):
        if hasattr(cfg, f) and k in acts.meta and getattr(cfg, f) != acts.meta[k]:
            raise ProbeError(f"--{f.replace('_', '-')} {getattr(cfg, f)} was asked for, but these activations "
                             f"were made with {acts.meta[k]}: the option did not reach the extraction")


def mark_final_norm(ax, result: AnalysisResult, x, y, color=None) -> None:
    """Circle the last layer's point when the model's hidden[L] includes a final norm that the
    other layers lack (``model.final_norm_on_last_hidden``, e.g. GPT-2's ln_f): that step is a
    convention of the library, not the model's last layer alone."""
    if result.model.get("final_norm_on_last_hidden", False):
        ax.plot([x[-1]], [y[-1]], ls="none", marker="s", ms=8, mfc="none", mew=1.0, color=color,
                label=f"{result.model_name}: last layer after the final norm")


def config_dict(cfg) -> dict:
    """The resolved config for a result file. ``out`` and ``figures`` are left out: where results are
    written, and whether they are drawn at once, do not change them, and equal runs must give
    byte-identical files wherever they are written."""
    skip = {"out", "figures"}
    return jsonable({k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip})
