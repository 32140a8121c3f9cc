"""What a result records of the model it was computed from: :class:`ModelInfo`, one model's description (name,
registry family and kind, depth and width, sentence vector, weights' fingerprint, the edits its forward passes ran
under, ...), and :class:`ModelPair`, a pairwise result's two (A and B). Every reader asks these types, never a
spelling of the saved keys: a misspelt field is a type error, not a missing number.

The description is made where the activations are (``probes``' ``Encoder.describe`` / ``LM.describe``, recorded as
``Activations.meta["model"]``) and read here once, by one codec: :meth:`ModelInfo.from_json` reads the saved object
(keys it has no field for are kept, in order, in ``extra``) and :meth:`ModelInfo.to_json` writes the same object
back, key for key and in the order it was read, so result files keep their schema and a file written before reads
back as it was.

>>> m = ModelInfo.from_json({"name": "bert-small", "family": "hf", "num_layers": 4, "hidden_size": 512, "x": 1})
>>> m.num_layers, m.hidden_size, m.extra
(4, 512, {'x': 1})
>>> m.to_json()
{'name': 'bert-small', 'family': 'hf', 'num_layers': 4, 'hidden_size': 512, 'x': 1}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["ModelInfo", "ModelPair", "model_of"]

SIDES = ("a", "b")  # a pair's two models, A then B, as the identity's ``model`` saves them


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """One model's description as a result records it. Every field is as saved (None, or empty, where the saved
    description has no such key: a description written by an older version, or by another kind of model)."""

    name: str = ""  # the model as resolved (registry name, or a spec's safe name)
    family: str = ""  # the registry family: hf, slstm, mog, recurrent, ...
    kind: str = ""  # encoder, causal, ...
    source: Any = None  # where its weights came from ("random init", a folder, a hub id, ...)
    fingerprint: dict | None = None  # the weights' identity (weights_sha256, ...)
    num_layers: int | None = None  # blocks; hidden states 0..num_layers (0 = embeddings)
    hidden_size: int | None = None  # width d
    sentence_vector: str | None = None  # how a sentence's vector is made (cls, mean, the model's own, ...)
    final_norm_on_last_hidden: bool | None = None  # whether the last hidden state is after a final norm
    requested: str | None = None  # the hf:/folder name the model's spec was made from
    recurrence: dict | None = None  # a recurrent LM's recurrence config (l_ins, overlap, ...)
    window: int | None = None  # a topics side: the window the LM generated with
    overlap: int | None = None  # a topics side: the overlap it ran with
    intervention: list[dict] | None = None  # the edits of its forward passes (probes.intervention), as recorded
    extra: dict = dataclasses.field(default_factory=dict)  # the saved keys no field above reads, as saved
    keys: tuple[str, ...] = ()  # the saved keys, in their order (to_json writes them back so)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ModelInfo:
        """The description saved as ``doc`` (a JSON object)."""
        if isinstance(doc, ModelInfo):
            return doc
        if not isinstance(doc, Mapping):
            raise TypeError(f"a model's description is a JSON object, not {type(doc).__name__}")
        own = {f.name for f in dataclasses.fields(cls)} - {"extra", "keys"}
        return cls(**{k: v for k, v in doc.items() if k in own},
                   extra={k: v for k, v in doc.items() if k not in own}, keys=tuple(doc))

    def to_json(self) -> dict:
        """The saved object: the keys read, in their order, then any field set since that was not among them."""
        own = [f.name for f in dataclasses.fields(self) if f.name not in ("extra", "keys")]
        order = [*self.keys, *(k for k in own if k not in self.keys and getattr(self, k) not in (None, "")),
                 *(k for k in self.extra if k not in self.keys)]
        return {k: getattr(self, k) if k in own else self.extra[k] for k in order}

    def renamed(self, name: str) -> ModelInfo:
        """The same description under another name."""
        return dataclasses.replace(self, name=name)

    @property
    def weights_sha256(self) -> str | None:
        """The checksum of the weights, as the fingerprint records it (None: not recorded)."""
        value = (self.fingerprint or {}).get("weights_sha256")
        return value if isinstance(value, str) else None


@dataclasses.dataclass(frozen=True)
class ModelPair:
    """A pairwise result's two models, A's and B's descriptions."""

    a: ModelInfo
    b: ModelInfo

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ModelPair:
        """The pair saved as ``{"a": {...}, "b": {...}}``."""
        if isinstance(doc, ModelPair):
            return doc
        a, b = (ModelInfo.from_json(doc[side]) for side in SIDES)
        return cls(a, b)

    def to_json(self) -> dict:
        return {"a": self.a.to_json(), "b": self.b.to_json()}

    @property
    def sides(self) -> tuple[ModelInfo, ModelInfo]:
        return self.a, self.b


def model_of(doc: Any) -> ModelInfo | ModelPair:
    """A saved identity's ``model`` as its type: a pair (``{"a": ..., "b": ...}``, both objects) or one model."""
    if isinstance(doc, (ModelInfo, ModelPair)):
        return doc
    if (isinstance(doc, Mapping) and set(doc) == set(SIDES)
            and all(isinstance(doc[s], (Mapping, ModelInfo)) for s in SIDES)):
        return ModelPair.from_json(doc)
    return ModelInfo.from_json(doc)
