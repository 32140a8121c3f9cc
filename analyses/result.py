"""What a saved result is: the Result base (a dataclass whose fields are the saved document's keys), the identity
block every result has (:class:`Identity`: what it was computed from) and :class:`AnalysisResult`, the base of every
analysis's Result (its identity saved flat ahead of the numbers, its table as a frame, its short repr in a notebook).

Below the result files (:mod:`analyses.files` reads documents as these classes) and the declaration
(:mod:`analyses.analysis` sets a Result class's ``ANALYSIS`` and ``TABLE_ROWS``); :mod:`analyses.common` re-exports
all three names, where the analyses import them from.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from analyses import pairs, records
from analyses.edited import edit_label, edited_name, in_words, recorded_edits
from analyses.inputs import CALLER_TEXTS
from analyses.model_info import ModelInfo, ModelPair, model_of

__all__ = ["IDENTITY_FIELDS", "AnalysisResult", "Identity", "Result"]


@dataclasses.dataclass
class Result:
    """Base of every analysis's result: a dataclass whose fields are the saved document's keys.

    Numbers live in typed fields; prose lives only in ``definitions`` (plots never read it). A field annotated
    with a record type (a dataclass of rows, :class:`analyses.records.Definitions`, a bootstrap block) is written
    and read back by the one codec, :mod:`analyses.records`.
    :meth:`to_json` gives the document :func:`write_result` saves (it adds ``analysis``,
    ``model_name`` and ``provenance``); :meth:`from_json` reads a saved document back, ignoring keys
    the class does not know (so fields may be added) and naming the first missing one."""

    def to_json(self) -> dict:
        return {f.name: records.to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

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
        names, types = {f.name for f in fields}, records.field_types(cls)
        # a field annotated with a record type (analyses.records) is read back as that type; the rest as JSON gave it
        return cls(**{k: records.from_json(types.get(k, Any), v, k) for k, v in doc.items() if k in names})


# ----------------------------------------------------------------------------- identity

IDENTITY_FIELDS = ("model_name", "model_requested", "config", "model", "activations", "corpus")


@dataclasses.dataclass
class Identity:
    """What a result was computed from: the one identity block of every result, saved flat at the top
    of the document under these keys (``model_name``, ``model_requested``, ``config``, ``model``,
    ``activations``, ``corpus``)."""

    model_name: str  # the model as resolved (registry name, or the spec's safe name); a pair: "<A>__<B>__<unit>"
    config: dict  # the settings actually used (see settings_used); ``out`` never
    # the resolved model's description (sentence vector, final-norm convention, ...; analyses.model_info); a pair's
    # result: both (a/b). Saved as the JSON object it was read from; a dict given here is read by that codec
    model: ModelInfo | ModelPair
    activations: dict | list | None = None  # the activation cache entry (entries; a pair: a/b); None: no activations
    corpus: dict | None = None  # corpus identity and sampling, or {"source": CALLER_TEXTS, "n_texts", "sha256"}
    model_requested: str | list | None = None  # the model as the caller named it (e.g. hf:org/name); None: as resolved

    def __post_init__(self) -> None:
        self.model = model_of(self.model)
        # a run under an edit of the model's states is named as one (the model's name and the edit's label,
        # analyses.edited), whether made now or read back from a file written before its name said so
        self.model_name = edited_name(self.model_name, self.edit)

    @property
    def edits(self) -> list[dict]:
        """The edits of the model's states the result was computed under, as it records them ([]: the model as
        it is)."""
        return recorded_edits(self.activations, self.model.to_json())

    @property
    def info(self) -> ModelInfo:
        """The one model's description (a TypeError for a pair's result: ask :attr:`pair`)."""
        if not isinstance(self.model, ModelInfo):
            raise TypeError(f"{self.model_name} is a pair's result: its identity holds two models (identity.pair)")
        return self.model

    @property
    def pair(self) -> ModelPair | None:
        """A pair's two models' descriptions (A, B); None for one model's result."""
        return self.model if isinstance(self.model, ModelPair) else None

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
            if f == "model":
                value = self.model.to_json()
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
        rest = {f.name: records.to_json(getattr(self, f.name)) for f in dataclasses.fields(self)
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

    @property
    def model(self) -> ModelInfo:
        """The model's description (:class:`analyses.model_info.ModelInfo`); a pair's result has two:
        :attr:`models`."""
        return self.identity.info

    @property
    def models(self) -> ModelPair | None:
        """A pair's two models' descriptions (A, B); None for one model's result."""
        return self.identity.pair

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
        info = self.identity.model
        layers = info.num_layers if isinstance(info, ModelInfo) else None
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
