"""The Multi-order-Graph Transformer ("Graph-Transformer", Duan & Zhao, §4.1-4.2, Eq. 14-17) as an
MLM encoder. No public implementation exists; this is the suite's reference reading.

Layer j+1 reads the full representation r_f (layer j's output) and the previous representation
r_p (layer j's input) and splits self-attention by subgraph order (Eq. 14 without r_p r_p^T):

    r_i   = r_f - r_p                                               (incremental representation)
    h^h   = Attention^h(Q^i, K^i, V^i)                              (high order,   r_i r_i^T)
    h^m   = Attention^m(Q^i, K^p, V^p) + Attention^m(Q^p, K^i, V^i) (middle order, r_i r_p^T, r_p r_i^T)
    h^l   = Linear(r_p)                                             (low order: r_p r_p^T not recomputed)
    h_f   = LayerNorm(r_f + fusion(h^h, h^m, h^l))
    out   = LayerNorm(h_f + FFN(h_f));   next layer: r_p <- r_f, r_f <- out

Readings and deviations (also written into every saved ``config.json`` under ``readings``):

1. The paper prints ``r^i_{j+1} = r^f_j - r^f_j`` (always 0), a typo; with its definition in the
   text ("the difference between the full representation and the previous representation") we
   read r_i^{j+1} = r_f^{j+1} - r_p^{j+1} = r_f^{j+1} - r_f^j.
2. First layer: r_p^0 = 0, r_f^0 = x (embedding output), so r_i^0 = x. By Eq. 14 with r_p = 0 the
   full attention r_f r_f^T IS the high-order term, so layer 1 is a standard Transformer layer
   (its high-order attention over the embeddings) plus constants: the middle-order terms see
   K^p = b_K, V^p = b_V (uniform attention over the real tokens) and Q^p = b_Q, and h^l = Linear(0)
   = its bias. No extra parameters, no special case, every map defined at every layer.
3. One Attention^m (its own W_Q, W_K, W_V, W_O) serves both middle terms, as the notation says;
   Attention^h has its own. Each Attention is multi-head scaled dot-product attention,
   softmax(Q K^T / sqrt(d_head)) V, heads concatenated, then W_O (Transformer-base style).
4. ``shared_qkv`` (§4.1, "share query, key, and value vectors in different parts of
   self-attention"): Attention^h and Attention^m use the same W_Q, W_K, W_V (so Q^i, K^i, V^i are
   the same vectors in both); the two output projections stay separate.
5. ``half_dim`` (§4.1, "reduce the dimension of model to half"): halves the inner width of both
   attentions (Q, K, V and W_O's input: d/2 split over the heads). The residual stream, the
   embeddings, the low-order Linear and the FFN keep width d. Halving the whole model would cut the
   parameters about 4x; Table 2 has weight-gate 57M -> weight-gate&half-dim 50M, and our reading
   saves 4 d^2 per encoder layer = 6.3M for 6 layers at d = 512, the size of that drop.
6. ``weight-gate`` (Eq. 16): w = sigmoid(h^h + h^m + h^l), fused = (h^h + h^m) w + h^l (1 - w),
   elementwise, no parameters (:func:`weight_gate`). The map ``subgraph_weight`` is w averaged over
   hidden units ("the weight of high-order subgraphs" of Fig. 9).
7. ``self-gate`` (Eq. 17): R = the 3-slot sequence [h^h, h^m, h^l] per token; R_q, R_k, R_v = R W^Q,
   R W^K, R W^V (d x d with biases); R_f = softmax(R_q R_k^T / d_k) R_v / 4 with d_k = d, the model
   dimension, as printed (not sqrt(d)). The text says "concatenate four representations" and
   divides by 4 "to make the sum of weights equal to 1"; only three are defined. We keep the
   printed /4 and make the slots one vector by SUMMING the 3 rows of R_f: fused = sum_k c_k R_v[k]
   with c_k = sum_q A[q, k] / 4, so every row of A sums to 1 (before the /4) and the c_k sum to 3/4
   (they would sum to 1 with four slots). The map ``subgraph_weight`` is A (3 x 3, row-major).
8. ``sum``: fused = h^h + h^m + h^l.
9. Table 2's parameter counts do not follow from the equations (weight-gate has no parameters in
   Eq. 16, yet Table 2 lists it 7M above sum); :func:`parameter_table` gives ours for the paper's
   De-En encoder (d 512, FFN 1024, 6 layers, 10K vocabulary) beside the paper's full NMT counts.
10. The MLM model around it is BERT-style (our recipe, not the paper's NMT): learned positions,
   LayerNorm(E + P), post-LayerNorm layers, GELU FFN, BERT initialisation (N(0, 0.02)), head
   dense -> GELU -> LayerNorm -> tied embeddings + bias. Padding keys are masked in all three
   attentions; padding never changes a real token.

    >>> cfg = MoGConfig(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)
    >>> out = MoG(cfg)(torch.tensor([[5, 6, 7]]), output_maps=True)
    >>> out.hidden.shape, out.attention_high.shape    # (L+1, B, n, d), (L, B, H, n, n)
    (torch.Size([3, 1, 3, 32]), torch.Size([2, 1, 4, 3, 3]))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from probes.io import JsonConfig, loads_json
from probes.models.slstm import SLSTMLMHead

FUSIONS = ("sum", "weight-gate", "self-gate")
SLOTS = ("high", "middle", "low")  # self-gate slot order
CONFIG_NAME, WEIGHTS_NAME, MODEL_TYPE = "config.json", "model.safetensors", "mog"
# the version of the Graph-Transformer's states and maps (this forward and MoGEncoder's): in every cache key of
# family mog; bump it when a change alters any output (tests/test_forward_versions.py pins a seeded model to it)
FORWARD_VERSION = 1
READINGS = {
    "incremental": "r_i^{j+1} = r_f^{j+1} - r_p^{j+1} (the printed r^f_j - r^f_j is a typo)",
    "first_layer": "r_p^0 = 0, r_f^0 = r_i^0 = embeddings: layer 1 = standard attention + constant middle/low terms",
    "attention_m": "one Attention^m (own W_Q, W_K, W_V, W_O) for both middle-order terms",
    "shared_qkv": "Attention^h and Attention^m share W_Q, W_K, W_V; output projections separate",
    "half_dim": "halves the inner width of both attentions (Q, K, V, W_O input); residual, FFN, low-order stay d",
    "self_gate": "softmax(R_q R_k^T / d) R_v / 4 as printed (d_k = d, not sqrt); 3 slot rows summed -> "
                 "value-slot weights sum to 3/4",
    "mlm": "BERT-style embeddings, post-LN, GELU FFN, init N(0, 0.02), tied MLM head",
}


@dataclass
class MoGConfig(JsonConfig):
    """Architecture of one Graph-Transformer encoder (everything needed to rebuild it)."""

    vocab_size: int
    hidden_size: int = 256  # d (residual stream)
    num_layers: int = 4  # L
    num_heads: int = 4  # heads of each attention
    intermediate_size: int = 1024  # FFN width
    fusion: str = "weight-gate"  # sum | weight-gate | self-gate
    shared_qkv: bool = False  # Attention^h and Attention^m share W_Q, W_K, W_V
    half_dim: bool = False  # attention inner width d/2
    max_positions: int = 512  # learned position embeddings
    dropout: float = 0.0
    pad_id: int = 0
    layer_norm_eps: float = 1e-12  # as BERT (the baseline of the same recipe)
    initializer_range: float = 0.02

    def __post_init__(self):
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, not {self.fusion!r}")
        if self.attention_size % self.num_heads:
            raise ValueError(f"attention width {self.attention_size} is not divisible by {self.num_heads} heads")

    @property
    def attention_size(self) -> int:
        """Inner width of each attention (d, or d/2 with half_dim)."""
        return self.hidden_size // 2 if self.half_dim else self.hidden_size


@dataclass
class MoGOutput:
    """What :meth:`MoG.forward` returns."""

    hidden: torch.Tensor  # (L+1, B, n, d): 0 = embeddings, l = output of layer l
    attention_high: torch.Tensor | None = None  # (L, B, H, n, n) Attention^h(Q^i, K^i)
    attention_middle_qi: torch.Tensor | None = None  # (L, B, H, n, n) Attention^m(Q^i, K^p)
    attention_middle_qp: torch.Tensor | None = None  # (L, B, H, n, n) Attention^m(Q^p, K^i)
    subgraph_weight: torch.Tensor | None = None  # (L, B, 1, n) weight-gate w (unit mean); (L, B, 9, n) self-gate A


def weight_gate(high: torch.Tensor, middle: torch.Tensor, low: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 16, elementwise on any shape: w = sigmoid(h + m + l); (fused = (h + m) w + l (1 - w), w)."""
    w = torch.sigmoid(high + middle + low)
    return (high + middle) * w + low * (1 - w), w


