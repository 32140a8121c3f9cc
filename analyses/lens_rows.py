"""The rows a lens result saves (:mod:`analyses.lens`): per layer a :class:`LayerRow` with each lens's
:class:`LensStats` (ce, kl, top1 and their bootstrap intervals), and the :class:`TunedLens` translators it used.
Records read by attribute, written and read back by :mod:`analyses.records`.

    >>> row = LayerRow(layer=0, final=False, logit=LensStats(3.0, [2.9, 3.1], 1.5, [1.4, 1.6], 0.2, [0.1, 0.3]))
    >>> row.lens("logit").of("kl"), row.lens("tuned")
    ((1.5, [1.4, 1.6]), None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyses.records import omitted
from probes.capture.lens import STATS
from probes.errors import ProbeError

__all__ = ["LayerRow", "LensStats", "TunedLens"]


@dataclass
class LensStats:
    """One lens's statistics at one layer, each with its bootstrap interval over windows (None: NaN or inf logits,
    see the result's notes)."""

    ce: float | None
    ce_ci: list[float | None]
    kl: float | None
    kl_ci: list[float | None]
    top1: float | None
    top1_ci: list[float | None]

    def of(self, stat: str) -> tuple[float | None, list[float | None]]:
        """``stat`` ("ce", "kl" or "top1") and its interval."""
        if stat not in STATS:
            raise ProbeError(f"stat must be one of {', '.join(STATS)}, got {stat!r}")
        return (self.ce, self.ce_ci) if stat == "ce" else (self.kl, self.kl_ci) if stat == "kl" else (self.top1,
                                                                                                       self.top1_ci)


@dataclass(kw_only=True)
class LayerRow:
    """Layer l's statistics under each lens, a row of :attr:`Result.layers` (the saved keys, in order)."""

    layer: int  # 0 = embeddings
    final: bool  # l == L: the model's output
    logit: LensStats
    tuned: LensStats | None = omitted()  # with the tuned lens only

    def lens(self, name: str) -> LensStats | None:
        """The ``name`` ("logit" or "tuned") lens's statistics (None: not run)."""
        return self.logit if name == "logit" else self.tuned

    def of(self, name: str) -> LensStats:
        """The statistics of a lens the result ran (a ProbeError for one it did not)."""
        got = self.lens(name)
        if got is None:
            raise ProbeError(f"layer {self.layer} holds no {name} lens statistics")
        return got


@dataclass
class TunedLens:
    """The tuned lens's translators a result used: their key, training settings and split, sha256, what the
    loss is, the per-layer KL at the first and the last training step, and their NaN or inf values."""

    key: str
    settings: dict[str, Any]
    split: dict[str, Any]
    translators_sha256: str
    loss: str
    kl_first_step: list[float | None]
    kl_last_step: list[float | None]
    nonfinite_values: int | None = omitted()  # absent from files written before it was counted
