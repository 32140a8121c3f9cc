"""Which module loads a checkpoint: a spec's ``family`` -> its loader and tokenizer loader.

The loaders are named as strings and imported when first used, so this layer (checkpoints) never imports the
model modules (probes.models) statically: ``probes.load("minilm-l6")`` imports only the hf loader.

    $ python -c "import probes; print(probes.load('tiny-bert').num_layers)"
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from probes.checkpoints.names import get_spec
from probes.checkpoints.registry import CheckpointSpec
from probes.config import DEVICE_MAPS
from probes.errors import CheckpointError

if TYPE_CHECKING:
    import torch

    from probes.models.encoder import Encoder, Tokenizer

# family -> ("module:load(spec, device, dtype) -> Encoder", "module:load_tokenizer(spec) -> Tokenizer")
LOADERS = {"hf": ("probes.models.hf:load_hf", "probes.models.hf:load_hf_tokenizer"),
           "slstm": ("probes.models.slstm_encoder:load_slstm", "probes.models.slstm_encoder:load_slstm_tokenizer"),
           # the Graph-Transformer
           "mog": ("probes.models.mog_encoder:load_mog", "probes.models.mog_encoder:load_mog_tokenizer"),
           # a BERT-style hf model + the MoG lens maps (Eq. 14 terms of its attention logits)
           "mog-lens": ("probes.models.mog_lens:load_lens", "probes.models.mog_lens:load_lens_tokenizer"),
           # recurrent GPT-2 as an Encoder: one window (no h_prev), i.e. its fine-tuned transformer
           "recurrent": ("probes.models.lm:load_recurrent_encoder", "probes.models.lm:load_recurrent_tokenizer")}


def _loader(name: str | CheckpointSpec, which: int):
    spec = name if isinstance(name, CheckpointSpec) else get_spec(name)
    if spec.family not in LOADERS:
        raise CheckpointError(f"model '{spec.name}': unknown family '{spec.family}' (known: {', '.join(LOADERS)})")
    module, fn = LOADERS[spec.family][which].split(":")
    return spec, getattr(importlib.import_module(module), fn)


def load(name: str | CheckpointSpec, device: str = "cpu", dtype: str | torch.dtype | None = None,
         device_map: str | None = None) -> Encoder:
    """Load the checkpoint registered as ``name`` in checkpoints.yaml onto ``device`` (cpu, cuda,
    cuda:N, mps, or auto: the best available), its forward pass in ``dtype`` (float32 | bfloat16 |
    float16; None = float32). ``device_map`` (``auto``, ``balanced``, ``sequential``, ``cpu``: needs
    the accelerate package) loads a Hugging Face checkpoint spread over every device instead, for
    models larger than one device; ``device`` is then not used."""
    from probes.checkpoints.identity import module_state, source_versions
    from probes.config import resolve_device
    from probes.precision import forward_dtype

    torch_dtype = forward_dtype(dtype)
    spec, fn = _loader(name, 0)
    files_before = source_versions(spec)
    if device_map is not None:
        check_device_map(spec, device_map)
        encoder = fn(spec, device="cpu", dtype=torch_dtype, device_map=device_map)
    else:
        encoder = fn(spec, device=resolve_device(device), dtype=torch_dtype)
    # what was loaded, as it is in memory: a later change (an ablation edits weights in place) is then seen by
    # probes.models.encoder.runtime_changes, and the cache, which keys on the files, is not used for it
    encoder.loaded_state = module_state(encoder.model)
    # the files it was loaded from, as they were before the load: a file replaced while it was read (a training job
    # saving into the folder) or afterwards makes them differ from the files' versions at extraction, and the
    # cache, whose key would hash the files then, is not used (runtime_changes)
    encoder.loaded_files = files_before if source_versions(spec) == files_before else ()
    return encoder


def load_tokenizer(name: str | CheckpointSpec) -> Tokenizer:
    """Only the tokenizer of ``name`` (fast: no weights are read)."""
    spec, fn = _loader(name, 1)
    return fn(spec)


def check_device_map(spec: CheckpointSpec, device_map: str) -> None:
    """One-line CheckpointError unless ``device_map`` can load ``spec``: a Hugging Face checkpoint
    (weights on disk: a random-init entry has none to place), one of DEVICE_MAPS, accelerate installed."""
    if device_map not in DEVICE_MAPS:
        raise CheckpointError(f"--device-map {device_map!r}: use one of {', '.join(DEVICE_MAPS)}")
    if spec.family != "hf" or spec.source_type == "random":
        what = f"family {spec.family}" if spec.family != "hf" else "random-init weights"
        raise CheckpointError(f"--device-map loads Hugging Face checkpoints from disk; model '{spec.name}' has "
                              f"{what}: use --device instead")
    try:
        import accelerate  # noqa: F401
    except ImportError:
        raise CheckpointError("--device-map needs the Python package accelerate: run `.venv/bin/pip install "
                              "'.[models]'` (or pip install accelerate)") from None
