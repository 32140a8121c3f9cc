"""One padded batch of a capture: run the encoder, check what float16 can hold, write the states in place.

A chunk's texts (:class:`ChunkInputs`) run in batches (lists of their indices). :func:`run_batch` builds the
right-padded batch in one vectorised step, runs the encoder, and writes straight into the chunk's part of the
output arrays (``dest``, a :class:`~probes.capture.work.ChunkOut`), in the chunk's text order:

    hidden      # (layers, N_chunk, d): the chunk's tokens (the kept layers only)
    sentence    # (L+1, T_chunk, d)
    map.<name>  # flat, each text's (layers, K, n_t[, n_t]) in turn; only with maps

Layer by layer (each layer's states are read while they are in the CPU's caches; the encoder's layers are never
copied into one tensor), a kept layer's states are checked, rounded once to the storage dtype (by torch), and each
text's real tokens written as one run of rows into the text's rows of the output (in memory a copy; into a cache
entry one positioned write straight into the file: no gather, no staging copy); the layer's sentence vector is
pooled in float32 (:class:`Pooling`). With float16 storage every state, sentence vector and map is checked
(:func:`probes.precision.float16_problem`); one that float16 cannot hold raises :class:`NotFloat16`, and the
capture starts again in float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from probes.capture.work import ChunkOut
from probes.errors import ProbeError
from probes.models.encoder import Encoder, MapSpec
from probes.precision import float16_problem, float16_rows_ok


class NotFloat16(Exception):
    """A captured state does not fit float16 (the message says which and why)."""


@dataclass(frozen=True)
class ChunkInputs:
    """One chunk's texts, flat, with offsets into the chunk's part of the output arrays."""

    lengths: np.ndarray  # (T_c,) tokens per text
    offsets: np.ndarray  # (T_c+1,) rows of dest["hidden"] of each text
    ids: np.ndarray  # (N_c,) int64 token ids, text after text
    special: np.ndarray  # (N_c,) bool
    maps: dict[str, MapSpec]
    map_offsets: dict[str, np.ndarray]  # name -> (T_c+1,) into dest["map.<name>"]
    keep: list[int] | None  # the layers whose token states are kept (None: all)

    @classmethod
    def of(cls, plan, c: int) -> ChunkInputs:
        """Chunk ``c`` of a :class:`~probes.capture.plan.CapturePlan`."""
        a, b = plan.chunks[c].start, plan.chunks[c].stop
        lo, hi = int(plan.offsets[a]), int(plan.offsets[b])
        return cls(plan.lengths[a:b], plan.offsets[a:b + 1] - lo, plan.token_ids[lo:hi], plan.special[lo:hi],
                   plan.maps, {m: o[a:b + 1] - o[a] for m, o in plan.map_offsets.items()}, plan.keep)


@torch.inference_mode()  # the encoders return inference tensors
def run_batch(encoder: Encoder, chunk: ChunkInputs, idx: np.ndarray, dest: ChunkOut) -> dict[str, int]:
    """Run texts ``idx`` of ``chunk`` as one right-padded batch and write their states through ``dest``.
    Returns how many states hold NaN or inf, per array and layer ({"hidden layer 3": 12}; with float32
    storage: with float16 storage they raise NotFloat16 and the capture goes on in float32)."""
    # the padded batch in one step: row r holds text idx[r]; dst = each real token's row in the chunk
    lengths = chunk.lengths[idx]
    n = int(lengths.max())
    mask_np = np.arange(n)[None, :] < lengths[:, None]  # (B, n)
    dst = (chunk.offsets[idx][:, None] + np.arange(n)[None, :])[mask_np]  # (R,) row-major = text order
    ids_np = np.full((len(idx), n), encoder.pad_id, dtype=np.int64)
    ids_np[mask_np] = chunk.ids[dst]
    special_np = np.zeros((len(idx), n), dtype=bool)
    special_np[mask_np] = chunk.special[dst]
    mask = torch.from_numpy(mask_np)
    out = encoder.forward(torch.from_numpy(ids_np), mask.long(), maps=bool(chunk.maps))
    hidden: torch.Tensor | Sequence[torch.Tensor] = out.hidden  # L+1 of (B, n, d): one per layer, or stacked
    if len(hidden) != encoder.num_layers + 1:
        raise ProbeError(f"model '{encoder.name}' returned {len(hidden)} hidden states, not "
                         f"{encoder.num_layers + 1} (the embeddings and every layer)")
    dev = hidden[0].device
    f16 = dest.sentence.dtype == np.float16
    B, d = len(idx), hidden[0].shape[-1]
    flat_mask = mask.reshape(-1).to(dev)  # (B n,) the real tokens in the flat batch
    pool = Pooling(encoder, hidden, mask.to(dev), torch.from_numpy(special_np).to(dev), lengths, out.sentence)
    row_of = {layer: j for j, layer in enumerate(range(len(hidden)) if chunk.keep is None else chunk.keep)}
    # each text's real tokens are one run of rows in the padded batch (from r n on) and one in the chunk's arrays
    runs = list(zip((np.arange(B) * n).tolist(), chunk.offsets[idx].tolist(), lengths.tolist()))
    bad: dict[str, int] = {}
    for layer in range(len(hidden)):  # layer by layer: each layer's states are read while they are in the caches
        x = hidden[layer].reshape(B * n, d)
        if layer not in row_of:
            pool.add(x)
            continue
        x = x.float()  # float32 states: no copy
        if f16:
            if not float16_rows_ok(torch.linalg.vector_norm(x, dim=-1)[flat_mask], d):
                _refuse(x[flat_mask], f"a hidden state of layer {layer}")
            # rounded once, padding too (cheaper than gathering the real tokens first), then copied run by run
            dest.runs("hidden", row_of[layer], x.to(torch.float16).cpu().numpy(), runs)
        else:
            if not bool(torch.isfinite(x.sum())):  # a screen (padding included); the count is of real tokens
                _tally(bad, f"hidden layer {layer}", x[flat_mask])
            dest.runs("hidden", row_of[layer], x.cpu().numpy(), runs)  # copied before the means change x
        pool.add(x)  # the means zero x's left-out rows in place
    s = pool.vectors().cpu()  # (L+1, B, d) float32
    if f16:
        if not float16_rows_ok(torch.linalg.vector_norm(s, dim=-1), d):  # the fast screen, then the check
            _refuse(s, "a sentence vector")
    elif not bool(torch.isfinite(s).all()):
        for layer in range(len(s)):
            _tally(bad, f"sentence layer {layer}", s[layer])
    dest.sentence[:, idx] = s.to(torch.float16 if f16 else torch.float32).numpy()
    if chunk.maps:
        _write_maps(out, chunk, idx, dest, f16)
    return bad


def _tally(bad: dict[str, int], what: str, rows: torch.Tensor) -> None:
    """Count the rows (states) of ``rows`` (k, d) that hold NaN or inf into ``bad[what]``."""
    n = int((~torch.isfinite(rows)).any(-1).sum())
    if n:
        bad[what] = bad.get(what, 0) + n


def _refuse(x: torch.Tensor, what: str) -> None:
    """NotFloat16 when float16 cannot hold ``x`` (float32, rows on the last axis)."""
    if (why := float16_problem(x, what)) is not None:
        raise NotFloat16(why)


class Pooling:
    """The sentence vector of every layer of one padded batch, one layer at a time (:meth:`add`), in float32.
    mask, special: (B, n) bool; lengths: (B,) real tokens per text; model_sentence: (L+1, B, d) the model's own
    sentence node (S-LSTM's g), or None.

    ``mean`` and ``mean_all`` sum each layer's (B, n, d) states with zeros where a token does not count, as over
    the masked batch: the rows left out are zeroed in place in the encoder's output (its tensors are the capture's,
    :class:`~probes.models.encoder.EncoderOutput`), or in a copy where two layers share memory."""

    def __init__(self, encoder: Encoder, hidden: torch.Tensor | Sequence[torch.Tensor], mask: torch.Tensor,
                 special: torch.Tensor, lengths: np.ndarray, model_sentence: torch.Tensor | None):
        self.kind = encoder.spec.sentence
        self.out: list[torch.Tensor] = []  # (B, d) per layer pooled so far
        self.model_sentence = model_sentence
        if self.kind == "g" and model_sentence is None:
            raise ProbeError(f"model '{encoder.name}' is registered with sentence: g but returns no sentence node")
        B, n = mask.shape
        self.rows = torch.arange(B, device=mask.device) * n  # (B,) each text's first position in the flat batch
        if self.kind == "last":
            self.rows = self.rows + torch.from_numpy(lengths - 1).to(mask.device)
        if self.kind in ("mean", "mean_all"):
            if self.kind == "mean_all":  # every real token, special tokens included (sentence-transformers' mean)
                keep = mask  # (B, n)
            else:  # real, non-special tokens; all real tokens if a text has none
                keep = mask & ~special
                keep = torch.where(keep.any(1, keepdim=True), keep, mask)  # (B, n)
            self.count = keep.sum(1, dtype=torch.float32)[:, None]  # (B, 1)
            self.left_out = torch.nonzero(~keep.reshape(-1)).flatten()  # (B n) positions that do not count: zeroed
            # zeroing in place is safe unless two layers share memory (an encoder returning one tensor twice)
            self.shared = not isinstance(hidden, torch.Tensor) and len({h.data_ptr() for h in hidden}) < len(hidden)
        self.n = n

    def add(self, x: torch.Tensor) -> None:
        """Pool the next layer's states ``x`` (B n, d), the encoder's tensor or its float32 copy (the means change
        a float32 ``x`` in place)."""
        if self.kind in ("cls", "last"):
            self.out.append(x.index_select(0, self.rows).float())  # (B, d)
        elif self.kind in ("mean", "mean_all"):
            x = x.clone() if self.shared and x.dtype == torch.float32 else x.float()  # float(): a copy, or x itself
            x.index_fill_(0, self.left_out, 0.0)
            self.out.append(x.view(-1, self.n, x.shape[-1]).sum(1) / self.count)  # (B, d)

    def vectors(self) -> torch.Tensor:
        """(L+1, B, d) float32."""
        if self.kind == "g":
            return cast("torch.Tensor", self.model_sentence).float()
        return torch.stack(self.out)


def _write_maps(out, chunk: ChunkInputs, idx: np.ndarray, dest: ChunkOut, f16: bool) -> None:
    """Each text's maps, padding cut off, into its run of the flat map arrays."""
    batch_maps = {m: (out.attentions if m == "attention" else out.maps[m]).float().cpu() for m in chunk.maps}
    if f16:
        for m, v in batch_maps.items():
            _refuse(v, f"map {m}")
    for m, spec in chunk.maps.items():
        offsets, v = chunk.map_offsets[m], batch_maps[m].to(torch.float16 if f16 else torch.float32)
        for r, i in enumerate(idx):
            # (layers, B, K, n[, n]) -> this text's (layers, K, n_i[, n_i])
            cut = v[:, r][(slice(None), slice(None)) + (slice(0, int(chunk.lengths[i])),) * spec.token_axes]
            dest.run(f"map.{m}", int(offsets[i]), cut.contiguous().numpy())
