"""The recurrence module of "Adding recurrence to pretrained transformers" (GPT-2, Llama, Gemma-3).

A pretrained causal LM runs on windows of T tokens. After window i, its hidden states are
pooled into one vector (Eq. 1) and passed through a small feed-forward net; the result h_prev
is inserted into window i+1 at layer l_ins as ONE extra key and value of self-attention, never
as a query. So with T = 300 that layer has 301 key/value inputs and 300 outputs. The first
window of a document has no h_prev and is exactly the plain model.

Conventions (all documented in :class:`RecurrenceConfig` and written into results):

* **Pooled states (Eq. 1).** z = (1/n) sum_i sum_{l=1..L} w_l h_i^(l), with w = softmax(alpha)
  over the L layer OUTPUTS (Hugging Face ``hidden_states[1..L]``; the embedding output
  ``hidden_states[0]`` is excluded, as in Eq. 1 where l runs from 1; the last one is after GPT-2's
  final layer norm, as Hugging Face returns it). Pooling over tokens is the mean (the paper's
  choice) over the window's positions that the next window does NOT repeat: the first T - o
  positions at overlap o, i.e. all T at o = 0 (exactly Eq. 1). The paper pools all T and re-trains
  per overlap; pooling the non-repeated positions is its footnote-3 remedy, so h_prev always
  summarises the text up to where the next window starts and one checkpoint serves every overlap.
* **Feed-forward net.** d -> 200 -> 200 -> 200 -> d (``ffn_hidden``), ReLU between layers,
  linear output: h_prev in R^d.
* **Insertion.** ``l_ins`` is 1-based like the paper's layers (layer l = the l-th transformer
  block, whose output is ``hidden_states[l]``); the default l_ins = 2 is Hugging Face block index 1
  (``model.transformer.h[1]`` for GPT-2, ``model.model.layers[1]`` for Llama and Gemma-3). h_prev is
  an extra INPUT of that block's self-attention: it goes through the block's pre-attention norm
  (``ln_1`` / ``input_layernorm``) and the attention's own projections (and, in Gemma-3, its q/k
  RMS norms), and every position of the window may attend to it (the mask gains a first column
  that is always allowed). Its own query is dropped before attention: queries are the T window
  positions, keys/values are [h_prev, the T positions]; the attention output keeps a placeholder
  row for the slot (zeros) so the module's reshape and output projection see n + 1 rows, and a
  forward hook drops that row, so the block still has T outputs.
* **Position of h_prev's key.** GPT-2 adds learned positions only at the input, so the slot has
  none. Rotary models (Llama, Gemma-3) have no position-free key: an unrotated key IS position 0,
  where the window's first token already sits. The slot's key is rotated as position
  ``slot_position`` = -1 (cos/sin from the model's own rotary embedding, per layer type for
  Gemma-3): h_prev summarises the text that ends right before the window, so it sits where the
  previous window's last token would (relative distance i + 1 from query i, distinct from every
  real token's). Windows always run at positions 0..n-1 (``forward`` passes no position ids).
* **Grouped-query attention.** h_prev becomes one key/value per key/value head (the ``k_proj`` /
  ``v_proj`` of the layer), shared by that head's group of query heads like every other key.
* **Sliding windows (Gemma-3).** If l_ins is a sliding-window layer, the slot column is still
  allowed for EVERY query, although a key at position -1 lies outside the window of queries
  i >= W - 1: the paper lets all positions attend to h_prev, and the slot is not a token.

Implementation: a forward pre-hook on the attention module of block l_ins prepends the slot to
its input (and the slot's cos/sin to ``position_embeddings``), and the model's attention function
(registered with transformers as ``probes_recurrent``; identical to ``eager`` everywhere else)
drops the slot's query and widens the mask. Nothing else of the model changes, so for another
architecture it is enough to add an entry to :data:`ADAPTERS`, provided its attention takes the
(normed) hidden states and projects them itself, and rotary position embeddings come in as
``position_embeddings=(cos, sin)`` from one rotary module (Mistral, Qwen2, Qwen3 and Phi-3 are built
like Llama but are untested here).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from probes.errors import CheckpointError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ATTN_NAME = "probes_recurrent"
# the version of the recurrence module's forward: in every cache key of family recurrent; bump it when a change
# alters any output (tests/test_forward_versions.py pins a seeded model's numbers to it)
FORWARD_VERSION = 1


@dataclass(frozen=True)
class Adapter:
    """Where a model family keeps what the recurrence touches."""

    blocks: str  # path of the list of transformer blocks
    attn: str  # attribute of a block: its self-attention module
    norm: str  # attribute of a block: the norm applied before self-attention
    rotary: str | None = None  # path of the rotary embedding module (None: no positions inside blocks)
    rotary_by_layer_type: bool = False  # the rotary module takes the attention's layer_type (Gemma-3)


ADAPTERS = {
    "gpt2": Adapter("transformer.h", "attn", "ln_1"),
    "llama": Adapter("model.layers", "self_attn", "input_layernorm", rotary="model.rotary_emb"),
    "gemma3_text": Adapter("model.layers", "self_attn", "input_layernorm", rotary="model.rotary_emb",
                           rotary_by_layer_type=True),
}


@dataclass
class RecurrenceConfig:
    """Settings of the recurrence module (saved as recurrence.json beside its weights)."""

    window: int  # T: tokens per window (training and default evaluation)
    overlap: int = 0  # o: overlap the module was trained with (windows start every T - o tokens)
    l_ins: int = 2  # 1-based layer whose self-attention gets h_prev as one extra key/value
    ffn_hidden: list = field(default_factory=lambda: [200, 200, 200])  # hidden sizes of the FFN
    activation: str = "relu"
    pooling: str = "mean over the non-repeated positions of the window (first T - o; all T at o = 0)"
    layers_pooled: str = "hidden_states[1..L] (the L layer outputs; embeddings excluded), softmax(alpha) weights"
    slot_position: int = -1  # rotary models: h_prev's key is rotated as this position (window = 0..n-1); GPT-2: none
    slot_mask: str = "every query may attend to h_prev, also in sliding-window layers"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RecurrenceConfig:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        cfg = cls(**known)
        cfg.ffn_hidden = list(cfg.ffn_hidden)
        return cfg


class RecurrenceModule(nn.Module):
    """Eq. 1 pooling with softmax-normalised layer weights + the feed-forward net -> h_prev (B, d)."""

    def __init__(self, num_layers: int, hidden_size: int, cfg: RecurrenceConfig):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(num_layers))  # w = softmax(alpha): uniform at init
        acts = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}
        if cfg.activation not in acts:
            raise CheckpointError(f"recurrence activation must be one of {', '.join(acts)}, not {cfg.activation!r}")
        dims = [hidden_size, *cfg.ffn_hidden, hidden_size]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(dims) - 2:
                layers.append(acts[cfg.activation]())
        self.ffn = nn.Sequential(*layers)

    def layer_weights(self) -> torch.Tensor:
        return torch.softmax(self.alpha, 0)

    def pool(self, hidden_states, pool_len: int | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """z (B, d): Eq. 1 over layer outputs hidden_states[1..L], mean over the first ``pool_len``
        positions (all if None) that ``mask`` (B, n) marks real."""
        H = torch.stack(tuple(hidden_states[1:]), 0)  # (L, B, n, d)
        n = H.shape[2] if pool_len is None else min(pool_len, H.shape[2])
        H = H[:, :, :n]
        mixed = torch.einsum("l,lbnd->bnd", self.layer_weights(), H)
        if mask is None:
            return mixed.mean(1)
        m = mask[:, :n].to(mixed.dtype).unsqueeze(-1)
        return (mixed * m).sum(1) / m.sum(1).clamp(min=1)

    def forward(self, hidden_states, pool_len: int | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.ffn(self.pool(hidden_states, pool_len, mask))


# ----------------------------------------------------------------------------- attention with one extra key/value


def _eager_for(module):
    """The eager attention function of the module's own modelling file, looked up at call time."""
    fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if fn is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    return fn


