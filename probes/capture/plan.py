"""The plan of one capture: what an extraction writes where, decided once before the model runs.

:class:`CapturePlan` holds the tokenised inputs, their token offsets, the maps to capture with their offsets,
the layers whose token states are kept, the shapes of the output arrays and the chunks (consecutive runs of
texts whose captured arrays fit the chunk budget: the unit of resuming and of sharding). Everything else of a
capture (the batches, the files) reads it; nothing changes it after :meth:`CapturePlan.build`.

    hidden[:, offsets[t]:offsets[t+1]]       # text t's token states, every kept layer
    maps[m][map_offsets[m][t]:map_offsets[m][t+1]]   # text t's map m, flat (layers, K, n_t[, n_t])
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from itertools import chain

import numpy as np
import torch

from probes.capture import distributed, libraries
from probes.capture.activations import Activations, kept_layers
from probes.capture.store import CACHE_FORMAT
from probes.capture.work import Spans
from probes.errors import ProbeError
from probes.models.encoder import Encoder, MapSpec, Tokenized


@dataclass(frozen=True)
class CapturePlan:
    """What one extraction writes: inputs, offsets, maps, kept layers, array shapes and chunks."""

    inputs: list  # the texts, or token-id lists, as given
    toks: list[Tokenized]  # (T,) after the length limit (see ``cut``)
    cut: list[int]  # the texts that were truncated
    lengths: np.ndarray  # (T,) int64 tokens per text
    offsets: np.ndarray  # (T+1,) int64: text t owns tokens offsets[t]:offsets[t+1]
    token_ids: np.ndarray  # (N,) int64, every text's ids in turn
    special: np.ndarray  # (N,) bool, True for special tokens
    maps: dict[str, MapSpec]  # the maps captured (empty without maps=True)
    map_offsets: dict[str, np.ndarray]  # name -> (T+1,) int64 into the flat map
    keep: list[int] | None  # the layers whose token states are kept (None: every layer 0..L)
    shapes: dict[str, tuple]  # "hidden" (layers, N, d), "sentence" (L+1, T, d), "map.<name>" (total,)
    chunks: list[range]  # consecutive runs of texts, each within the chunk budget (at least one text)

    @classmethod
    def build(cls, encoder: Encoder, inputs: list, settings: dict, chunk_bytes: int) -> CapturePlan:
        """Tokenise ``inputs`` (the length limit as ``settings["truncate"]`` says) and plan the arrays and the
        chunks of at most ``chunk_bytes`` of float32 states each."""
        toks, cut = prepare(encoder, inputs, settings["truncate"])
        L, d = encoder.num_layers, encoder.hidden_size
        maps = capture_maps(encoder, settings["attentions"])
        lengths = np.array([len(t.ids) for t in toks], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        map_offsets = {m: np.concatenate([[0], np.cumsum(map_sizes(spec, lengths))]) for m, spec in maps.items()}
        keep = kept_layers(settings.get("layers"), L)
        layers = L + 1 if keep is None else len(keep)
        shapes = {"hidden": (layers, int(offsets[-1]), d), "sentence": (L + 1, len(toks), d),
                  **{f"map.{m}": (int(o[-1]),) for m, o in map_offsets.items()}}
        per_text = 4 * (layers * d * lengths + (L + 1) * d + sum(map_sizes(spec, lengths) for spec in maps.values()))
        token_ids = np.fromiter(chain.from_iterable(t.ids for t in toks), np.int64, int(offsets[-1]))
        special = np.fromiter(chain.from_iterable(t.special for t in toks), bool, int(offsets[-1]))
        return cls(inputs, toks, cut, lengths, offsets, token_ids, special, maps, map_offsets, keep, shapes,
                   split_chunks(per_text, chunk_bytes))

    @property
    def n_texts(self) -> int:
        return len(self.toks)

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    def spans(self, c: int) -> Spans:
        """Chunk ``c``'s part of each output array along its chunk axis."""
        a, b = self.chunks[c].start, self.chunks[c].stop
        return {"hidden": (int(self.offsets[a]), int(self.offsets[b])), "sentence": (a, b),
                **{f"map.{m}": (int(o[a]), int(o[b])) for m, o in self.map_offsets.items()}}

    def record(self, c: int) -> dict:
        """What done.json says of chunk ``c`` besides its batch size and checksum."""
        a, b = self.chunks[c].start, self.chunks[c].stop
        return {"texts": b - a, "tokens": int(self.offsets[b] - self.offsets[a])}

    def texts(self, encoder: Encoder) -> list[str]:
        """The texts, as given or decoded from the token ids."""
        if isinstance(self.inputs[0], str):
            return list(self.inputs)
        return [encoder.tokenizer.decode(i) for i in self.inputs]

    def meta(self, encoder: Encoder, settings: dict, key: str, done: dict, state) -> dict:
        """The activations' ``meta``: model, settings, inputs, padding, batch sizes, storage (``state``)."""
        sizes = sorted({done[c]["batch_size"] for c in done})
        return {
            "format": CACHE_FORMAT, "key": key, "model": encoder.describe(), **settings,
            "inputs": "texts" if isinstance(self.inputs[0], str) else "token ids (special tokens added by the model)",
            "n_texts": self.n_texts, "n_tokens": self.n_tokens, "truncated_texts": self.cut,
            "maps": {m: asdict(spec) for m, spec in self.maps.items()},
            **({"hidden_layers": self.keep} if self.keep is not None else {}),
            "padding": ("right, masked; sorted by length within chunks" if encoder.padding_safe
                        else "none: only inputs of equal length share a batch (the encoder is not padding-safe)"),
            # the batch size that produced the states (they differ by ~1e-6 between batch sizes); a list,
            # one per chunk, when a resumed extraction used several
            "batch_size": sizes[0] if len(sizes) == 1 else [done[c]["batch_size"] for c in sorted(done)],
            "torch": torch.__version__, "libraries": libraries.library_versions(),
            "processes": distributed.world_size(),
            "device": str(encoder.device), **({"device_map": encoder.device_map} if encoder.device_map else {}),
            "cache_dtype_requested": settings["cache_dtype"],
            "cache_dtype": state.dtype, **({"cache_dtype_fallback": state.fallback} if state.fallback else {}),
            **({"nonfinite_states": bad} if (bad := nonfinite(done)) else {}),
        }

    def activations(self, encoder: Encoder, meta: dict, arrays: dict) -> Activations:
        """The :class:`Activations` of the plan's texts over the finished ``arrays``."""
        return Activations(
            meta=meta, texts=self.texts(encoder), tokens=[t.tokens for t in self.toks], offsets=self.offsets,
            token_ids=self.token_ids, special=self.special,
            hidden=arrays["hidden"], sentence=arrays["sentence"],
            maps={m: arrays[f"map.{m}"] for m in self.maps}, map_offsets=self.map_offsets, hidden_layers=self.keep,
        )


