"""One loader for every Hugging Face Auto-loadable encoder or causal LM.

BERT, RoBERTa, ALBERT, ConvBERT, DistilBERT, MPNet, GPT-2, Llama, ... all go through
``AutoModel`` with ``attn_implementation="eager"`` (other attention kernels return no attention
maps) and ``trust_remote_code=False``. Hub checkpoints are read from the local cache first; if
they are not there and the hub cannot be reached, loading fails with one clear line instead of
minutes of retries.
"""

from __future__ import annotations

import os
import socket

import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoTokenizer

from probes.encoder import Encoder, EncoderOutput, Tokenized
from probes.errors import CheckpointError
from probes.registry import CheckpointSpec, get_spec

HUB_HOST = "huggingface.co"


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        socket.create_connection((HUB_HOST, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _from_pretrained(loader, spec: CheckpointSpec, **kwargs):
    """``loader.from_pretrained`` for package, path and hub sources, with clear errors."""
    common = {"trust_remote_code": False, **kwargs}
    if spec.source_type in ("package", "path"):
        try:
            return loader.from_pretrained(str(spec.local_path()), local_files_only=True, **common)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"model '{spec.name}': cannot load {spec.local_path()}: {e}") from None
    hub_id = spec.source["hub"]
    try:  # local cache first: no network needed once downloaded
        return loader.from_pretrained(hub_id, revision=spec.revision, local_files_only=True, **common)
    except (OSError, ValueError):
        pass
    if not _hub_reachable():
        raise CheckpointError(
            f"model '{spec.name}' is the hub checkpoint '{hub_id}', which is not in the local Hugging Face "
            f"cache, and {HUB_HOST} cannot be reached: run once with internet access to download it"
        )
    try:
        return loader.from_pretrained(hub_id, revision=spec.revision, **common)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"model '{spec.name}': cannot load '{hub_id}' from the hub: {e}") from None


class HFEncoder(Encoder):
    """A Hugging Face model + tokenizer behind the :class:`Encoder` interface."""

    def __init__(self, spec: CheckpointSpec, model: torch.nn.Module, tokenizer, fingerprint: dict):
        self.spec, self.model, self.tokenizer, self.fingerprint = spec, model.eval(), tokenizer, fingerprint
        cfg = model.config
        self.num_layers = cfg.num_hidden_layers
        self.hidden_size = cfg.hidden_size
        limits = [getattr(cfg, k) for k in ("max_position_embeddings", "n_positions") if getattr(cfg, k, None)]
        if cfg.model_type in ("roberta", "xlm-roberta", "camembert"):  # positions start after the pad index
            limits = [m - cfg.pad_token_id - 1 for m in limits]
        tok_max = getattr(tokenizer, "model_max_length", None)
        if tok_max and tok_max < 1_000_000:
            limits.append(tok_max)
        self.max_length = min(limits) if limits else 512
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.device = next(model.parameters()).device

    def tokenize(self, texts: list[str]) -> list[Tokenized]:
        enc = self.tokenizer(list(texts), add_special_tokens=self.spec.special_tokens, truncation=False,
                             return_special_tokens_mask=True, return_attention_mask=False, verbose=False)
        return [
            Tokenized(ids=ids, special=[bool(s) for s in sp], tokens=self.tokenizer.convert_ids_to_tokens(ids))
            for ids, sp in zip(enc["input_ids"], enc["special_tokens_mask"])
        ]

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, attentions=False) -> EncoderOutput:
        out = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device),
                         output_hidden_states=True, output_attentions=attentions, return_dict=True)
        att = torch.stack(out.attentions) if attentions else None
        return EncoderOutput(hidden=torch.stack(out.hidden_states), attentions=att)


def load_hf(spec: CheckpointSpec, device: str | torch.device = "cpu") -> HFEncoder:
    """Load a registry entry of family ``hf``."""
    transformers.logging.set_verbosity_error()
    if spec.source_type == "random":
        tok_spec = get_spec(spec.source["tokenizer"])
        tokenizer = _from_pretrained(AutoTokenizer, tok_spec)
        fields = dict(spec.source["random"])
        config = AutoConfig.for_model(fields.pop("model_type"), vocab_size=len(tokenizer), **fields)
        torch.manual_seed(int(spec.source.get("seed", 0)))
        model = AutoModel.from_config(config, attn_implementation="eager")
    else:
        tokenizer = _from_pretrained(AutoTokenizer, spec)
        model = _from_pretrained(AutoModel, spec, attn_implementation="eager")
    fingerprint = spec.fingerprint()
    if spec.source_type == "hub":
        fingerprint["commit"] = getattr(model.config, "_commit_hash", None)
    return HFEncoder(spec, model.to(device), tokenizer, fingerprint)
