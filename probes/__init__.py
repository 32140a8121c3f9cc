"""probes: a named checkpoint + texts -> Activations.

    >>> import probes
    >>> enc = probes.load("minilm-l6")                 # an Encoder (see probes.encoder)
    >>> acts = probes.extract("minilm-l6", texts)      # Activations, cached on disk

Names come from checkpoints.yaml (see probes.registry). Analyses only ever see Activations.
"""

from __future__ import annotations

from probes.activations import Activations, extract
from probes.encoder import Encoder
from probes.errors import CheckpointError, CorpusError, ProbeError
from probes.registry import CheckpointSpec, get_spec, read_registry

LOADERS = {"hf": "probes.hf:load_hf"}  # family -> "module:function(spec, device) -> Encoder"


def load(name: str, device: str = "cpu") -> Encoder:
    """Load the checkpoint registered as ``name`` in checkpoints.yaml."""
    spec = get_spec(name)
    if spec.family not in LOADERS:
        raise CheckpointError(f"model '{name}': unknown family '{spec.family}' (known: {', '.join(LOADERS)})")
    import importlib

    module, fn = LOADERS[spec.family].split(":")
    return getattr(importlib.import_module(module), fn)(spec, device=device)


__all__ = ["Activations", "CheckpointError", "CheckpointSpec", "CorpusError", "Encoder", "ProbeError",
           "extract", "get_spec", "load", "read_registry"]
