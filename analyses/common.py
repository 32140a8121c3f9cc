"""What every analysis shares: config bases, result files, figures (the CLI helpers come from probes.config).

* A config is a dataclass whose fields are declared with :func:`probes.config.arg` (default, one line
  of help, valid range); :func:`probes.config.parse_config` builds the validated CLI from it. Each kind of
  input has its Config base (:class:`SentenceConfig`, :class:`WindowConfig`, :class:`LMConfig`,
  :class:`LMPairConfig`, :class:`TimedConfig`, defined with the kinds in :mod:`analyses.inputs`), composed
  of the probes.config groups that kind uses.
* Every result is an :class:`AnalysisResult`: one :class:`Identity` (model as requested and as resolved,
  corpus identity or the caller's texts, the settings actually used) saved flat at the top, then the numbers.
  In a notebook it shows as a few lines (:meth:`AnalysisResult.summary`), not as its every number.
* :func:`write_result` writes ``<out>/results/<analysis>/<model>.json`` and ``.csv`` atomically;
  the JSON holds the numbers and everything that produced them (config, model identity,
  corpus identity, package versions). No timestamps: equal inputs give byte-identical files.
  :func:`read_results` reads them back as the analysis's Result objects.
* :func:`save_figure` writes PNG + PDF into ``<out>/figures/``.
* :func:`run_main` turns a user error into one line on stderr and exit code 2 (see probes.config).
* Result JSON is strict: a non-finite number is written as null and listed under ``nulls``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

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
from probes.io import atomic_write, loads_json, provenance, strict_json

# The config -> CLI helpers and the atomic write live in probes/ (both sides use them), the Config bases in
# analyses.inputs (with the kinds of input they belong to); they are re-exported here so an analysis imports
# everything it needs from one module.
__all__ = ["AnalysisResult", "CALLER_TEXTS", "Identity", "LMConfig", "LMPairConfig", "Result", "SentenceConfig",
           "TimedConfig", "WindowConfig", "activations_identity", "arg", "atomic_write", "caller_texts",
           "check_device", "check_reached", "check_writable", "config_dict", "mark_final_norm", "parse_config",
           "provenance", "read_result", "read_results", "result_paths", "run_main", "save_drawings", "save_figure",
           "settings_used", "unique", "write_result"]


# ----------------------------------------------------------------------------- results on disk


def _jsonable(x, nulls: list | None = None, where: str = ""):
    """JSON-ready copy of ``x``: floats rounded to 8 decimals (8 significant digits below 1e-3); a
    non-finite float becomes None (null) and its place is appended to ``nulls``."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v, nulls, f"{where}/{k}") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v, nulls, f"{where}/{i}") for i, v in enumerate(x)]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist(), nulls, where)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(x):
            if nulls is not None:
                nulls.append(where)
            return None
        x = float(x)
        # 8 decimals; below 1e-3 8 significant digits instead, so that a small p-value or variance
        # is never written as 0 (a rounding that would change what the number says)
        return round(x, 8) if abs(x) >= 1e-3 else float(f"{x:.8g}")
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _jsonable(dataclasses.asdict(x), nulls, where)
    if isinstance(x, Path):
        return str(x)
    return x


