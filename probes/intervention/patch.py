"""Activation patching: :class:`Patch` replaces a layer's states of an input by those of another input, matched
by the input's token ids or by its row in the batch, at every position or at chosen ones.

The usual layout, one clean prompt patched into several corrupted ones (or one prompt from several sources),
pairs by row: ``Patch.from_activations(corrupted, clean, layer, positions=[-1])`` gives the one clean source to
every target; with as many sources as targets, source i goes to row i. A patch by row counts its positions over the
whole sequence, so patching a prompt and then generating from it patches the prompt positions only.

    $ python -c "from probes.intervention import Patch; print(Patch([[[1.0, 0.0]]]).identity())"
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import torch

from probes.errors import ProbeError
from probes.intervention.edits import Edit, read_only


@dataclass(frozen=True, eq=False)
class Patch(Edit):
    """Replace the states of an input by states taken from another input (activation patching).

    ``sources`` pairs each input of a forward pass with its replacement states in one of two ways:

    * by token ids, a dict {token ids of an input, as the model sees them (special tokens included, no padding):
      its replacement states (n_s, d)}: any batch order or batching works; inputs that tokenize alike are one
      input with one entry, and a generation step with a KV cache (which sees only the new tokens) is refused;
    * by row of the batch, a list of replacement states [(n_s, d), ...]: row i of every forward pass gets source
      i (one source: every row gets it; otherwise a pass must run as many rows as there are sources). ``targets``
      (optional, the token ids of each row's input, or of the inputs one source may go to) is checked in every
      pass, so a batch in another order is an error, not a patch of the wrong row. The positions are the
      prompt's, counted over the whole sequence, so a prompt patched and then generated from (with or without a
      KV cache) has its prompt positions patched and its generated tokens left as the model makes them.

    ``positions``: which real tokens get replaced, the state at position i by the source's state at position i:
    None (every position 0..min(n, n_s)-1 by token ids; every position of the source by row), token indices
    (negative: from the input's end by token ids, from the source's end by row), or a boolean mask of that
    length; a chosen position that the input or its source does not have is an error. A forward pass over an
    input that has no entry is an error (the patch would silently not apply)."""

    sources: Any  # Mapping[tuple[int, ...], (n_s, d)] (by token ids) or a sequence of (n_s, d) (by row)
    positions: Any = None  # None, token indices (k,) or a boolean mask
    targets: Any = None  # by row only: None or a sequence of each row's token ids
    kind: ClassVar[str] = "patch"
    _width: int = field(default=0, init=False)
    _mask_length: int | None = field(default=None, init=False)  # a mask's length: the inputs' length

    def __post_init__(self):
        if isinstance(self.sources, Mapping) and self.sources:
            clean: Any = MappingProxyType({tuple(int(i) for i in k): read_only(v, "replacement states", 2)
                                           for k, v in self.sources.items()})
            states = list(clean.values())
            if self.targets is not None:
                raise ProbeError("a patch keyed by token ids has its targets in its keys: targets= is for a patch "
                                 "by row (a list of sources)")
        elif _states_like(self.sources):
            one = read_only(self.sources, "replacement states", 2) if _is_2d(self.sources) else None
            states = [one] if one is not None else [read_only(v, "replacement states", 2) for v in self.sources]
            clean = tuple(states)
            if self.targets is not None:
                targets = tuple(tuple(int(i) for i in t) for t in self.targets)
                if len(clean) != 1 and len(targets) != len(clean):
                    raise ProbeError(f"a patch by row has {len(clean)} sources and {len(targets)} targets: target "
                                     "i is row i, patched with source i")
                object.__setattr__(self, "targets", targets)
        else:
            raise ProbeError("Patch takes a non-empty dict {input token ids: replacement states (n, d)} or a list "
                             "of replacement states (n, d), one per row of the batch")
        widths = {v.shape[1] for v in states}
        if len(widths) != 1:
            raise ProbeError(f"the replacement states have several widths: {sorted(widths)}")
        object.__setattr__(self, "sources", clean)
        object.__setattr__(self, "_width", widths.pop())
        if self.positions is not None:
            positions, mask_length = _positions(self.positions)
            object.__setattr__(self, "positions", positions)
            object.__setattr__(self, "_mask_length", mask_length)

    @property
    def by_row(self) -> bool:
        """Whether the patch pairs inputs with sources by their row in the batch (else by their token ids)."""
        return not isinstance(self.sources, Mapping)

    @classmethod
    def from_activations(cls, targets, sources, layer: int, positions=None, pair: str | None = None) -> Patch:
        """Text t of ``targets`` (Activations) gets the layer-``layer`` states of text t of ``sources`` (Activations
        of the same model), at ``positions`` (see the class); one source text is given to every target text (one
        clean prompt patched into several corrupted ones). ``pair``: "tokens" (match inputs by their token ids),
        "row" (by their row in the batch, checked against the targets' token ids) or None: by row where the
        token ids cannot tell the pairs apart (one source for every target; one target with several sources),
        else by token ids. Patching the prompt and then generating needs a patch by row."""
        if pair not in (None, "tokens", "row"):
            raise ProbeError(f"pair is 'tokens', 'row' or None, not {pair!r}")
        if sources.n_texts not in (1, targets.n_texts):
            raise ProbeError(f"targets hold {targets.n_texts} texts, sources {sources.n_texts}: text t of one is "
                             "patched with text t of the other, or one source text with every target")
        a, b = _model_of(targets), _model_of(sources)
        if a[1] != b[1]:
            raise ProbeError(f"the sources are states of model {b[0]!r} and the targets of model {a[0]!r} (another "
                             "fingerprint): a patch gives a model its own states of other inputs")
        hidden = sources.layer_hidden(layer)
        src = [np.asarray(hidden[sources.offsets[t]:sources.offsets[t + 1]], np.float64)
               for t in range(sources.n_texts)]
        keys = [tuple(int(i) for i in targets.token_ids[targets.offsets[t]:targets.offsets[t + 1]])
                for t in range(targets.n_texts)]
        if len(src) == 1 and pair != "tokens":
            return cls(src, positions, targets=keys)
        by_key: dict[tuple[int, ...], np.ndarray] = {}
        first: dict[tuple[int, ...], int] = {}
        clash = None
        for t, key in enumerate(keys):
            s = src[0 if len(src) == 1 else t]
            if key in by_key and not np.array_equal(by_key[key], s) and clash is None:
                clash = (first[key], t)
            by_key.setdefault(key, s)
            first.setdefault(key, t)
        if pair == "row" or (pair is None and clash is not None):
            return cls(src, positions, targets=keys)
        if clash is not None:
            raise ProbeError(f"target texts {clash[0]} and {clash[1]} tokenize alike and have different sources: "
                             "matched by token ids a forward pass cannot tell them apart; pair them by row "
                             "(pair='row' or None)")
        return cls(by_key, positions)

    @property
    def width(self) -> int:
        return self._width

    def apply(self, h, batch):
        self._check_width(h)
        if batch.ids is None:
            raise ProbeError("a patch matches inputs by their token ids, and this forward pass was given embeddings")
        if self.by_row:
            return self._apply_by_row(h, batch)
        if batch.before is not None and bool((batch.before > 0).any()):
            raise ProbeError("a patch keyed by token ids sees only the new tokens of a generation step with a KV "
                             "cache: to patch the prompt and generate, pair by row (Patch.from_activations(..., "
                             "pair='row'), or Patch([states, ...]))")
        out = h.clone()
        for row in range(h.shape[0]):
            key = tuple(batch.ids[row][batch.mask[row]].tolist())
            src = self.sources.get(key)
            if src is None:
                raise ProbeError(f"the patch has no states for an input of {len(key)} tokens that this forward pass "
                                 "ran (it covers the inputs it was built for, matched by token ids)")
            where = self._where(len(key), len(src))
            real = torch.nonzero(batch.mask[row]).flatten()[torch.from_numpy(where).to(h.device)]
            out[row, real] = torch.tensor(src[where], dtype=h.dtype, device=h.device)
        return out

    def _apply_by_row(self, h, batch):
        """Row i gets source i (or the one source) at the chosen positions of the whole sequence that fall among
        this pass's real tokens (all of them from position 0 in a full pass; the new ones in a KV-cache step)."""
        rows, k = h.shape[0], len(self.sources)
        if k != 1 and k != rows:
            raise ProbeError(f"the patch pairs source i with row i of the batch: it holds {k} sources and this "
                             f"forward pass ran {rows} rows (one source is given to every row)")
        out = h.clone()
        for row in range(rows):
            src = self.sources[0 if k == 1 else row]
            real = torch.nonzero(batch.mask[row]).flatten()  # this pass's real tokens, in order
            start = 0 if batch.before is None else int(batch.before[row])  # real tokens before this pass
            ids = batch.ids[row][real].tolist()
            self._check_target(row, start, ids)
            wanted = self._source_positions(len(src))
            if start == 0 and len(real) <= wanted.max():
                raise ProbeError(f"patch position {int(wanted.max())}: row {row} has {len(real)} tokens and its "
                                 f"source {len(src)} states")
            here = wanted[(wanted >= start) & (wanted < start + len(real))]
            if len(here):
                at = real[torch.from_numpy(here - start).to(h.device)]
                out[row, at] = torch.tensor(src[here], dtype=h.dtype, device=h.device)
        return out

    def _source_positions(self, n_src: int) -> np.ndarray:
        """The positions of a patch by row, counted from the sequence's start, for a source of n_src states."""
        if self.positions is None:
            return np.arange(n_src)
        if self._mask_length is not None and n_src != self._mask_length:
            raise ProbeError(f"the patch's position mask is for inputs of {self._mask_length} tokens, and its "
                             f"source has {n_src} states")
        where = np.where(self.positions < 0, self.positions + n_src, self.positions)
        bad = (where < 0) | (where >= n_src)
        if bad.any():
            p = int(self.positions[np.flatnonzero(bad)[0]])
            raise ProbeError(f"patch position {p}: its source has {n_src} states")
        return where

    def _check_target(self, row: int, start: int, ids: list[int]) -> None:
        """One error line when row ``row``'s tokens (``ids``, from real position ``start`` on) are not those of its
        target (or, with one source, of any target)."""
        if self.targets is None:
            return
        candidates = self.targets if len(self.sources) == 1 else (self.targets[row],)
        for target in candidates:
            overlap = min(len(target) - start, len(ids))
            if (start > 0 or len(ids) >= len(target)) and (overlap <= 0 or list(target[start:start + overlap])
                                                           == ids[:overlap]):
                return
        which = "any of the patch's targets" if len(self.sources) == 1 else f"target {row}"
        raise ProbeError(f"row {row} of this forward pass is not {which} (by its token ids): a patch by row needs "
                         "the batch in the targets' order")

    def _where(self, n: int, n_src: int) -> np.ndarray:
        """The positions (into the input's n real tokens) replaced in an input whose source has n_src states."""
        if self.positions is None:
            return np.arange(min(n, n_src))
        if self._mask_length is not None and n != self._mask_length:
            raise ProbeError(f"the patch's position mask is for inputs of {self._mask_length} tokens, and an input "
                             f"of {n} tokens ran")
        where = np.where(self.positions < 0, self.positions + n, self.positions)
        bad = (where < 0) | (where >= min(n, n_src))
        if bad.any():
            p = int(self.positions[np.flatnonzero(bad)[0]])
            raise ProbeError(f"patch position {p}: the input has {n} tokens and its source {n_src} states")
        return where

    def settings(self) -> dict:
        out: dict[str, object] = {"inputs": len(self.sources)}
        if self.by_row:
            out["pair"] = "row"
        if self.positions is not None:
            out["positions"] = self.positions.tolist()
            if self._mask_length is not None:
                out["mask_length"] = self._mask_length
        return out

    def arrays(self):
        if self.by_row:
            targets = () if self.targets is None else tuple(np.asarray(t, np.float64) for t in self.targets)
            return (*self.sources, *targets)
        keys = sorted(self.sources)
        return tuple(a for k in keys for a in (np.asarray(k, np.float64), self.sources[k]))


def _is_2d(x) -> bool:
    """Whether ``x`` is one (n, d) array (a tensor or array of two dimensions, or a list of lists of numbers)."""
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return x.ndim == 2
    return bool(x) and not isinstance(x[0][0], (list, tuple, np.ndarray, torch.Tensor))


def _states_like(x) -> bool:
    """Whether ``x`` may be a patch's sources by row: one array or a non-empty sequence of them."""
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return x.ndim in (2, 3) and len(x) > 0
    try:
        return isinstance(x, (list, tuple)) and len(x) > 0 and len(x[0]) > 0 and len(x[0][0]) >= 0
    except TypeError:
        return False


def _positions(x) -> tuple[np.ndarray, int | None]:
    """``positions`` of a :class:`Patch` as read-only int64 indices, and a boolean mask's length (None: indices)."""
    a = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if a.ndim == 0:
        a = a[None]
    if a.ndim != 1 or not len(a):
        raise ProbeError(f"a patch's positions are token indices or a boolean mask (1-D, non-empty), not shape "
                         f"{a.shape}")
    if a.dtype == bool:
        if not a.any():
            raise ProbeError("a patch's position mask selects no position")
        out, length = np.flatnonzero(a).astype(np.int64), len(a)
    elif np.issubdtype(a.dtype, np.integer):
        out, length = a.astype(np.int64), None
    else:
        raise ProbeError(f"a patch's positions are token indices (integers) or a boolean mask, not {a.dtype}")
    out.setflags(write=False)
    return out, length


def _model_of(acts) -> tuple[str, str]:
    """(name, weights' identity) of the model whose states ``acts`` are, as its meta records them."""
    model = acts.meta.get("model") or {}
    name = str(model.get("name", "?"))
    return name, json.dumps(model.get("fingerprint", name), sort_keys=True, default=str)
