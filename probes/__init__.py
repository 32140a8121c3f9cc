"""probes: a named checkpoint + texts -> Activations.

    >>> import probes
    >>> enc = probes.load("minilm-l6")                 # an Encoder (see probes.encoder)
    >>> acts = probes.extract("minilm-l6", texts)      # Activations, cached on disk

Names come from checkpoints.yaml (see probes.registry), or name any Hugging Face model without an entry:
``hf:org/name[@revision]``, a model folder's path, and ``<name>?sentence=cls|mean|last`` (see probes.names).
Analyses only ever see Activations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from probes.activations import Activations, extract
from probes.encoder import Encoder, Tokenizer
from probes.errors import CheckpointError, CorpusError, ProbeError
from probes.registry import CheckpointSpec, get_spec, read_registry

if TYPE_CHECKING:
    import torch

# family -> ("module:load(spec, device, dtype) -> Encoder", "module:load_tokenizer(spec) -> Tokenizer")
LOADERS = {"hf": ("probes.hf:load_hf", "probes.hf:load_hf_tokenizer"),
           "slstm": ("probes.slstm_encoder:load_slstm", "probes.slstm_encoder:load_slstm_tokenizer"),
           "mog": ("probes.mog_encoder:load_mog", "probes.mog_encoder:load_mog_tokenizer"),  # Graph-Transformer
           # a BERT-style hf model + the MoG lens maps (Eq. 14 terms of its attention logits)
           "mog-lens": ("probes.mog_lens:load_lens", "probes.mog_lens:load_lens_tokenizer"),
           # recurrent GPT-2 as an Encoder: one window (no h_prev), i.e. its fine-tuned transformer
           "recurrent": ("probes.lm:load_recurrent_encoder", "probes.lm:load_recurrent_tokenizer")}


def _loader(name: str, which: int):
    import importlib

    spec = get_spec(name)
    if spec.family not in LOADERS:
        raise CheckpointError(f"model '{name}': unknown family '{spec.family}' (known: {', '.join(LOADERS)})")
    module, fn = LOADERS[spec.family][which].split(":")
    return spec, getattr(importlib.import_module(module), fn)


def load(name: str, device: str = "cpu", dtype: str | torch.dtype | None = None,
         device_map: str | None = None) -> Encoder:
    """Load the checkpoint registered as ``name`` in checkpoints.yaml onto ``device`` (cpu, cuda,
    cuda:N, mps, or auto: the best available), its forward pass in ``dtype`` (float32 | bfloat16 |
    float16; None = float32). ``device_map`` (``auto``, ``balanced``, ``sequential``, ``cpu``: needs
    the accelerate package) loads a Hugging Face checkpoint spread over every device instead, for
    models larger than one device; ``device`` is then not used."""
    from probes.cli import resolve_device
    from probes.precision import forward_dtype

    torch_dtype = forward_dtype(dtype)
    spec, fn = _loader(name, 0)
    if device_map is not None:
        from probes.hf import check_device_map

        check_device_map(spec, device_map)
        return fn(spec, device="cpu", dtype=torch_dtype, device_map=device_map)
    return fn(spec, device=resolve_device(device), dtype=torch_dtype)


def load_tokenizer(name: str) -> Tokenizer:
    """Only the tokenizer of ``name`` (fast: no weights are read)."""
    spec, fn = _loader(name, 1)
    return fn(spec)


__all__ = ["Activations", "CheckpointError", "CheckpointSpec", "CorpusError", "Encoder", "ProbeError",
           "Tokenizer", "extract", "get_spec", "load", "load_tokenizer", "read_registry"]
