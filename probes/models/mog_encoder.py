"""The Graph-Transformer (:mod:`probes.models.mog`) behind the :class:`probes.models.encoder.Encoder` interface:
registry family ``mog``.

    my-mog:
      family: mog
      kind: encoder
      source: {path: checkpoints/mog-small}   # native folder (python -m recipes.train --arch mog)
      sentence: cls
      special_tokens: true

Sources: ``path`` to a native folder (``config.json`` with model_type mog + ``model.safetensors``,
float16 or float32 on disk, float32 in memory, + Hugging Face fast tokenizer files), or
``random: {hidden_size: 32, num_layers: 2, fusion: sum, ...}`` (MoGConfig fields) + ``tokenizer:
<entry of family hf>`` + ``seed``: a seeded random model for tests.

Outputs: ``hidden`` (L+1, B, n, d) (0 = embeddings). No single "attention" map
(``has_attention = False``: every layer has three), but with ``maps=True`` the maps of
:meth:`MoGEncoder.map_specs`: the three per-order attentions (L, H, n, n) and, for the gated
fusions, ``subgraph_weight`` per token (L, 1, n) weight-gate w averaged over hidden units, or
(L, 9, n) the self-gate's 3 x 3 slot weights (row-major: query slot high/middle/low x key slot).
"""

from __future__ import annotations

import torch

from probes.checkpoints.folder import check_vocab
from probes.checkpoints.registry import CheckpointSpec
from probes.errors import CheckpointError
from probes.models.encoder import Encoder, EncoderOutput, MapSpec, Tokenizer
from probes.models.mog import MoG, MoGConfig, load_pretrained, read_config

ATTENTION_MAPS = {
    "attention_high": "high-order attention Attention^h(Q^i, K^i): incremental rows x incremental keys",
    "attention_middle_qi": "middle-order attention Attention^m(Q^i, K^p): incremental queries, previous keys",
    "attention_middle_qp": "middle-order attention Attention^m(Q^p, K^i): previous queries, incremental keys",
}


class MoGEncoder(Encoder):
    """A Graph-Transformer + tokenizer; three attention maps per layer and the fusion weights."""

    model: MoG
    has_attention = False  # no single attention map: see map_specs

    def __init__(self, spec: CheckpointSpec, model: MoG, tokenizer: Tokenizer, fingerprint: dict):
        self.spec, self.model, self.tokenizer, self.fingerprint = spec, model.eval(), tokenizer, fingerprint
        cfg = model.config
        self.num_layers, self.hidden_size, self.num_heads = cfg.num_layers, cfg.hidden_size, cfg.num_heads
        self.max_length = min(cfg.max_positions, tokenizer.max_length)
        self.pad_id = tokenizer.pad_id
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

    def map_specs(self) -> dict[str, MapSpec]:
        L, H, fusion = self.num_layers, self.num_heads, self.model.config.fusion
        specs = {name: MapSpec(L, H, 2, doc) for name, doc in ATTENTION_MAPS.items()}
        if fusion == "weight-gate":
            specs["subgraph_weight"] = MapSpec(L, 1, 1, "weight-gate w = sigmoid(h_h + h_m + h_l) (Eq. 16), "
                                               "mean over hidden units: the weight of high+middle orders")
        elif fusion == "self-gate":
            specs["subgraph_weight"] = MapSpec(L, 9, 1, "self-gate slot weights softmax(R_q R_k^T / d) (Eq. 17), "
                                               "3 x 3 row-major (query slot x key slot, high/middle/low); "
                                               "rows sum to 1 before the /4")
        return specs

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, maps=False) -> EncoderOutput:
        out = self.model(input_ids.to(self.device), attention_mask.to(self.device), output_maps=maps)
        captured = {}
        if maps:
            captured = {name: getattr(out, name) for name in ATTENTION_MAPS}  # (L, B, H, n, n)
            if out.subgraph_weight is not None:
                captured["subgraph_weight"] = out.subgraph_weight
        return EncoderOutput(hidden=out.hidden, attentions=None, maps=captured)

    def describe(self) -> dict:
        cfg = self.model.config
        return {**super().describe(), "architecture": "Graph-Transformer (multi-order attention)",
                "fusion": cfg.fusion, "half_dim": cfg.half_dim, "shared_qkv": cfg.shared_qkv}


def _resolve(spec: CheckpointSpec, weights: bool):
    """(MoG or None, tokenizer, config) for a random or path source."""
    from transformers import PreTrainedTokenizerFast

    from probes.checkpoints.loaders import load_tokenizer
    from probes.models.hf import HFTokenizer

    if spec.source_type == "random":
        loaded = load_tokenizer(spec.source["tokenizer"])
        if not isinstance(loaded, HFTokenizer):
            raise CheckpointError(f"model '{spec.name}': its tokenizer entry '{spec.source['tokenizer']}' has no "
                                  f"Hugging Face tokenizer ({type(loaded).__name__})")
        tok = loaded.tokenizer  # the Hugging Face tokenizer
        try:
            cfg = MoGConfig.from_dict({"pad_id": tok.pad_token_id or 0, **dict(spec.source["random"]),
                                       "vocab_size": len(tok)})
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"model '{spec.name}': bad random config: {e}") from None
        model = None
        if weights:
            torch.manual_seed(int(spec.source.get("seed", 0)))
            model = MoG(cfg)
        return model, HFTokenizer(spec, tok, cfg.max_positions), cfg
    if spec.source_type != "path":
        raise CheckpointError(f"model '{spec.name}': family mog loads path or random sources, not {spec.source_type}")
    folder = spec.folder()
    try:
        cfg = MoGConfig.from_dict(read_config(folder))
        model = load_pretrained(folder).mog if weights else None
        tok = PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"model '{spec.name}': cannot load {folder}: {e}") from None
    limit = tok.model_max_length if tok.model_max_length and tok.model_max_length < 1_000_000 else cfg.max_positions
    return model, HFTokenizer(spec, tok, min(cfg.max_positions, limit)), cfg


def load_mog(spec: CheckpointSpec, device: str | torch.device = "cpu",
             dtype: torch.dtype = torch.float32) -> MoGEncoder:
    """Load a registry entry of family ``mog`` onto ``device``, its weights in ``dtype``."""
    model, tokenizer, _ = _resolve(spec, weights=True)
    check_vocab(spec.name, tokenizer, model)  # a tokenizer beyond the embedding table: one line, not an IndexError
    return MoGEncoder(spec, model.to(device=device, dtype=dtype), tokenizer, spec.fingerprint())


def load_mog_tokenizer(spec: CheckpointSpec) -> Tokenizer:
    """Only the tokenizer (no weights are read)."""
    return _resolve(spec, weights=False)[1]
