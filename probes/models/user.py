"""A model object the caller loaded (a transformers encoder or causal LM and its tokenizer) as an Encoder or LM.

``probes.extract(model, texts, tokenizer=tok)`` and ``load_lm(model, tokenizer=tok)`` take such an
object besides a name. Nothing is loaded or copied: the object runs where it is (its device, its dtype).
What identifies it is recorded like a registry entry's fingerprint, so the activation cache keys on what the
captured states depend on, not on the Python object:

* ``object``: the model's class (``transformers.models.bert.modeling_bert.BertModel``), ``model_type``;
* ``config_sha256``: sha256 of its config (``config.to_dict()``) without the fields that say where it was
  loaded from or by which version (``_name_or_path``, ``transformers_version``), plus its attention
  implementation (``eager``, ``sdpa``, ...);
* ``weights_sha256``: sha256 over the tensors the forward pass that is captured reads: every parameter and
  buffer (persistent or not) of the base model (the module whose hidden states are captured: ``model.bert``
  under ``BertForMaskedLM``, the model itself for ``BertModel``), each with its name, dtype, shape and bytes, in
  name order. Left out: a head above the base model (never run) and the base model's pooler (:data:`NOT_STATES`:
  ``BertModel.pooler``, which hidden states never pass through). ``AutoModel.from_pretrained`` on a masked-LM
  checkpoint initialises that pooler at random on every load, so hashing it would give the same model a new key
  in every process;
* ``structure_sha256``: sha256 of the base model's printed structure and its module classes' forward functions
  (:func:`probes.checkpoints.identity.module_structure`): an attribute that no weight shows (a LayerNorm's eps set
  after loading, an activation module swapped for another) changes the key;
* ``tokenizer_sha256``: sha256 of the tokenizer's full serialisation: for a fast tokenizer
  ``backend_tokenizer.to_str()`` (normaliser, pre-tokenizer, model and vocabulary, post-processor, decoder,
  added tokens; without its transient truncation and padding state), for any tokenizer its class, special
  tokens, added tokens, ``model_max_length`` and the other init settings that are not file locations, its
  vocabulary (``get_vocab()``) unless that is the fast tokenizer's own (already in the serialisation), and a
  SentencePiece model's bytes where it has one;
* ``code``: the version of the suite's own capture code for the model_type (ConvBERT's kernel maps).

A model whose forward can change without any of these changing is never served from the cache: forward hooks
or pre-hooks on the base model or a submodule, global module hooks, parametrizations, a replaced ``forward``
(:func:`probes.models.encoder.runtime_changes`). Its states are extracted without the cache, with one warning.

Its name is the ``name=`` the caller gives (a safe path component: it names cache and result files),
else ``<model_type>-<weights_sha256[:8]>``. The sentence vector follows the rules for a folder
(:func:`probes.checkpoints.names.infer`: ``cls`` for an encoder, ``last`` for a causal LM) unless
``sentence=`` says otherwise. The object is left in the train/eval mode it came in (the forward runs in eval
mode, and the flags are restored after each batch).

    $ python -c "import probes, transformers as t; m = t.BertModel(t.BertConfig(hidden_size=32, num_hidden_layers=2,
    >   num_attention_heads=2, intermediate_size=64)); ..."
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import torch

from probes.checkpoints.folder import check_vocab, fast_vocabulary, only_special_tokens
from probes.checkpoints.identity import code_versions, config_digest, hash_tensors, module_structure
from probes.checkpoints.registry import SENTENCE_VECTORS, CheckpointSpec, name_problem
from probes.errors import CheckpointError, ProbeError

OBJECT = "object"  # the spec's source key: {"object": "<module>.<Class>"}
NOT_STATES = ("pooler.",)  # base-model parameters that hidden states never pass through
# init settings of a tokenizer that name files or loading options, not how it tokenizes
TOKENIZER_PLACE = ("name_or_path", "is_local", "local_files_only", "cache_dir", "revision", "token",
                   "trust_remote_code", "_commit_hash", "use_auth_token", "force_download", "proxies", "subfolder",
                   "added_tokens_decoder")  # added tokens are hashed on their own, in id order


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


def weights_sha256(model: torch.nn.Module, skip: tuple[str, ...] = ()) -> str:
    """sha256 over every parameter and buffer of ``model`` (non-persistent buffers too: the forward reads them)
    whose name does not start with one of ``skip``: each tensor's name, dtype, shape and bytes, in name order."""
    tensors: dict[str, torch.Tensor] = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    h = hashlib.sha256()
    hash_tensors(h, [(name, t) for name, t in sorted(tensors.items()) if not name.startswith(skip)])
    return h.hexdigest()


def config_sha256(model: torch.nn.Module) -> str:
    """sha256 of the config (without where it came from) and the attention implementation."""
    return config_digest(model.config)


