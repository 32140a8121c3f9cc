"""Number formats: the forward pass's dtype, the cache's storage dtype, and float32 reads of float16 blocks.

* ``--dtype`` (:data:`FORWARD_DTYPES`) is the dtype the model's weights and forward pass run in;
  the states are cast to float32 before anything else touches them (sentence vectors, maps, cache).
* ``--cache-dtype`` (:data:`CACHE_DTYPES`) is how the states are stored: float16 (default; 2 bytes
  per number: bytes per token per layer = 2 x d) or float32 (exact). A state that float16 cannot
  hold is never stored rounded to inf or to zero: :func:`float16_problem` names it and the
  extraction falls back to float32 for the whole entry (see probes.capture.extract). Float16 cannot
  hold a value beyond +-65504, NaN or inf, nor a state vector (a row: the last axis, d numbers)
  whose root-mean-square is below :data:`FLOAT16_TINY` (6.1e-5, the smallest normal float16) without
  being all zeros: its numbers would become subnormal or zero and lose float16's relative precision.
* :class:`Float32View` is how a float16 array is handed to the analyses: a read-only wrapper whose
  indexing returns float32 copies, so ``acts.hidden[l, a:b]`` is float32 and nothing can compute in
  float16 by accident (``view.mean()`` does not exist; ``np.asarray(view)`` is float32).

Rounding to float16 changes a number by at most 2**-11 of its size (relative error <= 4.9e-4 for
|x| >= 6.1e-5; below that, absolute error <= 2**-25 = 3e-8). So a row x of d numbers is stored with
||round(x) - x|| <= sqrt(2**-22 ||x||**2 + d 2**-50), which is <= sqrt(2) 2**-11 ||x|| exactly when
||x|| / sqrt(d) >= 2**-14 = FLOAT16_TINY: the row rule above keeps every stored state within sqrt(2)
times float16's relative rounding, and states of 1e-9 (all flushed to zero) fall back to float32.

    $ python -c "import numpy as np; from probes.precision import Float32View as V; print(V(np.ones(3, 'f2'))[:2])"
"""

from __future__ import annotations

import math

import numpy as np
import torch

from probes.errors import ProbeError

FORWARD_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CACHE_DTYPES = {"float16": np.float16, "float32": np.float32}
FLOAT16_MAX = float(np.finfo(np.float16).max)  # 65504
FLOAT16_TINY = float(np.finfo(np.float16).smallest_normal)  # 2**-14 = 6.1e-5: smaller numbers are subnormal


def forward_dtype(name: str | torch.dtype | None) -> torch.dtype:
    """The torch dtype called ``name`` (float32 for None); ProbeError for any other name."""
    if name is None:
        return torch.float32
    if isinstance(name, torch.dtype):
        if name not in FORWARD_DTYPES.values():
            raise ProbeError(f"--dtype {name} is not supported (use one of {', '.join(FORWARD_DTYPES)})")
        return name
    if name not in FORWARD_DTYPES:
        raise ProbeError(f"--dtype {name!r} is not one of {', '.join(FORWARD_DTYPES)}")
    return FORWARD_DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    """'float32', 'bfloat16' or 'float16' for a torch dtype."""
    return str(dtype).removeprefix("torch.")


def cache_np_dtype(name: str) -> np.dtype:
    """The numpy storage dtype called ``name``; ProbeError for any other name."""
    if name not in CACHE_DTYPES:
        raise ProbeError(f"--cache-dtype {name!r} is not one of {', '.join(CACHE_DTYPES)}")
    return np.dtype(CACHE_DTYPES[name])


def float16_rows_ok(norms: torch.Tensor, d: int) -> bool:
    """The fast screen of :func:`float16_problem` from the rows' L2 norms (any shape, float32): True when
    every norm is finite, at most FLOAT16_MAX (then no number exceeds it) and either 0 or at least
    ``sqrt(d) * FLOAT16_TINY``. False says only "look closer": :func:`float16_problem` decides."""
    if norms.numel() == 0:
        return True
    low = math.sqrt(d) * FLOAT16_TINY
    # the common case in one reduction (it runs for every layer of every batch): a NaN makes both NaN, and fails
    smallest, largest = torch.aminmax(norms)
    if float(smallest) >= low and float(largest) <= FLOAT16_MAX:
        return True
    # rows of zeros are fine too; a NaN norm fails both comparisons, so it counts as not fine
    fine = (norms == 0) | ((norms >= low) & (norms <= FLOAT16_MAX))
    return bool(fine.all())


def float16_problem(x: np.ndarray | torch.Tensor, what: str) -> str | None:
    """Why the float32 array ``x`` (..., d) cannot be stored as float16, or None: NaN or inf, a number
    beyond +-65504, or a row (the last axis) that is not all zeros but whose root-mean-square is below
    FLOAT16_TINY (its numbers would be stored subnormal or zero, see the module docstring)."""
    t = torch.as_tensor(x)
    if t.numel() == 0:
        return None
    t = t.float()
    if not bool(torch.isfinite(t).all()):
        return f"{what} holds NaN or inf"
    big = float(t.abs().max())
    if big > FLOAT16_MAX:
        return f"{what} holds |x| = {big:.4g} > {FLOAT16_MAX:g}, the largest float16"
    rows = t.reshape(-1, t.shape[-1]) if t.ndim else t.reshape(1, 1)
    rms = torch.linalg.vector_norm(rows, dim=-1) / math.sqrt(rows.shape[-1])
    tiny = (rms > 0) & (rms < FLOAT16_TINY)
    if bool(tiny.any()):
        return (f"{what} has {int(tiny.sum())} of {len(rms)} rows of root-mean-square down to "
                f"{float(rms[tiny].min()):.3g} < {FLOAT16_TINY:.3g}, the smallest normal float16 "
                "(they would be stored as subnormals or zeros)")
    return None


class Float32View:
    """A read-only float32 face of a (memory-mapped) float16 array: ``view[idx]`` is
    ``np.asarray(stored[idx], dtype=np.float32)``, ``np.asarray(view)`` the whole array in float32.
    Only shape-like attributes exist, so no numpy method can run on the float16 numbers."""

    def __init__(self, stored: np.ndarray):
        self.stored = stored  # the float16 array itself (np.memmap when read from the cache)

    shape = property(lambda self: self.stored.shape)
    ndim = property(lambda self: self.stored.ndim)
    size = property(lambda self: self.stored.size)
    dtype = np.dtype(np.float32)  # what every read returns
    stored_dtype = property(lambda self: self.stored.dtype)

    def __getitem__(self, idx) -> np.ndarray:
        return np.asarray(self.stored[idx], dtype=np.float32)

    def __setitem__(self, idx, value):
        raise TypeError("cached float16 activations are read-only (extract with cache_dtype='float32' "
                        "or copy with np.array(...) to modify)")

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("a float32 array of float16 data is always a copy")
        out = np.asarray(self.stored, dtype=np.float32)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __len__(self) -> int:
        return len(self.stored)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Float32View(shape={self.shape}, stored as {self.stored_dtype})"


def float32_face(arr: np.ndarray):
    """``arr`` itself when it is float32, else a :class:`Float32View` of it."""
    return arr if arr.dtype == np.float32 else Float32View(arr)
