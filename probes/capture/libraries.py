"""The library code behind cached states: which releases computed a cache entry, and the check that a hit made under
other releases passes before it is served.

A cache key (:func:`probes.capture.store.cache_key`) covers a model's files, the inputs, the settings and the
suite's own forward code (``FORWARD_VERSION``), not the libraries that run a Hugging Face forward: a key over the
library versions would throw every entry away at each upgrade, although most releases leave the numbers alone. But a
release can change a forward (a default attention implementation, a kernel, a fused activation), so an entry is
never served under other library versions unchecked:

* every entry records the versions of :data:`LIBRARIES` that computed it (``meta["libraries"]``); a result records
  them with its activations (``analyses.common.activations_entry``), so a number says which code made its states;
* a hit whose recorded versions differ from this process's (or an entry written before they were recorded) is
  checked once (by ``probes.capture.extract``, with :func:`compare_states`): the model runs again on one batch of
  the entry's texts, the batch the extraction ran (the same texts, padded together), and the states are compared
  with the stored ones. The same
  arithmetic gives the same bits; otherwise they must agree within :func:`tolerance` of the storage and forward
  dtypes (a release that reorders a sum moves float32 states by ~1e-6, far inside float16's half-ulp). Equal: the
  entry is served, one line says so, and a record beside the cache (``<cache>/.checked/<model>.<key>.json``, tied
  to the entry's checksum) spares later processes the check; the activations say what was checked
  (``meta["libraries_checked"]``). Different: the entry is removed and extracted again: a stale state is never
  served.

transformers' hub kernels (the ``kernels`` package): the decorator that marks activation and norm classes as
replaceable is library code (:mod:`probes.models.patches`), its version is recorded here; a module that a hub kernel
actually replaces (``kernelize``: downloaded code on the instance) is never cached
(:func:`probes.models.encoder.runtime_changes` says so in one line), so an entry is always the libraries' own code.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probes.io import atomic_text, loads_json

# the packages whose code computes a Hugging Face model's states (tokenizers: the token ids the states are of)
LIBRARIES = ("torch", "transformers", "tokenizers", "kernels")
CHECK_FORMAT = 1


@functools.lru_cache(maxsize=1)
def library_versions() -> dict[str, str | None]:
    """{package: installed version, None when it is not installed} for :data:`LIBRARIES` (read once a process)."""
    found: dict[str, str | None] = {}
    for pkg in LIBRARIES:
        try:
            found[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            found[pkg] = None
    return found


def versions_words(versions: dict | None) -> str:
    """``transformers 5.23.0, torch 2.13.0`` (the packages of :data:`LIBRARIES` that are installed)."""
    if not isinstance(versions, dict):
        return "unrecorded library versions"
    return ", ".join(f"{k} {versions.get(k)}" for k in LIBRARIES if versions.get(k) is not None) or "no libraries"


def same_libraries(meta: dict) -> bool:
    """Whether an entry's ``meta`` records the library versions of this process."""
    return meta.get("libraries") == library_versions()


def tolerance(cache_dtype: str, forward_dtype: str) -> float:
    """The relative difference two computations of the same states may show and still be the same states: a few
    units in the last place of the coarser of the storage dtype and the forward dtype (float16 storage: 2 ** -9,
    twice the spacing of float16's mantissa; a bfloat16 forward: 2 ** -6)."""
    eps = max(float(np.finfo(np.float16 if cache_dtype == "float16" else np.float32).eps),
              {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}.get(forward_dtype, 2.0 ** -23))
    return max(2 * eps, 1e-5)  # float32 on both sides: batch reordering alone moves states by ~1e-6


@dataclass(frozen=True)
class StatesCheck:
    """What :func:`compare_states` found: the largest difference of the recomputed states from the stored ones,
    relative to the layer's scale, against the tolerance."""

    texts: int  # how many of the entry's texts were run again
    max_relative: float  # max |fresh - stored| / (|stored| + rms of the layer)
    tolerance: float

    @property
    def equal(self) -> bool:
        return bool(self.max_relative <= self.tolerance)

    def words(self) -> str:
        how = ("bit for bit" if self.max_relative == 0
               else f"to {self.max_relative:.1e} (tolerance {self.tolerance:.0e})")
        return f"{self.texts} texts recomputed, {'equal' if self.equal else 'different'} {how}"


def compare_states(stored, fresh, texts: list[int], tol: float) -> StatesCheck:
    """Compare the stored activations' states of ``texts`` (indices into ``stored``) with ``fresh``, the same
    texts' activations computed now (in that order), after both are rounded to the storage dtype."""
    dtype = np.float16 if stored.meta.get("cache_dtype") == "float16" else np.float32
    worst = 0.0
    for j, t in enumerate(texts):
        pairs = [(stored.hidden[:, stored.offsets[t]:stored.offsets[t + 1]],
                  fresh.hidden[:, fresh.offsets[j]:fresh.offsets[j + 1]]),
                 (stored.sentence[:, t], fresh.sentence[:, j])]
        for old, new in pairs:
            old = np.asarray(old, dtype=np.float32)
            new = np.asarray(new, dtype=np.float32).astype(dtype).astype(np.float32)
            if old.shape != new.shape:
                return StatesCheck(len(texts), float("inf"), tol)
            scale = np.sqrt(np.mean(np.square(new), axis=tuple(range(1, new.ndim)), keepdims=True)) + 1e-30
            gap = np.abs(old - new) / (np.abs(old) + scale)
            worst = max(worst, float(np.nanmax(gap)) if gap.size else 0.0)
            if np.isnan(gap).any() and not (np.isnan(old) == np.isnan(new)).all():
                worst = float("inf")
    return StatesCheck(len(texts), worst, tol)


def record_path(entry: Path) -> Path:
    """Where the check of ``entry`` (``<cache>/<model>/<key>``) under this process's libraries is kept."""
    return entry.parent.parent / ".checked" / f"{entry.parent.name}.{entry.name}.json"


def _entry_digest(entry: Path) -> str | None:
    try:
        return loads_json((entry / "meta.json").read_text(encoding="utf-8"))["checksums"]["doc"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checked_before(entry: Path) -> dict | None:
    """The record of an earlier check of this very entry (its checksum) under this process's library versions
    that found its states equal; None when there is none."""
    try:
        doc = loads_json(record_path(entry).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != CHECK_FORMAT or doc.get("entry") != _entry_digest(entry):
        return None
    for rec in doc.get("checks", []):
        if isinstance(rec, dict) and rec.get("versions") == library_versions() and rec.get("equal") is True:
            return rec
    return None


def remember(entry: Path, check: StatesCheck) -> dict:
    """Record an equal check of ``entry`` under this process's versions (atomically, beside the cache); returns
    what the activations' ``meta["libraries_checked"]`` says."""
    rec = {"versions": library_versions(), "texts": check.texts, "max_relative": check.max_relative,
           "tolerance": check.tolerance, "equal": check.equal}
    path, digest = record_path(entry), _entry_digest(entry)
    try:
        doc = loads_json(path.read_text(encoding="utf-8"))
        checks = doc["checks"] if isinstance(doc, dict) and doc.get("entry") == digest else []
    except (OSError, ValueError, KeyError, TypeError):
        checks = []
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_text(path, json.dumps({"format": CHECK_FORMAT, "entry": digest,
                                  "checks": [*[c for c in checks if isinstance(c, dict)], rec]}))
    return rec