class Projection(nn.Module):
    """W_Q, W_K, W_V of one attention: (B, n, d) -> three (B, H, n, d_head)."""

    def __init__(self, d: int, inner: int, heads: int):
        super().__init__()
        self.qkv, self.heads = nn.Linear(d, 3 * inner), heads

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, n, _ = x.shape
        return self.qkv(x).view(B, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_bias: torch.Tensor):
    """Scaled dot-product attention per head. q, k, v (B, H, n, dh); key_bias (B, 1, 1, n) 0 / -inf.
    Returns (heads concatenated (B, n, H dh), probabilities (B, H, n, n))."""
    p = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + key_bias, dim=-1)
    out = p @ v  # (B, H, n, dh)
    return out.transpose(1, 2).flatten(2), p


class SelfGate(nn.Module):
    """Eq. 17 over the 3 slots [h^h, h^m, h^l] of each token (see reading 7)."""

    def __init__(self, d: int):
        super().__init__()
        self.qkv, self.d = nn.Linear(d, 3 * d), d

    def forward(self, high, middle, low) -> tuple[torch.Tensor, torch.Tensor]:
        R = torch.stack([high, middle, low], dim=-2)  # (B, n, 3, d)
        q, k, v = self.qkv(R).chunk(3, dim=-1)
        A = torch.softmax(q @ k.transpose(-1, -2) / self.d, dim=-1)  # (B, n, 3, 3), rows sum to 1
        return (A @ v / 4).sum(-2), A  # slots summed -> (B, n, d)


