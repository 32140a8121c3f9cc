"""Causal language models WITH their head, for the analyses that score or generate text.

The ``hf`` loader (:mod:`probes.hf`) builds ``AutoModel`` without an LM head, which is right for
representation analyses. Perplexity and topic propagation need next-token logits, so this module
loads the same registry names with ``AutoModelForCausalLM`` (``trust_remote_code=False``,
``attn_implementation="eager"``, float32), and loads the ``recurrent`` family: a causal LM plus
the recurrence module of :mod:`probes.recurrent` (GPT-2, Llama and Gemma-3 families).

    >>> from probes.lm import load_lm
    >>> lm = load_lm("gpt2-small-recurrent")     # an LM: .model, .tokenizer, .window, .recurrent
    >>> ids = lm.encode("It is a truth universally acknowledged ...")

Registry entries of family ``recurrent`` (``kind: causal``) come in two forms:

* ``source: {path: <folder>}``: the folder holds a Hugging Face causal LM (``config.json``,
  ``model.safetensors``, tokenizer files) plus ``recurrence.json`` (a
  :class:`probes.recurrent.RecurrenceConfig`) and ``recurrence.safetensors`` (its weights);
  ``probes.train_lm`` writes such folders.
* ``source: {random: {...}, tokenizer: <entry>, seed: S}`` plus ``recurrence: {...}``: a seeded
  random model for tests. Its transformer is built exactly like the ``hf`` random entry with the
  same config and seed, so ``tiny-gpt2-recurrent``'s first window equals ``tiny-gpt2``.

It also holds the train / held-out split of a corpus that the training recipe
(:mod:`probes.train_lm`) and the evaluations (``analyses.perplexity``, ``analyses.topics``) share:
the last :data:`HELD_OUT_FRACTION` of every document, cut at a paragraph boundary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from probes.corpus import Corpus, Document
from probes.errors import CheckpointError, ProbeError
from probes.registry import CheckpointSpec, get_spec

HELD_OUT_FRACTION = 0.1  # the last 10% of every document (cut at a paragraph break) is never trained on
SPLITS = ("train", "heldout", "all")


# ----------------------------------------------------------------------------- corpus split


def split_text(text: str, held_out: float = HELD_OUT_FRACTION) -> tuple[str, str]:
    """(train part, held-out part) of one document: the cut is the first paragraph break
    (blank line) at or after ``(1 - held_out) * len(text)`` characters; if there is none, the
    first line break there, else the character position itself. Both parts are stripped."""
    if not 0 < held_out < 1:
        raise ProbeError(f"held-out fraction must be in (0, 1), got {held_out}")
    at = int(round((1 - held_out) * len(text)))
    for sep in ("\n\n", "\n"):
        k = text.find(sep, at)
        if k >= 0:
            return text[:k].strip(), text[k:].strip()
    return text[:at].strip(), text[at:].strip()


def corpus_split(corpus: Corpus, part: str, held_out: float = HELD_OUT_FRACTION) -> Corpus:
    """The ``train`` or ``heldout`` part of every document (``all``: the corpus itself).
    Documents keep their names; empty parts are dropped; the hash is recomputed."""
    if part not in SPLITS:
        raise ProbeError(f"split must be one of {', '.join(SPLITS)}, not {part!r}")
    if part == "all":
        return corpus
    docs = []
    for d in corpus.documents:
        train, test = split_text(d.text, held_out)
        text = train if part == "train" else test
        if text:
            docs.append(Document(d.name, text))
    if not docs:
        raise ProbeError(f"corpus {corpus.name} has no text in its {part} part")
    return Corpus.from_documents(f"{corpus.name} [{part}: {'first' if part == 'train' else 'last'} "
                                 f"{100 * (1 - held_out if part == 'train' else held_out):g}% of each document]",
                                 docs)


# ----------------------------------------------------------------------------- loading


@dataclass
class LM:
    """A causal LM ready to score and generate: plain (``recurrent`` False) or recurrent GPT-2."""

    spec: CheckpointSpec
    model: torch.nn.Module  # a transformers causal LM, or a probes.recurrent.RecurrentLM
    tokenizer: object  # a transformers tokenizer
    fingerprint: dict
    recurrent: bool

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def base(self):
        """The transformers causal LM (inside the recurrent wrapper for recurrent models)."""
        return self.model.lm if self.recurrent else self.model

    @property
    def max_positions(self) -> int:
        cfg = self.base.config
        return int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None) or 1024)

    @property
    def window(self) -> int:
        """The default evaluation window T: the recurrence's training window, else the longest input."""
        return self.model.config.window if self.recurrent else self.max_positions

    @property
    def device(self) -> torch.device:
        return next(self.base.parameters()).device

    def encode(self, text: str) -> list[int]:
        """Token ids of running text, without special tokens (the whole text at once, newlines kept)."""
        return self.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def describe(self) -> dict:
        cfg = self.base.config
        out = {"name": self.spec.name, "family": self.spec.family, "kind": self.spec.kind,
               "source": self.spec.source, "fingerprint": self.fingerprint,
               "model_type": cfg.model_type, "num_layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size,
               "max_positions": self.max_positions, "vocab_size": cfg.vocab_size,
               "parameters": sum(p.numel() for p in self.model.parameters())}
        if self.recurrent:
            out["recurrence"] = self.model.config.to_dict()
        return out


