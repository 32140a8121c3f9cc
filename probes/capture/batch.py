"""One padded batch of a capture: run the encoder, check what float16 can hold, write the states in place.

A chunk's texts (:class:`ChunkInputs`) run in batches (lists of their indices). :func:`run_batch` builds the
right-padded batch in one vectorised step, runs the encoder, and writes straight into the chunk's part of the
output arrays (``dest``, a :class:`~probes.capture.work.ChunkOut`), in the chunk's text order:

    hidden      # (layers, N_chunk, d): the chunk's tokens (the kept layers only)
    sentence    # (L+1, T_chunk, d)
    map.<name>  # flat, each text's (layers, K, n_t[, n_t]) in turn; only with maps

Per kept layer the real tokens are gathered once, rounded once to the storage dtype (by torch) and written
into their rows; no copy of all layers is made. Sentence vectors are pooled in float32, after that, from the
encoder's stacked states with the left-out rows zeroed in place (a sequence of per-layer tensors is copied
first, one layer at a time). With float16 storage every state, sentence
vector and map is checked (:func:`probes.precision.float16_problem`); one that float16 cannot hold raises
:class:`NotFloat16`, and the capture starts again in float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
    """One chunk's texts, flat, with offsets into the chunk's staged arrays."""

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
    hidden: torch.Tensor | Sequence[torch.Tensor] = out.hidden  # (L+1, B, n, d), stacked or one tensor per layer
    if len(hidden) != encoder.num_layers + 1:
        raise ProbeError(f"model '{encoder.name}' returned {len(hidden)} hidden states, not "
                         f"{encoder.num_layers + 1} (the embeddings and every layer)")
    dev = hidden[0].device
    mask_d, special_d = mask.to(dev), torch.from_numpy(special_np).to(dev)
    f16 = dest.sentence.dtype == np.float16
    store = torch.float16 if f16 else torch.float32
    B, d = len(idx), hidden[0].shape[-1]
    real = torch.from_numpy(np.flatnonzero(mask_np)).to(dev)  # (R,) the real tokens in the flat (B n) batch
    bad: dict[str, int] = {}
    for j, layer in enumerate(range(len(hidden)) if chunk.keep is None else chunk.keep):
        x = hidden[layer].float()  # (B, n, d); float32 states: no copy
        if f16 and not float16_rows_ok(torch.linalg.vector_norm(x, dim=-1)[mask_d], d):
            _refuse(x[mask_d], f"a hidden state of layer {layer}")
        # one gather of the real tokens, rounded once to the storage dtype, written into their rows
        rows = x.reshape(B * n, d).to(store).index_select(0, real).cpu()  # (R, d)
        if not f16 and not bool(torch.isfinite(rows.sum())):
            _tally(bad, f"hidden layer {layer}", rows)
        dest.rows("hidden", j, rows.numpy(), dst)
    s = sentence_vectors(encoder, hidden, mask_d, special_d, torch.as_tensor(lengths).to(dev),
                         out.sentence).cpu()  # (L+1, B, d) float32
    if f16:
        _refuse(s, "a sentence vector")
    elif not bool(torch.isfinite(s).all()):
        for layer in range(len(s)):
            _tally(bad, f"sentence layer {layer}", s[layer])
    torch.from_numpy(dest.sentence).index_copy_(1, torch.from_numpy(idx), s.to(store))
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


def sentence_vectors(encoder: Encoder, hidden: torch.Tensor | Sequence[torch.Tensor], mask: torch.Tensor,
                     special: torch.Tensor, lengths: torch.Tensor, model_sentence: torch.Tensor | None) -> torch.Tensor:
    """(L+1, B, d) float32 sentence vector per layer. hidden: L+1 of (B, n, d); mask, special (B, n) bool.
    Mean pooling zeroes, in place, the rows it leaves out of a stacked float32 ``hidden`` (an encoder's stacked
    output is the caller's to use: call this after the token states are stored); a sequence of per-layer
    tensors (they may be the model's own) or other dtypes are copied first."""
    kind = encoder.spec.sentence
    if kind == "g":
        if model_sentence is None:
            raise ProbeError(f"model '{encoder.name}' is registered with sentence: g but returns no sentence node")
        return model_sentence.float()
    if kind == "cls":
        return torch.stack([h[:, 0].float() for h in hidden])
    if kind == "last":
        rows = torch.arange(len(lengths), device=lengths.device)
        return torch.stack([h[rows, lengths - 1].float() for h in hidden])
    keep = mask & ~special  # mean over real, non-special tokens; all real tokens if a text has none
    keep = torch.where(keep.any(1, keepdim=True), keep, mask)  # (B, n)
    count = keep.sum(1, dtype=torch.float32)[:, None]  # (B, 1)
    B, n, d = hidden[0].shape
    left_out = torch.nonzero(~keep.reshape(-1)).flatten()  # (B n) positions that do not count: zeroed
    own = isinstance(hidden, torch.Tensor) and hidden.dtype == torch.float32  # ours to change in place
    scratch = None if own else torch.empty((B * n, d), dtype=torch.float32, device=hidden[0].device)
    out = []
    for h in hidden:  # the sum over the batch with zeros where a token does not count, as over the masked batch
        x = h.reshape(B * n, d) if scratch is None else scratch.copy_(h.reshape(B * n, d))
        x.index_fill_(0, left_out, 0.0)
        out.append(x.view(B, n, d).sum(1) / count)
    return torch.stack(out)


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