def _slot_causal_mask(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """(1, 1, n_q, n_k) additive mask: causal over the window, the first n_k - n_q columns (slot) open."""
    n_q, n_k = query.shape[2], key.shape[2]
    allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=query.device).tril(diagonal=n_k - n_q)
    blocked = torch.full((n_q, n_k), torch.finfo(query.dtype).min, dtype=query.dtype, device=query.device)
    return torch.where(allowed, torch.zeros_like(blocked), blocked)[None, None]


def _recurrent_attention(module, query, key, value, attention_mask, **kwargs):
    """``eager`` attention, except in the layer holding an h_prev slot: there the inputs are
    [slot, x_1..x_T], the slot's query row is dropped (T queries, T+1 keys/values), every query
    may attend to the slot, and the output gets a zero placeholder row for the slot (dropped by a
    forward hook after the output projection). query: (B, H, n, d_h); key/value: (B, H_kv, n, d_h);
    mask: (B, 1, n_q, n_k) or None; returns ((B, n, H, d_h), weights)."""
    slot = getattr(module, "_probes_slot", False)
    fast = getattr(module, "_probes_fast", False)
    if slot:
        query = query[:, :, 1:]
        if attention_mask is not None:
            first = torch.zeros_like(attention_mask[..., :1]) if attention_mask.dtype != torch.bool \
                else torch.ones_like(attention_mask[..., :1])
            attention_mask = torch.cat([first, attention_mask[..., -query.shape[2]:, :]], dim=-1)
        else:
            attention_mask = _slot_causal_mask(query, key)
    if fast:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        kwargs.pop("is_causal", None)
        out, weights = sdpa_attention_forward(module, query, key, value, attention_mask,
                                              is_causal=attention_mask is None, **kwargs)
    else:
        out, weights = _eager_for(module)(module, query, key, value, attention_mask, **kwargs)
    if slot:  # (B, n, H, d_h) -> (B, 1 + n, H, d_h): the module reshapes to its n + 1 input rows
        out = torch.cat([torch.zeros_like(out[:, :1]), out], dim=1)
    return out, weights


