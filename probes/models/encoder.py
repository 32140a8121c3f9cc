"""The interfaces every loader returns: a Tokenizer (text <-> ids) and an Encoder (ids -> states).

An :class:`Encoder` is deliberately small: it tokenizes and runs one padded batch. Everything
else (batching, slicing off padding, sentence vectors, caching) lives in ``probes.capture.activations``,
so every architecture is captured by the same code path.
"""

from __future__ import annotations

import contextlib
import numbers
from dataclasses import dataclass, field

import torch

from probes.checkpoints.identity import module_state, source_versions
from probes.checkpoints.pooling import pooling_words
from probes.checkpoints.registry import CheckpointSpec


@dataclass
class Tokenized:
    """One input after tokenization (special tokens added, no padding, no truncation)."""

    ids: list[int]  # (n,)
    special: list[bool]  # (n,) True for [CLS]/[SEP]/<s>/</s>-like tokens
    tokens: list[str]  # (n,) the token strings


class LayerStates(tuple):
    """The L+1 hidden states of one forward pass, one (B, n, d) tensor per layer as the model returned them, not
    copied into one tensor: the capture reads them layer by layer (``states[l]``, ``len``, iteration). Anything
    else a stacked (L+1, B, n, d) tensor has (``.shape``, ``[:, i]``, ``.clone()``, ...) stacks them, each time
    it is used."""

    def __getitem__(self, index):  # a layer, or what the stacked tensor gives
        if isinstance(index, numbers.Integral):
            return tuple.__getitem__(self, index)
        return self.stacked()[index]

    def stacked(self) -> torch.Tensor:
        """(L+1, B, n, d) a copy of every layer in one tensor."""
        return torch.stack(tuple(self))

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.stacked(), name)


@dataclass
class EncoderOutput:
    """What one forward pass over a padded batch returns (all on the model's device). The capture may change these
    tensors in place (it zeroes rows that a mean leaves out once their states are stored): an encoder returns
    tensors of its own forward pass, never ones it keeps."""

    # (L+1, B, n, d); hidden[0] = embedding output, hidden[l] = output of layer l: one stacked tensor, or a
    # LayerStates of one tensor per layer
    hidden: torch.Tensor | LayerStates
    attentions: torch.Tensor | None = None  # (L, B, H, n, n) softmaxed attention, when asked
    sentence: torch.Tensor | None = None  # (L+1, B, d) model-defined sentence vector (S-LSTM's g)
    maps: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (L, B, K, n) or (L, B, K, n, n)


@dataclass(frozen=True)
class MapSpec:
    """Shape of one per-text map an encoder returns besides attention: (layers, K, n[, n])."""

    layers: int  # first axis
    k: int  # second axis: heads, gates, ...
    token_axes: int  # 1: (layers, k, n); 2: (layers, k, n, n)
    description: str = ""
    components: tuple[str, ...] = ()  # names of the k entries of the second axis, when they have names


class Tokenizer:
    """Text <-> token ids for one checkpoint, without its weights."""

    spec: CheckpointSpec
    max_length: int  # longest input (special tokens included) the model accepts
    n_special: int  # special tokens added around one sequence (2 for BERT, 0 for GPT-2)
    pad_id: int = 0

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens."""
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def tokenize(self, texts: list[str]) -> list[Tokenized]:
        """Texts -> model inputs with the checkpoint's special tokens."""
        raise NotImplementedError

    def tokenize_ids(self, ids_list: list[list[int]]) -> list[Tokenized]:
        """Id sequences (no special tokens) -> model inputs with the checkpoint's special tokens."""
        raise NotImplementedError