def _plain(value):
    """A JSON-able, order-free form of a tokenizer setting (AddedToken -> its repr: content and flags)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _serialisation(backend) -> str:
    """A fast tokenizer's ``to_str()`` without its truncation and padding, which transformers sets and resets on
    every call (state, not part of the tokenizer): the string itself where both are off, else that of a copy with
    both off (the caller's tokenizer is never touched). tokenizers writes its vocabularies, merges and maps in id
    or key order, so equal tokenizers give equal strings, in every process."""
    text = backend.to_str()
    if getattr(backend, "truncation", None) is None and getattr(backend, "padding", None) is None:
        return text
    if not hasattr(type(backend), "from_str"):  # not tokenizers' own: the two settings dropped from its JSON
        serial = json.loads(text)
        serial.pop("truncation", None)
        serial.pop("padding", None)
        return json.dumps(serial, sort_keys=True)
    bare = type(backend).from_str(text)
    bare.no_truncation()
    bare.no_padding()
    return bare.to_str()


def tokenizer_sha256(tokenizer) -> str:
    """sha256 of everything that decides how the tokenizer turns text into ids (see the module docstring). A fast
    tokenizer's vocabulary and added tokens are in its backend's serialisation (for 30,000 tokens: 3 ms to write
    and hash, 25 ms where truncation or padding is on and a copy is written); any other tokenizer's vocabulary is
    hashed from ``get_vocab()``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    doc = {"class": type(tokenizer).__name__,
           "special": sorted(map(str, getattr(tokenizer, "all_special_tokens", []))),
           "special_map": _plain(getattr(tokenizer, "special_tokens_map", {})),
           "added": _plain(getattr(tokenizer, "added_tokens_decoder", {})),
           "max_length": getattr(tokenizer, "model_max_length", None),
           "init": _plain({k: v for k, v in getattr(tokenizer, "init_kwargs", {}).items()
                           if k not in TOKENIZER_PLACE and not k.endswith(("_file", "_path"))})}
    serialised = backend is not None and hasattr(backend, "to_str")
    if serialised:
        doc["backend_sha256"] = hashlib.sha256(_serialisation(backend).encode()).hexdigest()
    if not (serialised and fast_vocabulary(tokenizer)):
        doc["vocab"] = sorted(tokenizer.get_vocab().items())
    sp = getattr(tokenizer, "sp_model", None)
    if sp is not None and hasattr(sp, "serialized_model_proto"):
        doc["sentencepiece"] = hashlib.sha256(sp.serialized_model_proto()).hexdigest()
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()


def object_spec(model, tokenizer, name: str | None = None, sentence: str | None = None) -> ObjectSpec:
    """The spec (name, kind, sentence vector, identity) of a loaded transformers model and its tokenizer."""
    from probes.checkpoints.names import infer

    if tokenizer is None:
        raise ProbeError("a model object needs its tokenizer: probes.extract(model, texts, tokenizer=tok)")
    if not hasattr(tokenizer, "get_vocab") or not callable(tokenizer):
        raise ProbeError(f"tokenizer= takes a transformers tokenizer, not {type(tokenizer).__name__}")
    if name is not None and (problem := name_problem(str(name))) is not None:
        raise ProbeError(f"name=: {problem}")
    cfg = model.config
    cls = f"{type(model).__module__}.{type(model).__qualname__}"
    doc = {**cfg.to_dict(), "architectures": [type(model).__name__]}
    doc.pop("auto_map", None)  # the caller built the object: its code already ran, nothing is imported here
    shown = name or f"{cfg.model_type or 'model'}-object"
    kind, default_sentence = infer(shown, doc, sentence_transformers=False)
    sentence = sentence or default_sentence
    allowed = [v for v in SENTENCE_VECTORS if v != "g"]  # g is the S-LSTM's own node, no transformers model has it
    if sentence not in allowed:
        raise ProbeError(f"sentence= must be one of {', '.join(allowed)}, not {sentence!r}")
    if only_special_tokens(tokenizer):
        special = set(getattr(tokenizer, "all_special_tokens", ()))
        raise ProbeError(f"the tokenizer given for {shown} holds only its {len(special)} special tokens: every "
                         "word would be [UNK]")
    try:
        check_vocab(shown, tokenizer, model)
    except CheckpointError as e:
        raise ProbeError(str(e)) from None
    identity = {"object": cls, "model_type": cfg.model_type, "config_sha256": config_sha256(model),
                "structure_sha256": hashlib.sha256(module_structure(base_model(model)).encode()).hexdigest(),
                "weights_sha256": weights_sha256(base_model(model), skip=NOT_STATES),
                "tokenizer_sha256": tokenizer_sha256(tokenizer)}
    if code := code_versions("hf", cfg.model_type):
        identity["code"] = code
    if name is None:
        name = f"{cfg.model_type or 'model'}-{identity['weights_sha256'][:8]}"
        if name_problem(name) is not None:
            name = f"model-{identity['weights_sha256'][:8]}"
    return ObjectSpec(name=name, family="hf", kind=kind, source={OBJECT: cls}, sentence=sentence,
                      description=f"a {type(model).__name__} object given by the caller", identity=identity)


def base_model(model):
    """The transformer under a head (``GPT2LMHeadModel.transformer``); the model itself when it has none."""
    return getattr(model, "base_model", model)


def wrap_encoder(model, tokenizer, name: str | None = None, sentence: str | None = None):
    """A loaded transformers model (encoder or causal LM) and its tokenizer as an
    :class:`~probes.models.hf.HFEncoder` (states of the base model, every layer). The object is not put in
    eval mode here: each forward pass is, and the caller's train/eval flags are restored after it."""
    from probes.models.hf import HFEncoder

    spec = object_spec(model, tokenizer, name, sentence)
    return HFEncoder(spec, base_model(model), tokenizer, spec.fingerprint(), own=False)