def _need_causal(spec: CheckpointSpec) -> None:
    if spec.family not in ("hf", "recurrent") or spec.kind != "causal":
        raise CheckpointError(
            f"model '{spec.name}' is not a causal language model (family {spec.family}, kind {spec.kind}): "
            "perplexity and generation need a causal LM with its head, e.g. gpt2-small-base, "
            "gpt2-small-recurrent, smollm2-135m, gemma3-270m, tiny-gpt2 or gpt2")


def _causal_lm(spec: CheckpointSpec, tokenizer):
    """The transformers causal LM of an hf-style source (random / path / package / hub), float32, eager."""
    import transformers
    from transformers import AutoModelForCausalLM

    from probes.hf import _from_pretrained, _random_config

    transformers.logging.set_verbosity_error()
    if spec.source_type == "random":
        torch.manual_seed(int(spec.source.get("seed", 0)))
        return AutoModelForCausalLM.from_config(_random_config(spec, tokenizer), attn_implementation="eager")
    try:
        return _from_pretrained(AutoModelForCausalLM, spec, attn_implementation="eager", dtype=torch.float32)
    except CheckpointError as e:
        raise CheckpointError(" ".join(str(e).split())) from None  # one line


def load_lm(name: str, device: str | torch.device = "cpu") -> LM:
    """Load registry entry ``name`` as a causal LM with its head (plain or recurrent), in eval mode."""
    from probes.hf import _hf_tokenizer

    spec = get_spec(name)
    _need_causal(spec)
    tokenizer = _hf_tokenizer(spec)
    model = _causal_lm(spec, tokenizer)
    fingerprint = spec.fingerprint()
    if spec.source_type == "hub":
        fingerprint["commit"] = getattr(model.config, "_commit_hash", None)
    if spec.family == "recurrent":
        model = _recurrent(spec, model)
    return LM(spec, model.to(device).eval(), tokenizer, fingerprint, spec.family == "recurrent")


def _recurrent(spec: CheckpointSpec, lm):
    from probes.recurrent import RecurrenceConfig, RecurrentLM

    if spec.source_type == "random":
        if "recurrence" not in spec.extra:
            raise CheckpointError(f"model '{spec.name}': a random recurrent entry needs a 'recurrence' field")
        cfg = RecurrenceConfig.from_dict(dict(spec.extra["recurrence"]))
        torch.manual_seed(int(spec.source.get("seed", 0)) + 1)
        return RecurrentLM(lm, cfg)
    folder = spec.local_path()
    if folder is None:
        raise CheckpointError(f"model '{spec.name}': a recurrent model needs a path or random source")
    cfg_path, weights = folder / "recurrence.json", folder / "recurrence.safetensors"
    for p in (cfg_path, weights):
        if not p.exists():
            raise CheckpointError(f"model '{spec.name}': {p} is missing (not a recurrent checkpoint folder)")
    cfg = RecurrenceConfig.from_dict(json.loads(cfg_path.read_text()))
    return RecurrentLM.with_weights(lm, cfg, weights)


def load_recurrent_encoder(spec: CheckpointSpec, device: str | torch.device = "cpu"):
    """The ``recurrent`` family behind :class:`probes.encoder.Encoder`: a single window (no h_prev),
    i.e. exactly the fine-tuned transformer, so every representation analysis runs on it."""
    from probes.hf import HFEncoder, _hf_tokenizer

    tokenizer = _hf_tokenizer(spec)
    lm = _causal_lm(spec, tokenizer)
    base = getattr(lm, lm.base_model_prefix)  # GPT2LMHeadModel.transformer: the AutoModel part
    return HFEncoder(spec, base.to(device), tokenizer, spec.fingerprint())


def load_recurrent_tokenizer(spec: CheckpointSpec):
    from probes.hf import load_hf_tokenizer

    return load_hf_tokenizer(spec)


def checkpoint_folder(name: str) -> Path | None:
    """The folder of a path-source entry (None for random/hub entries)."""
    return get_spec(name).local_path()
