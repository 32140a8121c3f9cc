"""The encoder interface every loader returns: token ids in, per-layer states out.

An :class:`Encoder` is deliberately small: it tokenizes texts and runs one padded batch.
Everything else (batching, slicing off padding, sentence vectors, caching) lives in
``probes.activations`` so that every architecture is captured by the same code path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from probes.registry import CheckpointSpec


@dataclass
class Tokenized:
    """One text after tokenization (no padding, no truncation)."""

    ids: list[int]  # (n,)
    special: list[bool]  # (n,) True for [CLS]/[SEP]/<s>/</s>-like tokens
    tokens: list[str]  # (n,) the token strings


@dataclass
class EncoderOutput:
    """What one forward pass over a padded batch returns (all on the model's device)."""

    hidden: torch.Tensor  # (L+1, B, n, d); hidden[0] = embedding output, hidden[l] = output of layer l
    attentions: torch.Tensor | None = None  # (L, B, H, n, n) softmaxed attention, when asked
    sentence: torch.Tensor | None = None  # (L+1, B, d) model-defined sentence vector (S-LSTM's g)


class Encoder:
    """Base class: a named checkpoint ready to run. Subclasses set the attributes and implement
    :meth:`tokenize` and :meth:`forward`."""

    spec: CheckpointSpec
    fingerprint: dict  # identifies the weights (see CheckpointSpec.fingerprint)
    num_layers: int  # L
    hidden_size: int  # d
    max_length: int  # longest input (in tokens, special tokens included) the model accepts
    pad_id: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def name(self) -> str:
        return self.spec.name

    def tokenize(self, texts: list[str]) -> list[Tokenized]:
        raise NotImplementedError

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                attentions: bool = False) -> EncoderOutput:
        """input_ids, attention_mask: (B, n), right-padded. Must not let padding change real tokens."""
        raise NotImplementedError

    def describe(self) -> dict:
        """Model identity for result files."""
        return {
            "name": self.spec.name, "family": self.spec.family, "kind": self.spec.kind,
            "source": self.spec.source, "fingerprint": self.fingerprint, "num_layers": self.num_layers,
            "hidden_size": self.hidden_size, "max_length": self.max_length,
            "sentence_vector": self.spec.sentence, "special_tokens_added": self.spec.special_tokens,
        }
