"""What an intervention does to one layer's states: each :class:`Edit` maps a batch's states (B, n, d) to new ones.

* :class:`ProjectOut`: remove a subspace, ``x - ((x - c) Q^T) Q`` for an orthonormal basis Q (r, d) of the rows of
  ``basis`` and a centre c (default 0: an orthogonal projection through the origin);
* :class:`Erase`: an affine erasure ``x - ((x - b) R^T) Lf^T``, with ``left`` Lf (d, r) and ``right`` R (r, d): the
  form of LEACE's oblique projection I - Lf R (Belrose et al. 2023) and of any projection stored by its two factors;
* :class:`AddVector`: add ``scale * v`` to every state (a steering vector);
* :class:`~probes.intervention.patch.Patch` (its own module): replace the states with those of other inputs
  (activation patching);
* :class:`Function`: any Python function of the (B, n, d) states. No key can see what a function does, so
  an extraction under it runs without the activation cache (one warning).

An edit's arrays (numpy or torch, of any real dtype) are copied at construction into read-only float64 arrays, so
the array a forward pass applies is always the one its identity hashes: changing the caller's array afterwards
changes nothing, and writing into the edit's own (``edit.vector[:] = 0``) is an error, never a silent change.

Only the real tokens of a batch are edited (padding is left as the model made it, so an edit never reaches a real
token through padding). Every edit but :class:`Function` has an ``identity()``: its kind, its settings and a
sha256 of its arrays, which the activation cache key and every result record. A subclass of :class:`Edit` is
keyed only when the class that defines its ``apply`` also declares its ``kind``, ``settings`` and ``arrays`` (what
``apply`` reads); otherwise its identity is None and it runs uncached, like a :class:`Function`.

    $ python -c "from probes.intervention import ProjectOut; print(ProjectOut([[1.0, 0.0, 0.0]]).identity())"
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from probes.errors import ProbeError


@dataclass(frozen=True)
class Batch:
    """What an edit may need of the forward pass it runs in: the real-token mask and the input ids (B, n), both
    cut to the positions of the states being edited; ``ids`` None when the model was given embeddings; ``before``
    how many real tokens of each row came before these positions (a generation step with a KV cache)."""

    mask: torch.Tensor  # (B, n) bool
    ids: torch.Tensor | None  # (B, n) int64
    before: torch.Tensor | None = None  # (B,) real tokens before these positions (a KV-cache step's past); None: 0


def read_only(x, what: str, ndim: int) -> np.ndarray:
    """``x`` (numpy, torch or nested lists, any real dtype) as a read-only float64 copy of ``ndim`` dimensions, all
    finite; one ProbeError line otherwise. The copy is what the edit applies and what its identity hashes."""
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise ProbeError(f"{what} must hold real numbers, not {x.dtype}")
        x = x.detach().to("cpu", torch.float64).numpy()
    if np.iscomplexobj(x):
        raise ProbeError(f"{what} must hold real numbers, not complex ones")
    try:
        a = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as e:
        raise ProbeError(f"{what} must be an array of real numbers ({' '.join(str(e).split())[:80]})") from None
    if a.ndim == 1 and ndim == 2:
        a = a[None]
    if a.ndim != ndim or 0 in a.shape:
        raise ProbeError(f"{what} must be a non-empty {ndim}-D array, not one of shape {a.shape}")
    if not np.isfinite(a).all():
        raise ProbeError(f"{what} holds NaN or inf")
    a.setflags(write=False)
    return a


def _sha256(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a, dtype="<f8")
        h.update(str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def _owner(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO that defines attribute ``name``."""
    return next(c for c in cls.__mro__ if name in vars(c))


def _keyable(cls: type[Edit]) -> bool:
    """Whether an edit class says everything its ``apply`` reads: the class that defines ``apply`` (or one below it)
    declares a non-empty ``kind``, ``settings`` and ``arrays``."""
    where = _owner(cls, "apply")
    return bool(cls.kind) and all(issubclass(_owner(cls, n), where) for n in ("kind", "settings", "arrays"))


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class Edit:
    """Base class: ``apply(h, batch) -> h'`` on (B, n, d) states; ``width`` (d) when the edit fixes it.

    A subclass that is to be keyed (cached, and told apart from other edits) declares, in the class that defines
    ``apply``: ``kind`` (a name), ``settings()`` (its scalar settings) and ``arrays()`` (its arrays, copied read-only
    at construction, see :func:`read_only`); without them its identity is None (no key can see what it does)."""

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
        """What the cache key and the results record: kind, settings and the arrays' sha256 (None: unknowable, an
        edit whose class does not declare what its ``apply`` reads)."""
        cls = type(self)
        if not _keyable(cls):
            return None
        arrays = self.arrays()
        ours = cls.__module__.startswith("probes.intervention.")
        own = {} if ours else {"class": _class_name(cls)}  # a caller's class: its own entries
        return {"edit": self.kind, **own, **self.settings(), **({"sha256": _sha256(*arrays)} if arrays else {})}

    def describe(self) -> dict:
        """What results record: the identity, or (an edit no key can see) its kind and class."""
        return self.identity() or {"edit": self.kind or "custom", "class": _class_name(type(self))}

    def _on(self, a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        """Array ``a`` as a tensor in ``like``'s dtype and device (converted once per dtype and device)."""
        memo: dict = self.__dict__.setdefault("_tensors", {})
        key = (id(a), like.dtype, like.device)  # ``a`` is one of the edit's read-only arrays: it never changes
        if key not in memo:
            memo[key] = torch.tensor(a, dtype=like.dtype, device=like.device)  # a copy (``a`` is read-only)
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
        left, right = read_only(self.left, "left", 2), read_only(self.right, "right", 2)
        if left.shape[::-1] != right.shape:
            raise ProbeError(f"left {left.shape} and right {right.shape} must be (d, r) and (r, d)")
        bias = np.zeros(left.shape[0]) if self.bias is None else read_only(self.bias, "bias", 1)
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
    b = read_only(basis, "basis", 2)
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
        object.__setattr__(self, "vector", read_only(self.vector, "vector", 1))
        try:
            scale = float(self.scale)
        except (TypeError, ValueError):
            raise ProbeError(f"scale must be a number, not {self.scale!r}") from None
        if not math.isfinite(scale):
            raise ProbeError(f"scale must be finite, not {scale}")
        object.__setattr__(self, "scale", scale)

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
        if not out.is_floating_point():
            raise ProbeError(f"the function {self.label} must return floating-point states, not {out.dtype} (they "
                             "would be cast back to the states' dtype)")
        return out

    @property
    def label(self) -> str:
        return self.name or f"{getattr(self.fn, '__module__', '?')}.{getattr(self.fn, '__qualname__', '?')}"

    def identity(self) -> None:
        return None  # what a Python function does is invisible to any key

    def describe(self) -> dict:
        return {"edit": self.kind, "function": self.label}
