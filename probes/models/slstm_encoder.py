"""The S-LSTM behind the :class:`probes.models.encoder.Encoder` interface: registry family ``slstm``.

    my-slstm:
      family: slstm
      kind: encoder
      source: {path: checkpoints/slstm-small}   # native folder, or a fairseq checkpoint folder (below)
      sentence: g                               # the sentence node
      special_tokens: true

Sources:

* ``path`` to a native folder (``python -m recipes.train --arch slstm`` or
  ``python -m probes.models.slstm_import``): ``config.json`` (model_type slstm) + ``model.safetensors``
  (float16 or float32 on disk, float32 in memory) + a tokenizer: Hugging Face fast tokenizer files
  (``tokenizer.json``), or a SentencePiece model named by the config's ``tokenizer`` entry.
* ``path`` to a folder holding the authors' fairseq checkpoint (``*.pt``) and its SentencePiece
  ``*.model``: read by :mod:`probes.models.slstm_import` (never executing the pickle). Optional entry
  fields: ``checkpoint: <file>`` and ``sentencepiece: <file>`` when the folder holds several,
  ``num_layers: <L>`` when the checkpoint does not record it.
* ``random: {hidden_size: 32, num_layers: 2, ...}`` (SLSTMConfig fields) + ``tokenizer: <entry of
  family hf>`` + ``seed``: a seeded random S-LSTM for tests.

Outputs: ``hidden`` (L+1, B, n, d) (0 = x, l = after step l), ``sentence`` = g per step (L+1, B, d);
with ``maps=True`` no attention (``has_attention = False``: the S-LSTM has none) but three
per-token maps (L, K, n), see :meth:`SLSTMEncoder.map_specs`. The per-gate LayerNorm centres every
gate's pre-activations across hidden units, so the unit-averaged weights ("gates") stay close to
1/5 (and the softmax of sigmoids keeps each weight in [0.084, 0.405]); "gates_dominant", the share
of units in which each gate weighs most, separates the gates more clearly.
"""

from __future__ import annotations

import torch

from probes.checkpoints.folder import check_vocab
from probes.checkpoints.registry import CheckpointSpec
from probes.errors import CheckpointError
from probes.models.encoder import Encoder, EncoderOutput, MapSpec, Tokenized, Tokenizer
from probes.models.slstm import GATES, SLSTM, SLSTMConfig, read_config


class SentencePieceTokenizer(Tokenizer):
    """fairseq's convention for the authors' models: id = SentencePiece id + offset; <s> ... </s>."""

    def __init__(self, spec: CheckpointSpec, model_file, max_length: int, id_offset: int = 4, bos: int = 0,
                 pad: int = 1, eos: int = 2):
        try:
            import sentencepiece as spm
        except ImportError:
            raise CheckpointError(f"model '{spec.name}' needs the Python package 'sentencepiece'") from None
        self.spec, self.max_length = spec, max_length
        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))
        self.offset, self.bos, self.pad_id, self.eos = id_offset, bos, pad, eos
        self.n_special = 2 if spec.special_tokens else 0
        self.names = {bos: "<s>", pad: "<pad>", eos: "</s>", 3: "<unk>"}

    def encode(self, text: str) -> list[int]:
        return [i + self.offset for i in self.sp.encode(text)]

    def decode(self, ids: list[int]) -> str:
        n = self.sp.get_piece_size()
        return self.sp.decode([i - self.offset for i in ids if 0 <= i - self.offset < n])

    def _token(self, i: int) -> str:
        j = i - self.offset
        return self.sp.id_to_piece(j) if 0 <= j < self.sp.get_piece_size() else self.names.get(i, "<mask>")

    def tokenize(self, texts: list[str]) -> list[Tokenized]:
        return self.tokenize_ids([self.encode(t) for t in texts])

    def tokenize_ids(self, ids_list: list[list[int]]) -> list[Tokenized]:
        out = []
        for ids in ids_list:
            ids = [int(i) for i in ids]
            special = [False] * len(ids)
            if self.spec.special_tokens:
                ids, special = [self.bos] + ids + [self.eos], [True] + special + [True]
            out.append(Tokenized(ids=ids, special=special, tokens=[self._token(i) for i in ids]))
        return out


