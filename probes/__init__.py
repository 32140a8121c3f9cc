"""probes: a named checkpoint + texts -> Activations.

    >>> import probes
    >>> enc = probes.load("tiny-bert")   # an Encoder (probes.models.encoder); "minilm-l6", "bert-base", ...
    >>> acts = probes.extract("tiny-bert", ["A first sentence.", "And a second one."], cache_dir=None)
    >>> acts.n_texts, acts.n_layers      # Activations (cached on disk unless cache_dir=None)
    (2, 2)

Names come from checkpoints.yaml (see probes.checkpoints.registry), or name any Hugging Face model without an entry:
``hf:org/name[@revision]``, a model folder's path, and ``<name>?sentence=cls|mean|mean_all|last`` (see
probes.checkpoints.names).
Analyses only ever see Activations.
"""

from __future__ import annotations

from probes.capture.activations import Activations
from probes.capture.extract import extract
from probes.checkpoints.loaders import LOADERS, load, load_tokenizer
from probes.checkpoints.names import get_spec
from probes.checkpoints.registry import CheckpointSpec, read_registry
from probes.errors import CheckpointError, CorpusError, ProbeError
from probes.models.encoder import Encoder, Tokenizer

_LAZY_MODULES = ("corpus", "series")  # imported on first use: probes.corpus.sample_sentences(...) after `import probes`


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"probes.{name}")
    raise AttributeError(f"module 'probes' has no attribute {name!r}")


__all__ = ["Activations", "CheckpointError", "CheckpointSpec", "CorpusError", "Encoder", "ProbeError",
           "LOADERS", "Tokenizer", "extract", "get_spec", "load", "load_tokenizer", "read_registry"]
