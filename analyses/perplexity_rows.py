"""The rows a perplexity result saves (:mod:`analyses.perplexity`): one :class:`Row` per (window T, overlap o),
for a recurrent model whether each overlap is the one it was trained with (:class:`TrainedOverlaps`, saved as
``{"<overlap>": true/false}``), and the block bootstrap with its blocks' sums (:class:`BlockSums`). Records read by
attribute, written and read back by :mod:`analyses.records`.

    >>> from analyses import records
    >>> TrainedOverlaps.from_json({"0": False, "16": True}).at(16)
    True
    >>> records.to_json(TrainedOverlaps({0: False, 16: True}))
    {'0': False, '16': True}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analyses import stats
from analyses.records import Malformed, omitted
from probes.errors import ProbeError

PERPLEXITIES = ("token_perplexity", "word_perplexity")  # what a figure may draw


@dataclass(kw_only=True)
class Row:
    """One model's perplexities at window T and overlap o, with their block-bootstrap intervals (absent from files
    written before intervals existed)."""

    model: str
    recurrent: bool
    window: int  # T
    overlap: int  # o
    token_perplexity: float
    word_perplexity: float
    nll_per_token: float
    scored_tokens: int
    words: int
    windows: int  # windows run
    tokens_processed: int  # tokens fed to the model (overlap re-reads)
    flops_per_token: float
    token_perplexity_ci: list[float] | None = omitted()
    word_perplexity_ci: list[float] | None = omitted()
    nll_per_token_ci: list[float] | None = omitted()

    @property
    def setting(self) -> tuple[int, int]:
        """(window T, overlap o)."""
        return self.window, self.overlap

    def perplexity(self, key: str) -> float:
        """The perplexity a figure draws: ``key`` "token_perplexity" or "word_perplexity"."""
        if key not in PERPLEXITIES:
            raise ProbeError(f"key must be one of {', '.join(PERPLEXITIES)}, got {key!r}")
        return self.token_perplexity if key == "token_perplexity" else self.word_perplexity

    def interval(self, key: str) -> list[float] | None:
        """The 95% bootstrap interval over blocks of :meth:`perplexity` ``key`` (None: a file without them)."""
        self.perplexity(key)  # the key's check
        return self.token_perplexity_ci if key == "token_perplexity" else self.word_perplexity_ci


class TrainedOverlaps:
    """A recurrent model's overlaps, each with whether it is the one the model was trained with. Saved as
    ``{"<overlap>": bool}`` (the overlap as text, as JSON keys are)."""

    def __init__(self, by_overlap: Mapping[int, bool]):
        self.by_overlap = {int(o): bool(m) for o, m in by_overlap.items()}

    def at(self, overlap: int) -> bool | None:
        """Whether ``overlap`` is the trained one (None: not evaluated)."""
        return self.by_overlap.get(overlap)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrainedOverlaps) and self.by_overlap == other.by_overlap

    def __repr__(self) -> str:
        return f"TrainedOverlaps({self.by_overlap})"

    def to_json(self) -> dict[str, bool]:
        return {str(o): m for o, m in self.by_overlap.items()}

    @classmethod
    def from_json(cls, doc: Any, where: str = "overlap_matches_training") -> TrainedOverlaps:
        if not isinstance(doc, Mapping) or not all(isinstance(m, bool) for m in doc.values()):
            raise Malformed(f"{where}: a mapping of overlap to true/false, not {doc!r}")
        try:
            return cls({int(o): m for o, m in doc.items()})
        except ValueError as e:
            raise Malformed(f"{where}: an overlap is not a whole number ({e})") from None


@dataclass
class BlockSums(stats.Bootstrap):
    """The block bootstrap of the scored tokens, with what a paired difference resamples: per block its document,
    first target, tokens and words (``blocks``) and, per overlap (as text), the blocks' NLL sums (``nll``); a file
    written before blocks existed has per document its NLL and tokens instead (``documents``)."""

    blocks: dict[str, list] | None = omitted()
    nll: dict[str, list[float]] | None = omitted()
    documents: dict[str, Any] | None = omitted()