class MoGLayer(nn.Module):
    """One Graph-Transformer layer: (r_f, r_p) -> new r_f (and its maps)."""

    def __init__(self, cfg: MoGConfig):
        super().__init__()
        d, a, H = cfg.hidden_size, cfg.attention_size, cfg.num_heads
        self.proj_h = Projection(d, a, H)
        self.proj_m = self.proj_h if cfg.shared_qkv else Projection(d, a, H)
        self.out_h, self.out_m = nn.Linear(a, d), nn.Linear(a, d)
        self.low = nn.Linear(d, d)
        self.fusion = cfg.fusion
        self.self_gate = SelfGate(d) if cfg.fusion == "self-gate" else None
        self.norm1 = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.ffn = nn.Sequential(nn.Linear(d, cfg.intermediate_size), nn.GELU(), nn.Linear(cfg.intermediate_size, d))
        self.norm2 = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, r_f: torch.Tensor, r_p: torch.Tensor, key_bias: torch.Tensor):
        """r_f, r_p: (B, n, d); key_bias (B, 1, 1, n). Returns (new r_f, maps dict)."""
        r_i = r_f - r_p
        qi_h, ki_h, vi_h = self.proj_h(r_i)
        qi_m, ki_m, vi_m = (qi_h, ki_h, vi_h) if self.proj_m is self.proj_h else self.proj_m(r_i)
        qp_m, kp_m, vp_m = self.proj_m(r_p)
        a_h, p_h = attend(qi_h, ki_h, vi_h, key_bias)
        a_qi, p_qi = attend(qi_m, kp_m, vp_m, key_bias)
        a_qp, p_qp = attend(qp_m, ki_m, vi_m, key_bias)
        high = self.dropout(self.out_h(a_h))
        middle = self.dropout(self.out_m(a_qi + a_qp))  # W_O is linear: Attention^m(..) + Attention^m(..)
        low = self.dropout(self.low(r_p))
        if self.fusion == "weight-gate":
            fused, w = weight_gate(high, middle, low)
            weight = w.mean(-1)[:, None]  # (B, 1, n)
        elif self.self_gate is not None:  # fusion "self-gate"
            fused, A = self.self_gate(high, middle, low)
            weight = A.flatten(-2).transpose(1, 2)  # (B, 9, n)
        else:
            fused, weight = high + middle + low, None
        h_f = self.norm1(r_f + fused)
        out = self.norm2(h_f + self.dropout(self.ffn(h_f)))
        return out, {"attention_high": p_h, "attention_middle_qi": p_qi, "attention_middle_qp": p_qp,
                     "subgraph_weight": weight}


