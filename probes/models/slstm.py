"""The S-LSTM graph recurrent encoder (Wang et al., "Pre-Training a Graph Recurrent Network for
Language Representation", §3, Eq. 1-4), as the authors' fairseq implementation computes it.

A sentence is a graph of token nodes h_1..h_n plus one sentence node g (Eq. 1). Every recurrent
step t = 1..L updates all token nodes in parallel from their left/right neighbours, themselves,
the input x_i and the previous sentence node (Eq. 3), then the sentence node from all token
nodes (Eq. 4). ONE block of parameters is shared by all L steps (§4, "Parameter Sharing"): the
parameter count does not depend on L, and the cost is O(n) per step.

Reference implementation: github.com/ylwangy/slstm_pytorch, ``models/slstm/model.py``
(``SlstmEncoder`` + ``SLSTM_block``), with the settings of the released models
(``slstm1792_ln_posinput``, ``slstm1280_ln_posinput_layer24``: ``ln=True``, ``pos_input=True``,
``pos_h2g=pos_g2h=False``, ``slstm_kernel_size=1``, ``--dropout 0.0``). Where it differs from the
paper's equations we follow the implementation:

1. Input (Eq. 2): x_i = LayerNorm(E(w_i) + P(i)); the paper writes E + P (it mentions the added
   LayerNorms in the text). Positions are learned, 0-based here (fairseq offsets them by
   padding_idx + 1; ``probes.models.slstm_import`` slices that offset off).
2. Initial states (the paper leaves them open): h^0 = c^0 = x; g^0 = c_g^0 = mean of x over the
   real tokens.
3. Token node (Eq. 3), per gate k in {i, l, r, f, s, o, u}:
   pre_k = W_k [h_i ; h_{i-1} ; h_{i+1} ; g^{t-1}] + b_k + U_k x_i  (one fused Linear(4d, 7d) with
   the implementation's input order [self, left, right, sentence] and gate order i l r f s o u;
   U has no bias), then LayerNorm per gate (own weight and bias), sigmoid (tanh for u). The five
   cell gates i, l, r, f, s -- all already squashed by the sigmoid -- are softmax-normalised
   against each other per hidden unit (so each weight lies in [1/(1+4e), e/(e+4)] = [0.084, 0.405]:
   no source can be switched off completely). c_i = l*c_{i-1} + f*c_i + r*c_{i+1} + s*c_g + i*u,
   h_i = o * tanh(c_i).
4. Sentence node (Eq. 4): the paper feeds it the *previous* token states h^{t-1}, c^{t-1}; the
   implementation updates it *after* the token nodes, from their *new* states h^t, c^t (the
   average h-bar, the per-token gates and the cells it sums). Per-token gate
   f_i = sigmoid(LN(W [h_i^t ; g^{t-1}] + b)); f_g, o = LN(sigmoid(W [g^{t-1} ; h-bar^t] + b)) --
   for these two the implementation applies the LayerNorm *after* the sigmoid (so o is not
   confined to (0, 1)). f_1..f_n, f_g are softmax-normalised over tokens + g per hidden unit;
   c_g = f_g * c_g^{t-1} + sum_i f_i * c_i^t, g = o * tanh(c_g).
5. Window: immediate neighbours (``slstm_kernel_size=1``, the default and the released setting);
   ``window=w`` sums the neighbours within w on each side, as the implementation does.
6. Padding: right padding is masked everywhere: pads are zero in x, h and c after every step, so
   the left/right neighbour of the first/last real token is zero (the boundary); pads are excluded
   from g's mean and from g's softmax over tokens. Padding never changes a real token's state.
7. Initialisation: fairseq's ``init_bert_params`` (applied after the block's own Xavier init, so
   it wins): every Linear and Embedding ~ N(0, 0.02), biases 0, LayerNorms 1/0.
8. Dropout: where the implementation applies it (embedding output, h after each step, g); the
   released models use 0.0, our default.
9. MLM head (Eq. 5): the RoBERTa head of the implementation, dense -> GELU -> LayerNorm ->
   tied token embeddings E + bias.

Mathematically identical reorganisations for speed (checked against an independent loop-based
computation and against a transcription of the authors' forward): the sentence node's share of
the fused token-gate matmul, W_g g + b, is computed once per text and broadcast instead of once per
token (likewise for the per-token sentence gate), and the seven per-gate LayerNorms run as one
group norm with seven groups.

    >>> cfg = SLSTMConfig(vocab_size=100, hidden_size=32, num_layers=2)
    >>> out = SLSTM(cfg)(torch.tensor([[5, 6, 7]]), output_gates=True)
    >>> out.hidden.shape, out.sentence.shape, out.gates.shape   # (L+1, B, n, d), (L+1, B, d), (L, B, 5, n)
    (torch.Size([3, 1, 3, 32]), torch.Size([3, 1, 32]), torch.Size([2, 1, 5, 3]))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from probes.io import JsonConfig, loads_json

GATES = ("input", "left", "right", "self", "sentence")  # the five softmaxed cell gates, in this order
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
MODEL_TYPE = "slstm"
# the version of the S-LSTM's states (this forward and SLSTMEncoder's): in every cache key of family slstm;
# bump it when a change alters any output (tests/test_forward_versions.py pins a seeded model's numbers to it)
FORWARD_VERSION = 1


@dataclass
class SLSTMConfig(JsonConfig):
    """Architecture of one S-LSTM (everything needed to rebuild it)."""

    vocab_size: int
    hidden_size: int = 256  # d
    num_layers: int = 4  # recurrent steps L (parameters shared across steps)
    max_positions: int = 512  # learned position embeddings
    window: int = 1  # neighbours on each side (the implementation's slstm_kernel_size)
    dropout: float = 0.0
    pad_id: int = 0
    layer_norm_eps: float = 1e-5
    gate_layer_norm: bool = True  # LayerNorm on every gate (the implementation's ``ln``)
    initializer_range: float = 0.02


@dataclass
class SLSTMOutput:
    """What :meth:`SLSTM.forward` returns (padding positions are zero in hidden)."""

    hidden: torch.Tensor  # (L+1, B, n, d) token states per step (0 = x); (1, B, n, d) with all_steps=False
    sentence: torch.Tensor  # (L+1, B, d) sentence node g per step (0 = mean of x); (1, B, d) likewise
    gates: torch.Tensor | None = None  # (L, B, 5, n) softmaxed cell gates (GATES order), mean over units
    gates_dominant: torch.Tensor | None = None  # (L, B, 5, n) share of units where each gate weighs most
    sentence_weights: torch.Tensor | None = None  # (L, B, n) g's softmax weight of each token, mean over units
    sentence_self_weight: torch.Tensor | None = None  # (L, B) g's weight of its own previous cell, mean over units


@dataclass
class StepState:
    """The recurrent state between steps."""

    h: torch.Tensor  # (B, n, d)
    c: torch.Tensor  # (B, n, d)
    g: torch.Tensor  # (B, d)
    gc: torch.Tensor  # (B, d)


@dataclass
class StepGates:
    """Full gate values of one step (per hidden unit)."""

    token: torch.Tensor  # (B, n, 5, d) softmaxed i, l, r, f, s
    output: torch.Tensor  # (B, n, d) o
    sentence_tokens: torch.Tensor  # (B, n, d) g's softmax weights over tokens (0 at pads)
    sentence_self: torch.Tensor  # (B, d) g's softmax weight of its own previous cell
    sentence_output: torch.Tensor  # (B, d) g's output gate


def _shift(x: torch.Tensor, k: int) -> torch.Tensor:
    """(B, n, D) -> out[:, i] = x[:, i - k] (zero where i - k is outside 0..n-1); k may be negative."""
    n = x.shape[1]
    if abs(k) >= n:
        return torch.zeros_like(x)
    if k > 0:
        return F.pad(x[:, :n - k], (0, 0, k, 0))
    return F.pad(x[:, -k:], (0, 0, 0, -k))


class GateNorm(nn.Module):
    """The affine parameters (K, d) of K LayerNorms, one per gate (each normalises that gate's d units)."""

    def __init__(self, k: int, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(k, d))
        self.bias = nn.Parameter(torch.zeros(k, d))
        self.eps = eps


class SLSTMBlock(nn.Module):
    """One S-LSTM step (token nodes, then the sentence node); the same block runs all L steps."""

    def __init__(self, cfg: SLSTMConfig):
        super().__init__()
        d, self.d, self.window = cfg.hidden_size, cfg.hidden_size, cfg.window
        # token gates: W_k [h_i; h_left; h_right; g] + b_k  and  U_k x_i  (k = i l r f s o u)
        self.token_w = nn.Linear(4 * d, 7 * d, bias=True)
        self.token_u = nn.Linear(d, 7 * d, bias=False)
        # sentence node: [f_g; o] from [g; h-bar], per-token f_i from [h_i; g]
        self.sent_fo = nn.Linear(2 * d, 2 * d, bias=True)
        self.sent_f = nn.Linear(2 * d, d, bias=True)
        self.gate_layer_norm = cfg.gate_layer_norm
        self.token_norm = GateNorm(7, d, cfg.layer_norm_eps)  # i l r f s o u
        self.sent_norm = GateNorm(3, d, cfg.layer_norm_eps)  # f_g, o (after the sigmoid), per-token f_i
        self.dropout = nn.Dropout(cfg.dropout)

    def _norm(self, norm: GateNorm, x: torch.Tensor, idx: slice | int) -> torch.Tensor:
        if not self.gate_layer_norm:
            return x
        w, b = norm.weight[idx], norm.bias[idx]
        return F.layer_norm(x, x.shape[-1:], eps=norm.eps) * w + b

    def forward(self, state: StepState, ux: torch.Tensor, m: torch.Tensor, lengths: torch.Tensor,
                need_gates: bool = False) -> tuple[StepState, StepGates | None]:
        """One step. ux: (B, n, 7d) = U x (precomputed); m: (B, n, 1) float mask; lengths (B, 1)."""
        d, B, n = self.d, state.h.shape[0], state.h.shape[1]
        h, c, g, gc = state.h, state.c, state.g, state.gc
        h_left, h_right = torch.zeros_like(h), torch.zeros_like(h)
        c_left, c_right = torch.zeros_like(c), torch.zeros_like(c)
        for k in range(1, self.window + 1):  # neighbours: h_{i-k}, h_{i+k} (zero beyond the text)
            h_left, h_right = h_left + _shift(h, k), h_right + _shift(h, -k)
            c_left, c_right = c_left + _shift(c, k), c_right + _shift(c, -k)
        W = self.token_w.weight  # (7d, 4d): input blocks [self | left | right | sentence]
        pre = (F.linear(torch.cat([h, h_left, h_right], -1), W[:, :3 * d]) + ux
               + F.linear(g, W[:, 3 * d:], self.token_w.bias)[:, None])  # the sentence part once per text
        if self.gate_layer_norm:  # LayerNorm over each gate's d units = group norm with 7 groups
            nw = self.token_norm
            pre = F.group_norm(pre.reshape(B * n, 7 * d), 7, nw.weight.reshape(-1), nw.bias.reshape(-1), nw.eps)
        pre = pre.view(B, n, 7, d)
        squashed, u = pre.split([6, 1], dim=2)
        s5, o = torch.sigmoid(squashed).split([5, 1], dim=2)
        w = torch.softmax(s5, dim=2)  # (B, n, 5, d): i l r f s against each other, per hidden unit
        w_i, w_l, w_r, w_f, w_s = w.unbind(2)
        o, u = o.squeeze(2), torch.tanh(u.squeeze(2))
        c_new = w_i * u + w_l * c_left + w_r * c_right + w_f * c + w_s * gc[:, None]
        h_new = self.dropout(o * torch.tanh(c_new)) * m
        c_new = c_new * m
        # sentence node, from the new token states
        h_avg = h_new.sum(1) / lengths
        fo = torch.sigmoid(self.sent_fo(torch.cat([g, h_avg], -1))).view(B, 2, d)
        fo = self._norm(self.sent_norm, fo, slice(0, 2))
        f_g, o_g = fo[:, 0], fo[:, 1]
        Wf = self.sent_f.weight  # (d, 2d): [h_i | g]
        f_tok = F.linear(h_new, Wf[:, :d]) + F.linear(g, Wf[:, d:], self.sent_f.bias)[:, None]
        f_tok = torch.sigmoid(self._norm(self.sent_norm, f_tok, 2))
        f_tok = f_tok.masked_fill(m == 0, float("-inf"))
        sw = torch.softmax(torch.cat([f_tok, f_g[:, None]], 1), dim=1)  # (B, n+1, d)
        gc_new = (sw[:, :n] * c_new).sum(1) + sw[:, n] * gc
        g_new = self.dropout(o_g * torch.tanh(gc_new))
        gates = StepGates(w, o, sw[:, :n], sw[:, n], o_g) if need_gates else None
        return StepState(h_new, c_new, g_new, gc_new), gates


class SLSTM(nn.Module):
    """Embeddings + the shared block run for ``num_layers`` steps. See the module docstring."""

    def __init__(self, cfg: SLSTMConfig):
        super().__init__()
        self.config = cfg
        d = cfg.hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, d, padding_idx=cfg.pad_id)
        self.embed_positions = nn.Embedding(cfg.max_positions, d)
        self.layernorm_embedding = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.block = SLSTMBlock(cfg)
        self.dropout = nn.Dropout(cfg.dropout)
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()

    def initial_state(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """(x, U x, mask (B, n, 1), lengths (B, 1), state at step 0)."""
        B, n = input_ids.shape
        if n > self.config.max_positions:
            raise ValueError(f"input of {n} tokens is longer than the {self.config.max_positions} positions")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        m = attention_mask.to(self.embed_tokens.weight.dtype)[..., None]  # (B, n, 1)
        pos = torch.arange(n, device=input_ids.device)
        x = self.layernorm_embedding(self.embed_tokens(input_ids) + self.embed_positions(pos)[None])
        x = self.dropout(x) * m
        lengths = m.sum(1).clamp_min(1.0)  # (B, 1)
        g = x.sum(1) / lengths
        return x, self.block.token_u(x), m, lengths, StepState(x, x, g, g)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_gates: bool = False, all_steps: bool = True) -> SLSTMOutput:
        """input_ids, attention_mask: (B, n), right-padded. ``all_steps=False`` keeps only the last step."""
        x, ux, m, lengths, state = self.initial_state(input_ids, attention_mask)
        hs, gs, gates, doms, sws, sss = [state.h], [state.g], [], [], [], []
        for _ in range(self.config.num_layers):
            state, gv = self.block(state, ux, m, lengths, need_gates=output_gates)
            if all_steps:
                hs.append(state.h)
                gs.append(state.g)
            if output_gates:
                gates.append(gv.token.mean(-1).transpose(1, 2) * m[:, None, :, 0])  # (B, 5, n)
                top = (gv.token == gv.token.amax(2, keepdim=True)).to(gv.token.dtype)  # (B, n, 5, d)
                doms.append((top / top.sum(2, keepdim=True)).mean(-1).transpose(1, 2) * m[:, None, :, 0])
                sws.append(gv.sentence_tokens.mean(-1))  # (B, n)
                sss.append(gv.sentence_self.mean(-1))  # (B,)
        if not all_steps:
            hs, gs = [state.h], [state.g]
        out = SLSTMOutput(hidden=torch.stack(hs), sentence=torch.stack(gs))
        if output_gates:
            out.gates, out.sentence_weights = torch.stack(gates), torch.stack(sws)
            out.gates_dominant = torch.stack(doms)
            out.sentence_self_weight = torch.stack(sss)
        return out


class SLSTMLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> tied token embeddings + bias (the implementation's SlstmLMHead)."""

    def __init__(self, d: int, vocab_size: int, weight: torch.Tensor, eps: float):
        super().__init__()
        self.dense = nn.Linear(d, d)
        self.layer_norm = nn.LayerNorm(d, eps=eps)
        self.weight = weight
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.linear(self.layer_norm(F.gelu(self.dense(features))), self.weight) + self.bias


class SLSTMForMaskedLM(nn.Module):
    """The S-LSTM with its MLM head (for pre-training)."""

    def __init__(self, cfg: SLSTMConfig):
        super().__init__()
        self.config = cfg
        self.slstm = SLSTM(cfg)
        self.lm_head = SLSTMLMHead(cfg.hidden_size, cfg.vocab_size, self.slstm.embed_tokens.weight,
                                   cfg.layer_norm_eps)
        nn.init.normal_(self.lm_head.dense.weight, 0.0, cfg.initializer_range)
        nn.init.zeros_(self.lm_head.dense.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                masked_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, n, V), or (M, V) at the True entries of ``masked_positions`` (B, n)."""
        h = self.slstm(input_ids, attention_mask, all_steps=False).hidden[-1]
        if masked_positions is not None:
            h = h[masked_positions]
        return self.lm_head(h)


# ----------------------------------------------------------------------------- native files


def tied_keys() -> tuple[str, ...]:
    """State-dict keys of SLSTMForMaskedLM that alias another tensor (not written to disk)."""
    return ("lm_head.weight",)


def save_pretrained(model: SLSTMForMaskedLM, folder: str | os.PathLike, dtype: str = "float16",
                    extra_config: dict | None = None) -> None:
    """Write ``config.json`` + ``model.safetensors`` (weights in ``dtype``; loading casts to float32).

    Writes into ``folder`` directly; callers wanting atomicity write into a temporary folder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().to(getattr(torch, dtype)).contiguous() for k, v in model.state_dict().items()
          if k not in tied_keys()}
    save_file(sd, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
    doc = {"model_type": MODEL_TYPE, "architectures": ["SLSTMForMaskedLM"], **model.config.to_dict(),
           "weights_dtype": dtype, **(extra_config or {})}
    (folder / CONFIG_NAME).write_text(json.dumps(doc, indent=1) + "\n")


def read_config(folder: str | os.PathLike) -> dict:
    doc = loads_json((Path(folder) / CONFIG_NAME).read_text(encoding="utf-8"))
    if doc.get("model_type") != MODEL_TYPE:
        raise ValueError(f"{folder}/{CONFIG_NAME} is not an S-LSTM config (model_type {doc.get('model_type')!r})")
    return doc


def load_pretrained(folder: str | os.PathLike) -> SLSTMForMaskedLM:
    """Rebuild a saved model in float32 (safetensors: no code can run while loading)."""
    from safetensors.torch import load_file

    cfg = SLSTMConfig.from_dict(read_config(folder))
    model = SLSTMForMaskedLM(cfg)
    sd = {k: v.float() for k, v in load_file(str(Path(folder) / WEIGHTS_NAME)).items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if k not in tied_keys()]
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not match the config (missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]})")
    return model.eval()


def count_parameters(module: nn.Module) -> int:
    """Distinct parameters (tied ones counted once)."""
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())


__all__ = ["GATES", "SLSTM", "SLSTMBlock", "SLSTMConfig", "SLSTMForMaskedLM", "SLSTMOutput", "StepGates",
           "StepState", "count_parameters", "load_pretrained", "save_pretrained"]