def result_name(model: str) -> str:
    """The name a model's results are filed under: a registry name (or a composite of names, like
    similarity's ``a__b__unit``) as it is; an ``hf:`` id, a folder or a ``?sentence=`` name (probes.checkpoints.names)
    as its spec's safe name, so no user string ever becomes a path below results/."""
    from probes.checkpoints.names import get_spec
    from probes.checkpoints.registry import SAFE_NAME, read_registry

    if model in read_registry() or (SAFE_NAME.fullmatch(model) and ".." not in model
                                    and not Path(model).expanduser().is_dir()):
        return model
    return get_spec(model).name


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
    FIRST_LAYER: ClassVar[int] = 0  # the first layer the result has numbers for (1: maps, which layers compute)
    IDENTITY_KEYS: ClassVar[dict] = {}
    SIDE_FILES: ClassVar[dict] = {}  # field -> file suffix: saved as JSON lines beside the result (write_result)

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

    # ------------------------------------------------------------------------- display
    # Each analysis's Result is declared ``@dataclass(repr=False)``, so that these, not a dataclass repr of
    # every number (tens of thousands of characters), show when a Result is the last line of a notebook cell.

    def headline(self) -> dict[str, str]:
        """A few numbers that say what the result found, as label -> formatted value (each analysis's own)."""
        return {}

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
    return {k: meta[k] for k in ("key", "n_texts", "n_tokens", "truncated_texts", "batch_size", "device", "dtype",
                                 "cache_dtype", "cache_dtype_fallback", "cache_verify", "nonfinite_states",
                                 "intervention")
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


def check_reached(acts, cfg) -> None:
    """ProbeError if ``cfg`` asked for a forward or cache dtype the activations were not made with: the
    option did not reach the extraction (the CLI runner checks this after loading the inputs)."""
    for f, k in (("dtype", "dtype"), ("cache_dtype", "cache_dtype_requested")):
        if hasattr(cfg, f) and k in acts.meta and getattr(cfg, f) != acts.meta[k]:
            raise ProbeError(f"--{f.replace('_', '-')} {getattr(cfg, f)} was asked for, but these activations "
                             f"were made with {acts.meta[k]}: the option did not reach the extraction")


def result_paths(out: str | os.PathLike, analysis: str, model: str) -> tuple[Path, Path]:
    folder, stem = Path(out) / "results" / analysis, result_name(model)
    return folder / f"{stem}.json", folder / f"{stem}.csv"  # not with_suffix: names may hold dots (v1.0)


def write_result(out: str | os.PathLike, analysis: str, model: str, result: Result | dict,
                 rows: list[dict]) -> tuple[Path, Path]:
    """Atomically write the result JSON (numbers + settings) and a flat CSV table (rank 0 only, under torchrun).
    A field the result's class lists in ``SIDE_FILES`` (field -> suffix) is written beside it as JSON lines,
    ``<model><suffix>``, one record a line, instead of into the JSON."""
    from probes.capture.distributed import is_main

    if not is_main():  # the other ranks of a torchrun help extract; one process writes each result
        raise RuntimeError(f"rank {os.environ.get('RANK')} of a torchrun tried to write a result; only rank 0 does")
    json_path, csv_path = result_paths(out, analysis, model)
    side = getattr(result, "SIDE_FILES", {})
    if isinstance(result, Result):
        result = result.to_json()
    result = dict(result)
    for key, suffix in side.items():
        records = result.pop(key, None)
        if records is not None:
            atomic_write(json_path.with_name(json_path.stem + suffix),
                         "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8"))
    nulls: list[str] = []
    doc = _jsonable({"analysis": analysis, "model_name": result_name(model), **result, "provenance": provenance()},
                    nulls)
    if nulls:  # strict JSON: no bare NaN; say where a number is missing and why
        doc["nulls"] = {"paths": nulls, "reason": "not a finite number (an empty mean or a degenerate ratio)"}
    atomic_write(json_path, (strict_json(doc) + "\n").encode())
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(_jsonable(rows))
    atomic_write(csv_path, buf.getvalue().encode())
    return json_path, csv_path


def read_results(out: str | os.PathLike, analysis: str, models: list[str] | None = None) -> list[AnalysisResult]:
    """The saved results of registered analysis ``analysis`` (all models, or the named ones in that order) as
    its Result objects: each file read strictly (:func:`read_result`); a file of another layout (written by
    another version of the suite) is one error line naming it. Reading every model's, a JSON file that is not a
    result of ``analysis`` at all (no ``"analysis"`` key naming it: a file of the user's) is left out with a
    warning."""
    from analyses import get

    cls = get(analysis).Result
    folder = Path(out) / "results" / analysis
    if models is None:
        paths = sorted(folder.glob("*.json"))
    else:
        paths = [result_paths(out, analysis, m)[0] for m in models]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise ProbeError(f"no saved result {missing[0]}: run python -m analyses.{analysis} first")
    results = []
    for p in dict.fromkeys(paths):
        doc = read_result(p)
        if models is None and doc.get("analysis") != analysis:  # a file of the user's beside the results
            warnings.warn(f"{p} is not a saved {analysis} result (it has no \"analysis\": \"{analysis}\"): left "
                          "out", stacklevel=2)
            continue
        try:
            results.append(cls.from_json(doc))
        except (KeyError, TypeError, AttributeError) as e:
            raise ProbeError(f"{p} does not have the layout this version reads (missing {e}); run python -m "
                             f"analyses.{analysis} again") from None
    return results