class MoG(nn.Module):
    """Embeddings + ``num_layers`` Graph-Transformer layers. See the module docstring."""

    def __init__(self, cfg: MoGConfig):
        super().__init__()
        self.config = cfg
        d = cfg.hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, d, padding_idx=cfg.pad_id)
        self.embed_positions = nn.Embedding(cfg.max_positions, d)
        self.layernorm_embedding = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(MoGLayer(cfg) for _ in range(cfg.num_layers))
        self.dropout = nn.Dropout(cfg.dropout)
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_maps: bool = False) -> MoGOutput:
        """input_ids, attention_mask: (B, n), right-padded."""
        B, n = input_ids.shape
        if n > self.config.max_positions:
            raise ValueError(f"input of {n} tokens is longer than the {self.config.max_positions} positions")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        pos = torch.arange(n, device=input_ids.device)
        x = self.dropout(self.layernorm_embedding(self.embed_tokens(input_ids) + self.embed_positions(pos)[None]))
        key_bias = torch.zeros(attention_mask.shape, dtype=x.dtype, device=x.device)
        key_bias = key_bias.masked_fill(attention_mask == 0, float("-inf"))[:, None, None]  # (B, 1, 1, n)
        r_f, r_p = x, torch.zeros_like(x)  # reading 2: r_p^0 = 0
        hs: list[torch.Tensor] = [x]
        map_names = ("attention_high", "attention_middle_qi", "attention_middle_qp", "subgraph_weight")
        maps: dict[str, list[torch.Tensor]] = {k: [] for k in map_names}
        for layer in self.layers:
            out, m = layer(r_f, r_p, key_bias)
            r_f, r_p = out, r_f  # next layer: r_p <- this layer's input, r_f <- its output
            if output_maps:
                for k, v in m.items():
                    maps[k].append(v)
            hs.append(r_f)
        out = MoGOutput(hidden=torch.stack(hs))
        if output_maps:
            for k, v in maps.items():
                setattr(out, k, torch.stack(v) if v and v[0] is not None else None)
        return out


class MoGForMaskedLM(nn.Module):
    """The Graph-Transformer with a BERT-style MLM head (for pre-training)."""

    def __init__(self, cfg: MoGConfig):
        super().__init__()
        self.config = cfg
        self.mog = MoG(cfg)
        self.lm_head = SLSTMLMHead(cfg.hidden_size, cfg.vocab_size, self.mog.embed_tokens.weight, cfg.layer_norm_eps)
        nn.init.normal_(self.lm_head.dense.weight, 0.0, cfg.initializer_range)
        nn.init.zeros_(self.lm_head.dense.bias)

    def forward(self, input_ids, attention_mask=None, masked_positions=None) -> torch.Tensor:
        """Logits (B, n, V), or (M, V) at the True entries of ``masked_positions`` (B, n)."""
        h = self.mog(input_ids, attention_mask).hidden[-1]
        return self.lm_head(h[masked_positions] if masked_positions is not None else h)


# ----------------------------------------------------------------------------- parameter counts


