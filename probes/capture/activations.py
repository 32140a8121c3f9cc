"""The :class:`Activations` every analysis reads: every layer's states for a list of texts.

Texts are ragged, so per-token arrays are concatenated along the token axis and ``offsets`` marks where
each text starts:

    hidden[l, offsets[t]:offsets[t+1]]   # (n_t, d): text t at layer l

Read a layer with :meth:`Activations.layer_hidden` (it knows which layers an ``extract(..., layers=...)`` kept).
They are made by :func:`probes.capture.extract.extract` and read back from the cache by
:func:`probes.capture.store.read_entry`.

    $ python -c "import probes; a = probes.extract('tiny-bert', ['A text.', 'Another one.']); print(a)"
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from probes.errors import ProbeError
from probes.precision import Float32View


@dataclass
class Activations:
    """Every layer's states for a list of texts, on CPU, as numpy arrays.

    Token axis N = total tokens over all texts (special tokens included, padding never).
    """

    meta: dict  # model description, capture settings, cache key
    texts: list[str]  # (T,)
    tokens: list[list[str]]  # (T, n_t) token strings
    offsets: np.ndarray  # (T+1,) int64; text t owns tokens offsets[t]:offsets[t+1]
    token_ids: np.ndarray  # (N,) int64
    special: np.ndarray  # (N,) bool, True for special tokens
    # float32 arrays, or Float32View (read-only, float32 reads) over float16 storage; memory-mapped from the cache
    hidden: np.ndarray | Float32View  # (L+1, N, d); (len(hidden_layers), N, d) when only some layers are kept
    sentence: np.ndarray | Float32View  # (L+1, T, d); the model's sentence vector at every layer
    maps: dict[str, np.ndarray | Float32View] = field(default_factory=dict)  # name -> flat, text by text
    map_offsets: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (T+1,) int64 into maps[name]
    hidden_layers: list[int] | None = None  # the layers hidden holds, in order (None: every layer 0..L)

    @property
    def n_texts(self) -> int:
        return len(self.texts)

    @property
    def n_layers(self) -> int:
        """L, the number of layers (hidden has L+1 entries: the embeddings, then each layer)."""
        return self.sentence.shape[0] - 1  # sentence vectors are kept for every layer

    def text_index(self) -> np.ndarray:
        """(N,) the text each token belongs to."""
        return np.repeat(np.arange(self.n_texts), np.diff(self.offsets))

    def layer_hidden(self, layer: int, rows=None) -> np.ndarray | Float32View:
        """(N, d) every token's state at ``layer`` (0 = embeddings, -1 = last), or only the token ``rows``
        (a slice or index array: only those are read); ProbeError if the extraction kept only other
        layers (``extract(..., layers=...)``)."""
        lyr = layer_index(layer, self.n_layers)
        if self.hidden_layers is not None:
            if lyr not in self.hidden_layers:
                raise ProbeError(f"these activations keep the states of layers {self.hidden_layers} only, "
                                 f"not {lyr}")
            lyr = self.hidden_layers.index(lyr)
        return self.hidden[lyr] if rows is None else self.hidden[lyr, rows]

    def text_hidden(self, t: int) -> np.ndarray:
        """(L+1, n_t, d) the states of text t (only the kept layers, see ``hidden_layers``)."""
        return np.asarray(self.hidden[:, self.offsets[t]:self.offsets[t + 1]])

    def text_map(self, name: str, t: int) -> np.ndarray:
        """Text t's map ``name``: (layers, K, n_t, n_t), or (layers, K, n_t) for per-token maps.
        "attention" is the softmaxed attention; encoders may add others (see ``meta["maps"]``)."""
        if name not in self.maps:
            have = ", ".join(self.maps) or "none (captured with maps=False)"
            raise ProbeError(f"no map '{name}' in these activations; maps: {have}")
        spec = self.meta["maps"][name]
        n = int(self.offsets[t + 1] - self.offsets[t])
        flat = self.maps[name][self.map_offsets[name][t]:self.map_offsets[name][t + 1]]
        return np.asarray(flat).reshape(spec["layers"], spec["k"], *([n] * spec["token_axes"]))

    def text_attentions(self, t: int) -> np.ndarray:
        """(L, H, n_t, n_t) the attention maps of text t."""
        return self.text_map("attention", t)

    @property
    def attentions(self) -> np.ndarray | Float32View | None:
        """All attention maps, flat (text t's (L, H, n_t, n_t) at map_offsets["attention"][t])."""
        return self.maps.get("attention")

    def __repr__(self) -> str:
        return (f"Activations(model={self.meta['model']['name']!r}, texts={self.n_texts}, "
                f"tokens={len(self.token_ids)}, layers={self.n_layers}+1, d={self.sentence.shape[-1]}, "
                f"maps={list(self.maps) or None})")


def layer_index(layer: int, L: int, what: str = "") -> int:
    """``layer`` as an index in 0..L (negative counts from the end: -1 = L); ProbeError if out of range."""
    index = layer + L + 1 if layer < 0 else layer
    if not 0 <= index <= L:
        raise ProbeError(f"{what or f'layer {layer}'} is out of range for a model with {L} layers (0..{L}, or -1)")
    return index


def kept_layers(layers: list[int] | None, L: int) -> list[int] | None:
    """The sorted distinct layer indices in 0..L that ``layers`` names (-1 = L), or None for all."""
    if layers is None:
        return None
    return sorted({layer_index(x, L, f"layer {x} of layers {layers}") for x in layers})