def nonfinite(done: dict) -> dict[str, int]:
    """How many states hold NaN or inf, per array and layer ({"hidden layer 3": 12, "sentence layer 3": 2}),
    summed over the chunks' records; empty when every state is finite."""
    total: dict[str, int] = {}
    for rec in done.values():
        for k, v in rec.get("nonfinite", {}).items():
            total[k] = total.get(k, 0) + int(v)
    return dict(sorted(total.items(), key=lambda kv: (kv[0].split()[0], int(kv[0].split()[-1]))))


def prepare(encoder: Encoder, inputs: list, truncate: bool) -> tuple[list[Tokenized], list[int]]:
    """Tokenize (or add special tokens to id inputs), then enforce the length limit."""
    texts = isinstance(inputs[0], str)
    toks = encoder.tokenize(inputs) if texts else encoder.tokenize_ids(inputs)
    cut = []
    for i, tk in enumerate(toks):
        if len(tk.ids) == 0:
            raise ProbeError(f"text {i} gives no tokens for model '{encoder.name}' (empty text?)")
        if len(tk.ids) <= encoder.max_length:
            continue
        if not truncate:
            raise ProbeError(
                f"text {i} is {len(tk.ids)} tokens long, longer than model '{encoder.name}' allows "
                f"({encoder.max_length}); shorten it (e.g. a lower --max-words) "
                "or call probes.extract(..., truncate=True)")
        keep = encoder.max_length - 1 if tk.special[-1] else encoder.max_length
        sel = list(range(keep)) + ([len(tk.ids) - 1] if tk.special[-1] else [])
        toks[i] = Tokenized([tk.ids[j] for j in sel], [tk.special[j] for j in sel], [tk.tokens[j] for j in sel])
        cut.append(i)
    if cut:
        warnings.warn(f"{len(cut)} of {len(inputs)} texts were longer than {encoder.max_length} tokens "
                      f"and were truncated (recorded in the activations' meta)", stacklevel=5)
    # (stops at the first text that differs from the first: one comparison for nearly every input)
    if len(toks) > 1 and all(t.ids == toks[0].ids for t in toks) and len(set(map(str, inputs))) > 1:
        warnings.warn(f"the {len(toks)} texts all give the same tokens ({' '.join(toks[0].tokens[:8])}"
                      f"{' ...' if len(toks[0].tokens) > 8 else ''}) for model '{encoder.name}' (characters its "
                      "tokenizer drops or cannot read?): every statistic across them compares one input with "
                      "itself", stacklevel=5)
    return toks, cut


def split_chunks(bytes_per_text: np.ndarray, chunk_bytes: int) -> list[range]:
    """Consecutive ranges of texts whose captured arrays fit in ``chunk_bytes`` (at least one text each)."""
    out, start, used = [], 0, 0
    for i, cost in enumerate(bytes_per_text.tolist()):
        if i > start and used + cost > chunk_bytes:
            out.append(range(start, i))
            start, used = i, 0
        used += cost
    out.append(range(start, len(bytes_per_text)))
    return out


def map_sizes(spec: MapSpec, lengths: np.ndarray) -> np.ndarray:
    """(T,) number of floats of each text's map."""
    return spec.layers * spec.k * lengths.astype(np.int64) ** spec.token_axes


def capture_maps(encoder: Encoder, maps: bool) -> dict[str, MapSpec]:
    """The maps ``maps=True`` captures: softmaxed attention (if the encoder has it) and the encoder's own."""
    if not maps:
        return {}
    att = {"attention": MapSpec(encoder.num_layers, encoder.num_heads, 2, "softmaxed self-attention")}
    return {**(att if encoder.has_attention else {}), **encoder.map_specs()}