def parameter_formula(cfg: MoGConfig, head: bool = True) -> int:
    """Closed-form parameter count of MoGForMaskedLM (``head=False``: the encoder MoG alone)."""
    d, a, ff, V, P = cfg.hidden_size, cfg.attention_size, cfg.intermediate_size, cfg.vocab_size, cfg.max_positions
    proj = 3 * (d * a + a)  # W_Q, W_K, W_V with biases
    layer = ((1 if cfg.shared_qkv else 2) * proj + 2 * (a * d + d)  # projections, W_O^h, W_O^m
             + d * d + d  # low-order Linear
             + (3 * (d * d + d) if cfg.fusion == "self-gate" else 0)
             + 2 * d * ff + ff + d + 4 * d)  # FFN, two LayerNorms
    enc = V * d + P * d + 2 * d + cfg.num_layers * layer
    return enc + (d * d + d + 2 * d + V if head else 0)


PAPER_TABLE2 = {  # variant -> (De-En #Para, En-De #Para), millions, full NMT models (encoder + decoder)
    "sum": (50, 77), "weight-gate": (57, 80), "self-gate": (53, 77), "weight-gate&shared-qkv": (51, 75),
    "weight-gate&half-dim": (50, 74), "weight-gate&half-dim&shared-qkv": (47, 70)}


def parameter_table(hidden_size: int = 512, num_layers: int = 6, intermediate_size: int = 1024,
                    vocab_size: int = 10000, max_positions: int = 512) -> list[dict]:
    """Our encoder's parameters for every Table 2 variant (De-En sizes by default) beside the paper's."""
    rows = []
    for name, (de_en, en_de) in PAPER_TABLE2.items():
        parts = name.split("&")
        cfg = MoGConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers, num_heads=8,
                        intermediate_size=intermediate_size, fusion=parts[0], shared_qkv="shared-qkv" in parts,
                        half_dim="half-dim" in parts, max_positions=max_positions)
        rows.append({"variant": name, "ours_encoder": parameter_formula(cfg, head=False), "paper_de_en_millions": de_en,
                     "paper_en_de_millions": en_de})
    return rows


# ----------------------------------------------------------------------------- native files


def save_pretrained(model: MoGForMaskedLM, folder: str | os.PathLike, dtype: str = "float16",
                    extra_config: dict | None = None) -> None:
    """Write ``config.json`` (with the readings) + ``model.safetensors`` (weights in ``dtype``)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().to(getattr(torch, dtype)).contiguous() for k, v in model.state_dict().items()
          if k != "lm_head.weight" and not (model.config.shared_qkv and ".proj_m." in k)}
    save_file(sd, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
    doc = {"model_type": MODEL_TYPE, "architectures": ["MoGForMaskedLM"], **model.config.to_dict(),
           "weights_dtype": dtype, "readings": READINGS, **(extra_config or {})}
    (folder / CONFIG_NAME).write_text(json.dumps(doc, indent=1) + "\n")


def read_config(folder: str | os.PathLike) -> dict:
    doc = loads_json((Path(folder) / CONFIG_NAME).read_text(encoding="utf-8"))
    if doc.get("model_type") != MODEL_TYPE:
        raise ValueError(f"{folder}/{CONFIG_NAME} is not a Graph-Transformer config (model_type "
                         f"{doc.get('model_type')!r})")
    return doc


def load_pretrained(folder: str | os.PathLike) -> MoGForMaskedLM:
    """Rebuild a saved model in float32 (safetensors: no code can run while loading)."""
    from safetensors.torch import load_file

    model = MoGForMaskedLM(MoGConfig.from_dict(read_config(folder)))
    sd = {k: v.float() for k, v in load_file(str(Path(folder) / WEIGHTS_NAME)).items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not (model.config.shared_qkv and ".proj_m." in k)]
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not match the config (missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]})")
    return model.eval()


__all__ = ["FUSIONS", "MoG", "MoGConfig", "MoGForMaskedLM", "MoGLayer", "MoGOutput", "PAPER_TABLE2", "READINGS",
           "SLOTS", "attend", "load_pretrained", "parameter_formula", "parameter_table", "read_config",
           "save_pretrained", "weight_gate"]
