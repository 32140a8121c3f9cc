"""A model object the caller loaded (a transformers encoder or causal LM and its tokenizer) as an Encoder or LM.

``probes.extract(model, texts, tokenizer=tok)`` and ``load_lm(model, tokenizer=tok)`` take such an
object besides a name. Nothing is loaded or copied: the object runs where it is (its device, its dtype).
What identifies it is recorded like a registry entry's fingerprint, so the activation cache still keys
on content, not on the Python object:

* ``object``: the model's class (``transformers.models.bert.modeling_bert.BertModel``);
* ``config_sha256``: sha256 of its config (``config.to_json_string``), ``model_type``;
* ``weights_sha256``: sha256 over its state dict (every tensor's name, dtype, shape and bytes, in name order);
* ``tokenizer_sha256``: sha256 of the tokenizer's vocabulary and special tokens.

Its name is the ``name=`` the caller gives (a safe path component: it names cache and result files),
else ``<model_type>-<weights_sha256[:8]>``. The sentence vector follows the rules for a folder
(:func:`probes.checkpoints.names.infer`: ``cls`` for an encoder, ``last`` for a causal LM) unless
``sentence=`` says otherwise.

    $ python -c "import probes, transformers as t; m = t.BertModel(t.BertConfig(hidden_size=32, num_hidden_layers=2,
    >   num_attention_heads=2, intermediate_size=64)); ..."
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import torch

from probes.checkpoints.registry import SAFE_NAME, SENTENCE_VECTORS, CheckpointSpec
from probes.errors import ProbeError

OBJECT = "object"  # the spec's source key: {"object": "<module>.<Class>"}


@dataclasses.dataclass(frozen=True)
class ObjectSpec(CheckpointSpec):
    """The spec of a model object: like a registry entry, but its fingerprint is computed from the
    object (class, config, weights, tokenizer) instead of read from files."""

    identity: dict = dataclasses.field(default_factory=dict, compare=False)

    @property
    def source_type(self) -> str:
        return OBJECT

    def local_path(self):
        return None

    def fingerprint(self) -> dict:
        return dict(self.identity)


def is_model_object(model) -> bool:
    """Whether ``model`` is a torch module with a transformers config (not a name, spec or Encoder)."""
    return isinstance(model, torch.nn.Module) and hasattr(model, "config")


def weights_sha256(model: torch.nn.Module) -> str:
    """sha256 over the state dict: each tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def tokenizer_sha256(tokenizer) -> str:
    vocab = sorted(tokenizer.get_vocab().items())
    special = sorted(map(str, getattr(tokenizer, "all_special_tokens", [])))
    blob = json.dumps({"class": type(tokenizer).__name__, "vocab": vocab, "special": special})
    return hashlib.sha256(blob.encode()).hexdigest()


def object_spec(model, tokenizer, name: str | None = None, sentence: str | None = None) -> ObjectSpec:
    """The spec (name, kind, sentence vector, identity) of a loaded transformers model and its tokenizer."""
    from probes.checkpoints.names import infer

    if tokenizer is None:
        raise ProbeError("a model object needs its tokenizer: probes.extract(model, texts, tokenizer=tok)")
    if not hasattr(tokenizer, "get_vocab") or not callable(tokenizer):
        raise ProbeError(f"tokenizer= takes a transformers tokenizer, not {type(tokenizer).__name__}")
    cfg = model.config
    cls = f"{type(model).__module__}.{type(model).__qualname__}"
    doc = {**cfg.to_dict(), "architectures": [type(model).__name__]}
    doc.pop("auto_map", None)  # the caller built the object: its code already ran, nothing is imported here
    shown = name or f"{cfg.model_type or 'model'}-object"
    kind, default_sentence = infer(shown, doc, sentence_transformers=False)
    sentence = sentence or default_sentence
    if sentence not in SENTENCE_VECTORS:
        raise ProbeError(f"sentence= must be one of {SENTENCE_VECTORS}, not {sentence!r}")
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    if not any(t not in special for t in tokenizer.get_vocab()):
        raise ProbeError(f"the tokenizer given for {shown} holds only its {len(special)} special tokens: every "
                         "word would be [UNK]")
    identity = {"object": cls, "model_type": cfg.model_type,
                "config_sha256": hashlib.sha256(cfg.to_json_string(use_diff=False).encode()).hexdigest(),
                "weights_sha256": weights_sha256(model), "tokenizer_sha256": tokenizer_sha256(tokenizer)}
    if name is None:
        name = f"{cfg.model_type or 'model'}-{identity['weights_sha256'][:8]}"
    if not SAFE_NAME.fullmatch(name) or ".." in name:
        raise ProbeError(f"name {name!r} is not allowed: it names cache and result files, so use letters, digits, "
                         "'.', '_' and '-' only")
    return ObjectSpec(name=name, family="hf", kind=kind, source={OBJECT: cls}, sentence=sentence,
                      description=f"a {type(model).__name__} object given by the caller", identity=identity)


def base_model(model):
    """The transformer under a head (``GPT2LMHeadModel.transformer``); the model itself when it has none."""
    return getattr(model, "base_model", model)


def wrap_encoder(model, tokenizer, name: str | None = None, sentence: str | None = None):
    """A loaded transformers model (encoder or causal LM) and its tokenizer as an
    :class:`~probes.models.hf.HFEncoder` (states of the base model, every layer)."""
    from probes.models.hf import HFEncoder

    spec = object_spec(model, tokenizer, name, sentence)
    return HFEncoder(spec, base_model(model), tokenizer, spec.fingerprint())  # eval mode: dropout off

