"""What every analysis shares: the identity of a result made from activations, the config bases (the CLI helpers
come from probes.config), and, re-exported, the Result base and its identity (:mod:`analyses.result`) and the
result files of :mod:`analyses.files`.

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

import numpy as np

from analyses import pairs
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
from analyses.model_info import ModelInfo, ModelPair
from analyses.result import IDENTITY_FIELDS, AnalysisResult, Identity, Result
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
# analyses.inputs (with the kinds of input they belong to), the Result base and the identity in analyses.result,
# the result files in analyses.files; they are re-exported here so an analysis imports everything it needs from
# one module.
__all__ = ["IDENTITY_FIELDS", "AnalysisResult", "CALLER_TEXTS", "Identity", "LMConfig", "LMPairConfig", "Result",
           "SentenceConfig", "TimedConfig", "WindowConfig", "activations_identity", "arg", "as_floats", "atomic_write",
           "caller_texts", "check_device", "check_reached", "check_writable", "config_dict", "mark_final_norm",
           "pair_identity", "parse_config", "provenance", "read_result", "read_results", "result_name", "result_paths",
           "run_main", "save_drawings", "save_figure", "settings_used", "unique", "write_result"]


def as_floats(values: Iterable) -> np.ndarray:
    """``values`` as a float array, a null (None) as NaN."""
    return np.array([np.nan if v is None else v for v in values], float)


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
    return Identity(model_name=name, config=settings_used(cfg, meta, corpus, requested),
                    model=ModelInfo.from_json(meta["model"]), activations=activations_entry(meta), corpus=corpus,
                    model_requested=requested if requested != name else None)


def pair_identity(acts_a, acts_b, cfg, name: str | None = None) -> Identity:
    """The identity of a result computed from two models' Activations of the same texts: ``model`` and
    ``activations`` each ``{"a": A's, "b": B's}`` (what the report's model table and the claims read of a pair),
    the texts' corpus and the settings used; named ``"<A>__<B>"`` unless ``name`` is given."""
    a, b = activations_identity(acts_a, cfg), activations_identity(acts_b, cfg)
    pair = pairs.PairInfo(a.model_name, b.model_name)
    return Identity(model_name=name or pair.name(), config=settings_used(cfg, acts_a.meta, a.corpus, list(pair.names)),
                    model=ModelPair(a.info, b.info), activations={"a": a.activations, "b": b.activations},
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
    if result.model.final_norm_on_last_hidden:
        ax.plot([x[-1]], [y[-1]], ls="none", marker="s", ms=8, mfc="none", mew=1.0, color=color,
                label=f"{result.model_name}: last layer after the final norm")


def config_dict(cfg) -> dict:
    """The resolved config for a result file. ``out`` and ``figures`` are left out: where results are
    written, and whether they are drawn at once, do not change them, and equal runs must give
    byte-identical files wherever they are written."""
    skip = {"out", "figures"}
    return jsonable({k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip})
