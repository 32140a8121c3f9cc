"""The options of each kind of input (its Config base, composed of exactly the probes.config groups its inputs
use, so that ``--help`` offers no flag that could only be refused), and how inputs the caller gave are named in a
result (:data:`CALLER_TEXTS`). :mod:`analyses.inputs` makes the inputs; both are re-exported there and in
:mod:`analyses.common`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from probes.config import (
    CaptureConfig,
    CorpusConfig,
    DeviceConfig,
    ModelsConfig,
    OutConfig,
    RunConfig,
    SampleConfig,
    SeedConfig,
    arg,
)
from probes.errors import ProbeError

CALLER_TEXTS = "texts given by the caller"  # how results name inputs the caller gave (not a suite corpus)

# ----------------------------------------------------------------------------- the Config bases


@dataclasses.dataclass
class SentenceConfig(SampleConfig, CaptureConfig, CorpusConfig, ModelsConfig):
    """A seeded sentence sample of a corpus, encoded by each model (states cached): models, corpus, run and
    capture settings, the sample's size and sentence lengths."""


@dataclasses.dataclass
class WindowConfig(CaptureConfig, CorpusConfig, ModelsConfig):
    """Windows of running text of a corpus, encoded by each model (states cached): models, corpus, run and
    capture settings (the windows' lengths and count are the analysis's own fields)."""


@dataclasses.dataclass
class LMConfig(RunConfig, CorpusConfig, ModelsConfig):
    """Causal LMs scoring a corpus's documents: models, corpus and run settings (an LM runs in float32 and
    caches nothing)."""


@dataclasses.dataclass
class LMPairConfig(RunConfig, CorpusConfig):
    """Two causal LMs, A and B, compared on a corpus: the pair, corpus and run settings."""

    model_a: str = arg("", "model A, a causal LM: a checkpoints.yaml name, a model folder or hf:org/name")
    model_b: str = arg("", "model B, a causal LM: a checkpoints.yaml name, a model folder or hf:org/name")


@dataclasses.dataclass
class TimedConfig(OutConfig, DeviceConfig, SeedConfig, ModelsConfig):
    """Models timed side by side on random token ids: models, seed, device and output root (no corpus, no cache)."""


# ----------------------------------------------------------------------------- the caller's texts


def caller_texts(texts) -> dict:
    """The corpus identity of inputs the caller gave (not a suite sample): their count and sha256
    (texts joined by newlines; token-id inputs as JSON)."""
    data = "\n".join(t if isinstance(t, str) else json.dumps([int(i) for i in t]) for t in texts)
    return {"source": CALLER_TEXTS, "n_texts": len(texts), "sha256": hashlib.sha256(data.encode("utf-8")).hexdigest()}


def caller_texts_list(texts, what: str = "texts") -> list[str]:
    """``texts`` as a list of strings, or one error line naming the argument."""
    if isinstance(texts, (str, os.PathLike)) or not all(isinstance(t, str) for t in texts):
        raise ProbeError(f"{what}= takes a list of strings (or a corpus name or path, as a string)")
    texts = list(texts)
    if not texts:
        raise ProbeError(f"{what}= is empty")
    return texts


def corpus_of(texts):
    """A corpus name or path given as ``texts=``, or None when ``texts`` is a list of the caller's texts."""
    return str(texts) if isinstance(texts, (str, os.PathLike)) else None