class SLSTMEncoder(Encoder):
    """An S-LSTM + tokenizer. No attention; gate maps instead."""

    model: SLSTM
    has_attention = False  # probes.capture.activations captures no "attention" map for it
    num_heads = 1  # unused (no attention)

    def __init__(self, spec: CheckpointSpec, model: SLSTM, tokenizer: Tokenizer, fingerprint: dict):
        self.spec, self.model, self.tokenizer, self.fingerprint = spec, model.eval(), tokenizer, fingerprint
        cfg = model.config
        self.num_layers, self.hidden_size = cfg.num_layers, cfg.hidden_size
        self.max_length = min(cfg.max_positions, tokenizer.max_length)
        self.pad_id = tokenizer.pad_id
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

    def map_specs(self) -> dict[str, MapSpec]:
        L = self.num_layers
        return {
            "gates": MapSpec(L, len(GATES), 1, "S-LSTM cell gates per token: softmax weights of "
                             + ", ".join(GATES) + " (sum to 1 per hidden unit), mean over hidden units", GATES),
            "gates_dominant": MapSpec(L, len(GATES), 1, "S-LSTM cell gates per token: share of hidden units in "
                                      "which each gate has the largest softmax weight (sums to 1)", GATES),
            "sentence_weights": MapSpec(L, 1, 1, "sentence node g: softmax weight of each token's cell "
                                        "(mean over hidden units; 1 - sum = g's weight of its own cell)", ("weight",)),
        }

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, maps=False) -> EncoderOutput:
        out = self.model(input_ids.to(self.device), attention_mask.to(self.device), output_gates=maps)
        captured = {"gates": out.gates, "gates_dominant": out.gates_dominant,
                    "sentence_weights": out.sentence_weights[:, :, None]} if maps else {}
        return EncoderOutput(hidden=out.hidden, attentions=None, sentence=out.sentence, maps=captured)

    def describe(self) -> dict:
        return {**super().describe(), "architecture": "S-LSTM (graph recurrent, shared block)",
                "window": self.model.config.window}


# ----------------------------------------------------------------------------- loading


def _hf_tokenizer_from(spec: CheckpointSpec, folder, max_length: int) -> Tokenizer:
    from transformers import PreTrainedTokenizerFast

    from probes.models.hf import HFTokenizer

    try:
        tok = PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"model '{spec.name}': cannot load the tokenizer in {folder}: {e}") from None
    limit = tok.model_max_length if tok.model_max_length and tok.model_max_length < 1_000_000 else max_length
    return HFTokenizer(spec, tok, min(max_length, limit))


def _only(folder, pattern: str, name: str | None, what: str, spec: CheckpointSpec):
    if name:
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"model '{spec.name}': {what} {path} does not exist")
        return path
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise CheckpointError(f"model '{spec.name}': expected one {what} ({pattern}) in {folder}, found "
                              f"{len(found)}; name it in checkpoints.yaml")
    return found[0]


def _resolve(spec: CheckpointSpec, weights: bool):
    """(SLSTM or None, tokenizer, config) for any supported source."""
    if spec.source_type == "random":
        from probes.models.hf import HFTokenizer, hf_tokenizer

        tok = hf_tokenizer(spec)
        fields = dict(spec.source["random"])
        cfg = SLSTMConfig.from_dict({"pad_id": tok.pad_token_id or 0, **fields, "vocab_size": len(tok)})
        tokenizer: Tokenizer = HFTokenizer(spec, tok, cfg.max_positions)
        model = None
        if weights:
            torch.manual_seed(int(spec.source.get("seed", 0)))
            model = SLSTM(cfg)
        return model, tokenizer, cfg
    if spec.source_type != "path":
        raise CheckpointError(f"model '{spec.name}': family slstm loads path or random sources, not "
                              f"{spec.source_type}")
    folder = spec.folder()
    if (folder / "config.json").is_file():
        from probes.models.slstm import load_pretrained

        try:
            doc = read_config(folder)
            cfg = SLSTMConfig.from_dict(doc)
            model = load_pretrained(folder).slstm if weights else None
        except (OSError, ValueError) as e:
            raise CheckpointError(f"model '{spec.name}': cannot load {folder}: {e}") from None
        tok_doc = doc.get("tokenizer") or {}
        if tok_doc.get("type") == "sentencepiece":
            tokenizer = SentencePieceTokenizer(spec, folder / tok_doc["file"], cfg.max_positions,
                                               tok_doc.get("id_offset", 4), tok_doc.get("bos", 0),
                                               tok_doc.get("pad", 1), tok_doc.get("eos", 2))
        else:
            tokenizer = _hf_tokenizer_from(spec, folder, cfg.max_positions)
        return model, tokenizer, cfg
    from probes.models.slstm_import import import_fairseq

    ckpt = _only(folder, "*.pt", spec.extra.get("checkpoint"), "fairseq checkpoint", spec)
    spm_file = _only(folder, "*.model", spec.extra.get("sentencepiece"), "SentencePiece model", spec)
    mlm, _ = import_fairseq(ckpt, spec.extra.get("num_layers"))
    tokenizer = SentencePieceTokenizer(spec, spm_file, mlm.config.max_positions)
    return mlm.slstm, tokenizer, mlm.config


def load_slstm(spec: CheckpointSpec, device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32) -> SLSTMEncoder:
    """Load a registry entry of family ``slstm`` onto ``device``, its weights in ``dtype``."""
    model, tokenizer, _ = _resolve(spec, weights=True)
    check_vocab(spec.name, tokenizer, model)  # a tokenizer beyond the embedding table: one line, not an IndexError
    return SLSTMEncoder(spec, model.to(device=device, dtype=dtype), tokenizer, spec.fingerprint())


def load_slstm_tokenizer(spec: CheckpointSpec) -> Tokenizer:
    """Only the tokenizer (native and random sources read no weights; a fairseq .pt is read once)."""
    _, tokenizer, cfg = _resolve(spec, weights=False)
    tokenizer.max_length = min(tokenizer.max_length, cfg.max_positions)
    return tokenizer