# a string that reads as a decimal number: a number stored as text ("0.1", "1e-3"; not "12", which may be a name)
_NUMBER_TEXT = re.compile(r"\s*[-+]?(\d+\.\d*|\.\d+|\d+(?=[eE]))([eE][-+]?\d+)?\s*|\s*[-+]?(nan|inf|infinity)\s*",
                          re.IGNORECASE)
# where text is text: names, versions, descriptions, the model and provenance records, the settings as given
_TEXT_KEYS = ("model_name", "name", "requested", "revision", "description", "model", "provenance", "settings",
              "corpus", "config", "identity", "texts", "tokens", "note", "notes", "caption", "label", "labels")


def _not_a_number(x: float | str) -> float:
    raise ValueError(f"the number {x} is not finite (result files hold null for it)")


def read_result(path: str | os.PathLike) -> dict:
    """One saved result JSON, read strictly: a JSON object, no bare NaN/Infinity nor a number beyond float
    range (the suite writes null and lists it under ``nulls``), no number stored as text; else one
    ProbeError line that names the file. Every reader of result files (figures, claims, report) uses it."""
    path = Path(path)
    try:
        doc = loads_json(path.read_text(encoding="utf-8"), parse_constant=_not_a_number,
                         parse_float=lambda t: float(t) if math.isfinite(float(t)) else _not_a_number(float(t)))
    except OSError as e:
        raise ProbeError(f"{path}: cannot read the result file ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise ProbeError(f"{path} is not a valid result file ({e}); run the analysis again") from None
    if not isinstance(doc, dict):
        raise ProbeError(f"{path} is not a valid result file (a JSON {type(doc).__name__}, not an object); "
                         f"run the analysis again")
    if (where := _number_as_text(doc)) is not None:
        raise ProbeError(f"{path} is not a valid result file ({where[0]} holds the text {where[1]!r} where a number "
                         f"belongs); run the analysis again")
    return doc


def _number_as_text(x, where: str = "") -> tuple[str, str] | None:
    """(path, text) of the first string that reads as a number outside _TEXT_KEYS, or None."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(x, dict):
        items = ((k, v) for k, v in x.items() if k not in _TEXT_KEYS)
    elif isinstance(x, list):
        items = enumerate(x)
    else:
        return (where or "/", x) if isinstance(x, str) and _NUMBER_TEXT.fullmatch(x) else None
    for k, v in items:
        if (found := _number_as_text(v, f"{where}/{k}")) is not None:
            return found
    return None


def save_figure(fig, out: str | os.PathLike, name: str) -> list[Path]:
    """Save ``fig`` as ``<out>/figures/<name>.png`` (200 dpi) and ``.pdf`` (fonts embedded as text)."""
    import matplotlib

    paths = []
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
        for ext, kw in (("png", {"dpi": 200}), ("pdf", {"metadata": {"CreationDate": None}})):
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, bbox_inches="tight", **kw)
            path = Path(out) / "figures" / f"{name}.{ext}"
            atomic_write(path, buf.getvalue())
            paths.append(path)
    return paths


def save_drawings(results: list, out: str | os.PathLike, drawings) -> list[Path]:
    """For each ``(name, draw)`` in ``drawings``: ``fig = draw(results)``, save it as
    ``<out>/figures/<name>.{png,pdf}`` and close it. Returns the paths."""
    import matplotlib.pyplot as plt

    paths = []
    for name, draw in drawings:
        fig = draw(results)
        paths += save_figure(fig, out, name)
        plt.close(fig)
    return paths


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
    return _jsonable({k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip})
