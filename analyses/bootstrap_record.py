"""The ``bootstrap`` block a result saves beside its intervals, as a typed record: how its replicates were drawn
(:func:`analyses.stats.bootstrap_block` and :func:`analyses.blocks.bootstrap` make it; the analyses read it as
``stats.Bootstrap``). Written and read back by the records' codec (:mod:`analyses.records`), its optional keys left
out of the file while None, so a saved block keeps the keys it always had.

    >>> from analyses import records
    >>> b = Bootstrap(resamples=1000, level=0.95, unit="sentence", n_units=40, seed=0)
    >>> b.read_level, records.from_json(Bootstrap, {"resamples": 1000, "level": 0.95, "unit": "block",
    ...                                         "n_units": 25, "seed": 0, "interval_level": 0.96}).read_level
    (0.95, 0.96)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyses.records import omitted


@dataclass
class Bootstrap:
    """The ``bootstrap`` block a result saves beside its intervals: how its replicates were drawn. Read by
    attribute; written and read back by the records' codec (:mod:`analyses.records`), the optional keys left out
    of the file while None. An analysis that saves more beside it (its replicates, per-unit sums) subclasses it."""

    resamples: int
    level: float
    unit: str  # what was resampled: sentence, window, block, context, held-out sentence
    n_units: int
    seed: int
    method: str = "percentile"
    units_id: str | None = omitted()  # the fingerprint of the ordered units (units_id): equal -> paired
    note: str | None = omitted()  # fewer than MIN_UNITS units: the intervals cover less than their level
    # a block bootstrap (analyses.blocks.bootstrap)
    interval_level: float | None = omitted()  # the expanded level its intervals are read at
    block_length: int | None = omitted()
    block_length_of: str | None = omitted()  # what a block's length counts: tokens, windows, held-out blocks
    rule: str | None = omitted()  # the block-length rule in words
    runs: list[int] | None = omitted()  # the first saved unit of each resampled run (grouped)

    @property
    def read_level(self) -> float:
        """The level its replicates are read at: the expanded level of a block bootstrap, else ``level``."""
        return float(self.level if self.interval_level is None else self.interval_level)


@dataclass
class Replicated(Bootstrap):
    """A bootstrap block with the replicates a result keeps beside it: per statistic its (B,) or (B, L+1) values,
    and what they index (e.g. ``layer``). Read by the Result's accessors, which name the statistic."""

    replicates: dict[str, Any] | None = omitted()