class Encoder:
    """Base class: a named checkpoint ready to run. Subclasses set the attributes and implement
    :meth:`forward` (and :meth:`map_specs` if they return maps besides attention)."""

    spec: CheckpointSpec
    model: torch.nn.Module  # the torch model the forward pass runs
    tokenizer: Tokenizer
    fingerprint: dict  # identifies the weights (see CheckpointSpec.fingerprint)
    num_layers: int  # L
    hidden_size: int  # d
    num_heads: int = 1  # attention heads H (attention maps are (L, H, n, n))
    has_attention: bool = True  # False for recurrent encoders (the S-LSTM): no "attention" map is captured
    padding_safe: bool = True  # False: padding would leak into real tokens, so batches hold equal lengths only
    max_length: int  # longest input (in tokens, special tokens included) the model accepts
    pad_id: int = 0
    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32  # the dtype the forward pass runs in (states are cast to float32 after)
    device_map: str | None = None  # "auto" etc.: the model is spread over several devices (probes.load)
    # True when hidden[L] (the last layer's states) has been through a final normalisation that the
    # other layers' states have not (Hugging Face applies GPT-2's ln_f to the last hidden state only)
    final_norm_on_last_hidden: bool = False
    # module_state(model) when probes.load returned it; None for a caller's model object, whose key hashes its
    # weights on every call (probes.models.user)
    loaded_state: str | None = None
    # identity.source_versions(spec) when probes.load began reading its files; None for a model object
    loaded_files: tuple | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def tokenize(self, texts: list[str]) -> list[Tokenized]:
        return self.tokenizer.tokenize(texts)

    def tokenize_ids(self, ids_list: list[list[int]]) -> list[Tokenized]:
        return self.tokenizer.tokenize_ids(ids_list)

    def map_specs(self) -> dict[str, MapSpec]:
        """The maps besides attention that forward(..., maps=True) returns in ``maps``."""
        return {}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                maps: bool = False) -> EncoderOutput:
        """input_ids, attention_mask: (B, n), right-padded. Must not let padding change real tokens.
        With ``attentions``, also return attention maps and the maps named by :meth:`map_specs`."""
        raise NotImplementedError

    def describe(self) -> dict:
        """Model identity for result files."""
        return {
            "name": self.spec.name, "family": self.spec.family, "kind": self.spec.kind,
            "source": self.spec.source, "fingerprint": self.fingerprint, "num_layers": self.num_layers,
            "hidden_size": self.hidden_size, "max_length": self.max_length,
            "sentence_vector": self.spec.sentence, "sentence_pooling": pooling_words(self.spec),
            "special_tokens_added": self.spec.special_tokens,
            "final_norm_on_last_hidden": self.final_norm_on_last_hidden,
            **({"requested": self.spec.extra["requested"]} if "requested" in self.spec.extra else {}),
        }  # requested: the hf:/folder/?sentence= name the spec was synthesised from (probes.checkpoints.names)


def runtime_changes(model) -> str | None:
    """Why the states of ``model`` (an Encoder, a torch module or a name) may depend on something that no cache
    key sees, in words; None when nothing does. Checked: global module hooks
    (``torch.nn.modules.module.register_module_forward_hook`` / ``_pre_hook``); code replaced at run time
    (:func:`probes.models.patches.code_patch`: a method of a module class, a function of torch or of a model's
    modules; for a name, every module class defined so far); on the module that runs (an Encoder's ``model``) and
    each of its submodules, forward hooks and pre-hooks, parametrizations (``torch.nn.utils.parametrize``) and a
    ``forward`` replaced on the instance (accelerate's device-placement wrapper, ``_hf_hook``, moves tensors only
    and is not counted); and for an Encoder from ``probes.load``, whose key comes from its files, any change in
    memory since it was loaded (:func:`~probes.checkpoints.identity.module_state`: a weight edited in place, an
    attribute such as a LayerNorm's eps or an attention's ``scaling``, a swapped submodule or activation function,
    its config) and any change of its folder's files since (the cache would key on the new files). An ablation or
    a steering vector is usually one of these; the activation cache then extracts without being read or written.
    transformers' own output-capturing hooks (:data:`CAPTURING_HOOKS`: they record hidden states, never change
    them) do not count."""
    import torch.nn.modules.module as torch_module
    from torch.nn.utils import parametrize

    from probes.models.patches import code_patch

    for hooks, how in (("_global_forward_hooks", "register_module_forward_hook"),
                       ("_global_forward_pre_hooks", "register_module_forward_pre_hook")):
        if getattr(torch_module, hooks, None):
            return f"a global module hook is registered (torch.nn.modules.module.{how})"
    module = getattr(model, "model", model)
    if not isinstance(module, torch.nn.Module):  # a name: any library module class the model may use could be
        # patched (a script's or notebook's own classes, in __main__, are no part of a model named by a string)
        return code_patch([c for c in _module_classes() if c.__module__ != "__main__"])
    for name, sub in module.named_modules():
        where = f"{type(module).__name__}.{name}" if name else type(module).__name__
        if _changing(sub._forward_hooks) or _changing(sub._forward_pre_hooks):
            how = "register_forward_hook" if _changing(sub._forward_hooks) else "register_forward_pre_hook"
            return f"{where} has a forward hook ({how})"
        if parametrize.is_parametrized(sub):
            return f"{where} has a parametrization (torch.nn.utils.parametrize)"
        if (repo := vars(sub).get("_kernel_repo")) is not None:  # kernels' kernelize: downloaded code
            return (f"{where} runs a hub kernel ({hub_kernel_words(repo)}, put there by kernels' kernelize), whose "
                    "code no cache key covers")
        if "forward" in vars(sub) and not hasattr(sub, "_hf_hook"):
            return f"{where} has its forward replaced on the instance"
    if (patch := code_patch([type(sub) for sub in submodules(module)])) is not None:
        return patch
    loaded = getattr(model, "loaded_state", None)
    if loaded is not None and module_state(module) != loaded:
        return ("its weights, buffers, modules, attributes or config were changed in memory since probes.load (the "
                "cache keys on its files)")
    loaded_files = getattr(model, "loaded_files", None)
    if loaded_files is not None and source_versions(model.spec) != loaded_files:
        return "the files of its folder changed since probes.load read them (the cache would key on the new files)"
    return None