_REGISTERED = False


def _register() -> None:
    """Register ``probes_recurrent`` with transformers' attention and mask interfaces (once)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(ATTN_NAME, _recurrent_attention)
    AttentionMaskInterface.register(ATTN_NAME, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    _REGISTERED = True


@dataclass
class RecurrentOutput:
    logits: torch.Tensor  # (B, n, V)
    hidden_states: tuple  # L+1 tensors (B, n, d)
    h_next: torch.Tensor | None  # (B, d): h_prev for the next window (None unless asked)


class RecurrentLM(nn.Module):
    """A causal LM + :class:`RecurrenceModule`. ``forward(window, h_prev)`` runs one window."""

    def __init__(self, lm: PreTrainedModel, cfg: RecurrenceConfig, fast: bool = False):
        super().__init__()
        model_type = lm.config.model_type
        if model_type not in ADAPTERS:
            raise CheckpointError(f"the recurrence module supports model types {', '.join(ADAPTERS)}, "
                                  f"not {model_type!r} (add an entry to probes.models.recurrent.ADAPTERS)")
        L = lm.config.num_hidden_layers
        if not 1 <= cfg.l_ins <= L:
            raise CheckpointError(f"l_ins = {cfg.l_ins} is out of range for a model with {L} layers (1..{L})")
        if not 0 <= cfg.overlap < cfg.window:
            raise CheckpointError(f"recurrence overlap {cfg.overlap} must be in [0, window {cfg.window})")
        _register()
        self.lm, self.config = lm, cfg
        self.recurrence = RecurrenceModule(L, lm.config.hidden_size, cfg)
        lm.set_attn_implementation(ATTN_NAME)
        self.adapter = adapter = ADAPTERS[model_type]
        blocks = cast(nn.ModuleList, lm.get_submodule(adapter.blocks))  # every adapter's blocks are a ModuleList
        self.block = blocks[cfg.l_ins - 1]
        self.attn = getattr(self.block, adapter.attn)
        self.norm = getattr(self.block, adapter.norm)
        for b in blocks:
            getattr(b, adapter.attn)._probes_fast = fast
        self._h_prev: torch.Tensor | None = None
        self.attn.register_forward_pre_hook(self._insert, with_kwargs=True)
        self.attn.register_forward_hook(self._drop_slot)

    @classmethod
    def with_weights(cls, lm: PreTrainedModel, cfg: RecurrenceConfig, path: str | Path) -> RecurrentLM:
        from safetensors.torch import load_file

        model = cls(lm, cfg)
        state = {k: v.float() for k, v in load_file(str(path)).items()}
        missing, unexpected = model.recurrence.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise CheckpointError(f"{path}: recurrence weights do not match recurrence.json "
                                  f"(missing {missing}, unexpected {unexpected})")
        return model

    def save_recurrence(self, folder: str | Path) -> None:
        """recurrence.json + recurrence.safetensors (float32: the module is small)."""
        import json

        from safetensors.torch import save_file

        folder = Path(folder)
        save_file({k: v.detach().float().contiguous() for k, v in self.recurrence.state_dict().items()},
                  str(folder / "recurrence.safetensors"))
        (folder / "recurrence.json").write_text(json.dumps(self.config.to_dict(), indent=1) + "\n")

    def freeze_base(self, frozen: bool = True) -> None:
        """Train only the recurrence module (``frozen``) or the whole model."""
        for p in self.lm.parameters():
            p.requires_grad_(not frozen)

    def _slot_rotation(self, hidden: torch.Tensor, path: str) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (1, 1, d_h) of position ``slot_position`` from the model's own rotary embedding (at ``path``)."""
        rotary = self.lm.get_submodule(path)
        pos = torch.full((1, 1), self.config.slot_position, dtype=torch.long, device=hidden.device)
        if self.adapter.rotary_by_layer_type:
            return rotary(hidden, pos, self.attn.layer_type)
        return rotary(hidden, pos)

    def _insert(self, module, args, kwargs):
        module._probes_slot = False
        if self._h_prev is None:
            return None
        hidden = args[0] if args else kwargs["hidden_states"]
        slot = self.norm(self._h_prev.to(hidden.dtype)).unsqueeze(1)  # (B, 1, d): an input of this block
        hidden = torch.cat([slot, hidden], dim=1)  # (B, 1 + n, d)
        module._probes_slot = True
        if (rotary := self.adapter.rotary) is not None:
            if kwargs.get("position_embeddings") is None:
                raise CheckpointError(f"{type(module).__name__} got no position_embeddings keyword: "
                                      "probes.models.recurrent cannot place h_prev's key")
            cos, sin = kwargs["position_embeddings"]  # (B or 1, n, d_h) each
            slot_cos, slot_sin = (t.to(cos.dtype).expand(cos.shape[0], 1, -1)
                                  for t in self._slot_rotation(hidden, rotary))
            kwargs = {**kwargs, "position_embeddings": (torch.cat([slot_cos, cos], dim=1),
                                                        torch.cat([slot_sin, sin], dim=1))}
        if args:
            return (hidden, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": hidden}

    @staticmethod
    def _drop_slot(module, args, output):
        """The slot's placeholder output row goes: the block has as many outputs as tokens."""
        if not getattr(module, "_probes_slot", False):
            return None
        if isinstance(output, tuple):
            return (output[0][:, 1:], *output[1:])
        return output[:, 1:]

    def forward(self, input_ids: torch.Tensor, h_prev: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, pool_len: int | None = None,
                need_state: bool = True) -> RecurrentOutput:
        """One window. input_ids (B, n); h_prev (B, d) from the previous window or None (first
        window: exactly the plain model). Returns logits, hidden states and, with ``need_state``,
        h_next = FFN(pool(this window's states over its first ``pool_len`` positions))."""
        self._h_prev = h_prev
        try:
            out = self.lm(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                          use_cache=False, return_dict=True)
        finally:
            self._h_prev = None
            self.attn._probes_slot = False
        h_next = self.recurrence(out.hidden_states, pool_len, attention_mask) if need_state else None
        return RecurrentOutput(out.logits, out.hidden_states, h_next)
