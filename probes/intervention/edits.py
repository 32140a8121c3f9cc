"""What an intervention does to one layer's states: each :class:`Edit` maps a batch's states (B, n, d) to new ones.

* :class:`ProjectOut`: remove a subspace, ``x - ((x - c) Q^T) Q`` for an orthonormal basis Q (r, d) of the rows of
  ``basis`` and a centre c (default 0: an orthogonal projection through the origin);
* :class:`Erase`: an affine erasure ``x - ((x - b) R^T) Lf^T``, with ``left`` Lf (d, r) and ``right`` R (r, d): the
  form of LEACE's oblique projection I - Lf R (Belrose et al. 2023) and of any projection stored by its two factors;
* :class:`AddVector`: add ``scale * v`` to every state (a steering vector);
* :class:`Patch`: replace the states with those of other inputs (activation patching), matched by the input's
  token ids: :meth:`Patch.from_activations` pairs text t of one extraction with text t of another;
* :class:`Function`: any Python function of the (B, n, d) states. No key can see what a function does, so
  an extraction under it runs without the activation cache (one warning).

Only the real tokens of a batch are edited (padding is left as the model made it, so an edit never reaches a real
token through padding). Every edit but :class:`Function` has an ``identity()``: its kind, its settings and a
sha256 of its arrays, which the activation cache key and every result record.

    $ python -c "from probes.intervention import ProjectOut; print(ProjectOut([[1.0, 0.0, 0.0]]).identity())"
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from probes.errors import ProbeError


@dataclass(frozen=True)
class Batch:
    """What an edit may need of the forward pass it runs in: the real-token mask and the input ids (B, n), both
    cut to the positions of the states being edited; ``ids`` None when the model was given embeddings."""

    mask: torch.Tensor  # (B, n) bool
    ids: torch.Tensor | None  # (B, n) int64


def _matrix(x, what: str, ndim: int) -> np.ndarray:
    """``x`` as a finite float64 array of ``ndim`` dimensions; one ProbeError line otherwise."""
    a = np.asarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    if a.ndim == 1 and ndim == 2:
        a = a[None]
    if a.ndim != ndim or 0 in a.shape:
        raise ProbeError(f"{what} must be a non-empty {ndim}-D array, not one of shape {a.shape}")
    if not np.isfinite(a).all():
        raise ProbeError(f"{what} holds NaN or inf")
    return a


def _sha256(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a, dtype="<f8")
        h.update(str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


class Edit:
    """Base class: ``apply(h, batch) -> h'`` on (B, n, d) states; ``width`` (d) when the edit fixes it."""

    kind: ClassVar[str] = ""

    @property
    def width(self) -> int | None:
        return None

    def apply(self, h: torch.Tensor, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    def settings(self) -> dict:
        """Scalar settings that the arrays do not hold."""
        return {}

    def arrays(self) -> tuple[np.ndarray, ...]:
        return ()

    def identity(self) -> dict | None:
        """What the cache key and the results record: kind, settings and the arrays' sha256 (None: unknowable)."""
        arrays = self.arrays()
        return {"edit": self.kind, **self.settings(), **({"sha256": _sha256(*arrays)} if arrays else {})}

    def _on(self, a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        """Array ``a`` as a tensor in ``like``'s dtype and device (converted once per dtype and device)."""
        memo: dict = self.__dict__.setdefault("_tensors", {})
        key = (id(a), like.dtype, like.device)
        if key not in memo:
            memo[key] = torch.as_tensor(a, dtype=like.dtype, device=like.device)
        return memo[key]

    def _check_width(self, h: torch.Tensor) -> None:
        if self.width is not None and h.shape[-1] != self.width:
            raise ProbeError(f"{self.kind}: the edit is {self.width} wide, the layer's states {h.shape[-1]}")


@dataclass(frozen=True, eq=False)
class Erase(Edit):
    """x -> x - ((x - bias) right^T) left^T: removes the rank-r part ``left @ right`` (d, d) of the states around
    ``bias`` (LEACE's eraser is ``Erase(W^+ U, U^T W, mean)``; an orthogonal projection has left = right^T)."""

    left: Any  # (d, r)
    right: Any  # (r, d)
    bias: Any = None  # (d,) or None: 0
    kind: ClassVar[str] = "erase"

    def __post_init__(self):
        left, right = _matrix(self.left, "left", 2), _matrix(self.right, "right", 2)
        if left.shape[::-1] != right.shape:
            raise ProbeError(f"left {left.shape} and right {right.shape} must be (d, r) and (r, d)")
        bias = np.zeros(left.shape[0]) if self.bias is None else _matrix(self.bias, "bias", 1)
        if bias.shape != (left.shape[0],):
            raise ProbeError(f"bias must have {left.shape[0]} entries, not {bias.shape}")
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "bias", bias)

    @property
    def width(self) -> int:
        return self.left.shape[0]

    @property
    def rank(self) -> int:
        return self.right.shape[0]

    def matrix(self) -> np.ndarray:
        """(d, d) the linear part of the edit, I - left @ right."""
        return np.eye(self.width) - self.left @ self.right

    def apply(self, h, batch):
        self._check_width(h)
        return h - ((h - self._on(self.bias, h)) @ self._on(self.right, h).T) @ self._on(self.left, h).T

    def apply_numpy(self, x: np.ndarray) -> np.ndarray:
        """The edit of (n, d) states held in memory (float64): what the forward pass computes, for probing."""
        x = np.asarray(x, np.float64)
        return x - ((x - self.bias) @ self.right.T) @ self.left.T

    def settings(self) -> dict:
        return {"rank": self.rank}

    def arrays(self):
        return (self.left, self.right, self.bias)


def ProjectOut(basis, center=None) -> Erase:  # noqa: N802  (an Edit's constructor)
    """Remove the span of the rows of ``basis`` (r, d): an orthogonal projection around ``center`` (default 0)."""
    b = _matrix(basis, "basis", 2)
    q, r = np.linalg.qr(b.T)  # (d, r) orthonormal columns spanning the rows
    keep = np.abs(np.diag(r)) > 1e-10 * max(1.0, float(np.abs(r).max()))
    if not keep.any():
        raise ProbeError("basis spans nothing (its rows are zero)")
    q = q[:, keep]
    return Erase(q, q.T, center)


@dataclass(frozen=True, eq=False)
class AddVector(Edit):
    """x -> x + scale * vector (a steering vector, or a planted direction)."""

    vector: Any  # (d,)
    scale: float = 1.0
    kind: ClassVar[str] = "add"

    def __post_init__(self):
        object.__setattr__(self, "vector", _matrix(self.vector, "vector", 1))
        object.__setattr__(self, "scale", float(self.scale))

    @property
    def width(self) -> int:
        return len(self.vector)

    def apply(self, h, batch):
        self._check_width(h)
        return h + self.scale * self._on(self.vector, h)

    def settings(self) -> dict:
        return {"scale": self.scale}

    def arrays(self):
        return (self.vector,)


@dataclass(frozen=True, eq=False)
class Patch(Edit):
    """Replace the states of an input by states taken from another input (activation patching).

    ``sources``: {token ids of an input, as the model sees them (special tokens included, no padding): its
    replacement states (n_s, d)}. Positions 0..min(n, n_s)-1 of the input are replaced, the rest kept. A forward
    pass over an input that has no entry is an error (the patch would silently not apply)."""

    sources: Any  # dict[tuple[int, ...], array (n_s, d)]
    kind: ClassVar[str] = "patch"
    _width: int = field(default=0, init=False)

    def __post_init__(self):
        if not isinstance(self.sources, dict) or not self.sources:
            raise ProbeError("Patch takes a non-empty dict {input token ids: replacement states (n, d)}")
        clean = {tuple(int(i) for i in k): _matrix(v, "replacement states", 2) for k, v in self.sources.items()}
        widths = {v.shape[1] for v in clean.values()}
        if len(widths) != 1:
            raise ProbeError(f"the replacement states have several widths: {sorted(widths)}")
        object.__setattr__(self, "sources", clean)
        object.__setattr__(self, "_width", widths.pop())

    @classmethod
    def from_activations(cls, targets, sources, layer: int) -> Patch:
        """Text t of ``targets`` (Activations) gets the layer-``layer`` states of text t of ``sources`` (Activations
        of the same model, the same number of texts)."""
        if targets.n_texts != sources.n_texts:
            raise ProbeError(f"targets hold {targets.n_texts} texts, sources {sources.n_texts}: text t of one is "
                             "patched with text t of the other")
        states = sources.layer_hidden(layer)
        out = {}
        for t in range(targets.n_texts):
            key = tuple(int(i) for i in targets.token_ids[targets.offsets[t]:targets.offsets[t + 1]])
            out[key] = np.asarray(states[sources.offsets[t]:sources.offsets[t + 1]], np.float64)
        return cls(out)

    @property
    def width(self) -> int:
        return self._width

    def apply(self, h, batch):
        self._check_width(h)
        if batch.ids is None:
            raise ProbeError("a patch matches inputs by their token ids, and this forward pass was given embeddings")
        out = h.clone()
        for row in range(h.shape[0]):
            key = tuple(batch.ids[row][batch.mask[row]].tolist())
            src = self.sources.get(key)
            if src is None:
                raise ProbeError(f"the patch has no states for an input of {len(key)} tokens that this forward pass "
                                 "ran (it covers the inputs it was built for, matched by token ids)")
            k = min(len(key), len(src))
            real = torch.nonzero(batch.mask[row]).flatten()[:k]
            out[row, real] = torch.as_tensor(src[:k], dtype=h.dtype, device=h.device)
        return out

    def settings(self) -> dict:
        return {"inputs": len(self.sources)}

    def arrays(self):
        keys = sorted(self.sources)
        return tuple(a for k in keys for a in (np.asarray(k, np.float64), self.sources[k]))


@dataclass(frozen=True, eq=False)
class Function(Edit):
    """Any function of the states: ``fn(h) -> h'`` on (B, n, d) (a float tensor on the model's device)."""

    fn: Any
    name: str = ""
    kind: ClassVar[str] = "function"

    def __post_init__(self):
        if not callable(self.fn):
            raise ProbeError(f"Function takes a callable, not {type(self.fn).__name__}")

    def apply(self, h, batch):
        out = self.fn(h)
        if not isinstance(out, torch.Tensor) or out.shape != h.shape:
            raise ProbeError(f"the function {self.label} must return a tensor of the states' shape {tuple(h.shape)}")
        return out

    @property
    def label(self) -> str:
        return self.name or f"{getattr(self.fn, '__module__', '?')}.{getattr(self.fn, '__qualname__', '?')}"

    def identity(self) -> None:
        return None  # what a Python function does is invisible to any key

    def describe(self) -> dict:
        return {"edit": self.kind, "function": self.label}