def hub_kernel_words(repo) -> str:
    """A hub kernel's repository in words (``kernels-community/activation@v1``), from whichever of the attributes
    kernels' repository classes have (``repo_id``, ``revision``, ``version``, ``layer_name``, a local path)."""
    found = {k: getattr(repo, k, getattr(repo, f"_{k}", None))
             for k in ("repo_id", "revision", "version", "layer_name", "repo_path")}
    name = found["repo_id"] or found["repo_path"] or type(repo).__name__
    at = found["revision"] or (f"version {found['version']}" if found["version"] is not None else "no pinned revision")
    return f"{name}@{at}" + (f", layer {found['layer_name']}" if found["layer_name"] else "")


def _module_classes() -> list[type]:
    """Every subclass of torch.nn.Module defined so far (about 450 with transformers' BERT loaded: under 1 ms)."""
    seen: dict[type, None] = {}
    todo = [torch.nn.Module]
    while todo:
        for sub in type.__subclasses__(todo.pop()):
            if sub not in seen:
                seen[sub] = None
                todo.append(sub)
    return list(seen)


# modules whose forward hooks only record outputs: transformers (>= 5) installs them on the layers at the first
# forward pass that asks for hidden states or attentions, and leaves them in place
CAPTURING_HOOKS = ("transformers.utils.output_capturing",)


@contextlib.contextmanager
def recording_after_changing_hooks(module):
    """Inside: transformers' output-capturing hooks (:data:`CAPTURING_HOOKS`) of every submodule of ``module`` run
    behind the module's other forward hooks, so that a layer's recorded hidden state is its output as the next
    layer reads it; on exit each module's hooks are back in their order (the caller's model is left as it came).
    transformers (>= 5) installs its hooks at the model's first forward pass that asks for hidden states; a hook
    registered after that (an ablation, a steering vector) would otherwise run after the recording and change what
    the next layer reads but not the state recorded for its layer. transformers 4.x, and a model whose own hooks
    came first, record the changed output: so does every model here. The order of the other hooks is kept."""
    moved: list[tuple[dict, list]] = []  # (a module's hooks, their order before)
    for sub in submodules(module) if isinstance(module, torch.nn.Module) else ():
        hooks = sub._forward_hooks
        capturing = [k for k, h in hooks.items() if _records_only(h)]
        if capturing and list(hooks)[-len(capturing):] != capturing:
            moved.append((hooks, list(hooks)))
            for hook_id in capturing:
                hooks[hook_id] = hooks.pop(hook_id)  # to the end (hooks run in insertion order)
    try:
        yield
    finally:
        for hooks, order in moved:  # the order before; a hook added inside goes after those, one removed is gone
            for hook_id in [k for k in order if k in hooks] + [k for k in hooks if k not in order]:
                hooks[hook_id] = hooks.pop(hook_id)


def _records_only(hook) -> bool:
    """Whether a forward hook is one of transformers' output-capturing hooks (:data:`CAPTURING_HOOKS`)."""
    return getattr(hook, "__module__", None) in CAPTURING_HOOKS


def _changing(hooks: dict) -> bool:
    """Whether any of a module's hooks may change what it computes (one not in CAPTURING_HOOKS)."""
    return not all(_records_only(h) for h in hooks.values())


def submodules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """``model`` and every module below it, each once (a module shared by two parents too), in no fixed order:
    walked with a list rather than ``Module.modules()``' nested generators, because it runs around every forward
    pass of an analysis (eval mode, hook order), where the generators cost 0.4 ms a batch for a hundred modules."""
    todo, seen, out = [model], set(), []
    while todo:
        m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append(m)
        todo.extend(c for c in m._modules.values() if c is not None)
    return out
