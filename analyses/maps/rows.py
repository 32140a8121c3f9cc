"""The rows of a maps result, read by attribute: an example sentence (:class:`Example`), and one summary per map
kind, told apart by ``token_axes``: :class:`PairMap` (2: token pairs, attention and kernels), :class:`TokenMap` (1:
per token, the S-LSTM's gates and sentence-node weights) or :class:`SkippedMap` (0: not summarised, and why);
:class:`Maps` holds them by map name. Written and read by the one codec (:mod:`analyses.records`); the saved keys
are the fields' names, as the files have always had them. Arrays (numpy while computed, nested lists once read
back) are typed :data:`Array`.

    >>> Maps.from_json({"conv_kernel": {"token_axes": 0, "skipped": "no offsets"}})["conv_kernel"]
    SkippedMap(token_axes=0, skipped='no offsets')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analyses import records
from analyses.records import Malformed, omitted

__all__ = ["Array", "CapturedSums", "Example", "MapSummary", "Maps", "PairMap", "RowSums", "SkippedMap", "TokenMap"]

Array = Any  # numbers in nested lists (a numpy array while computed): the shape is in the field's comment
WEIGHTS, COMPONENTS = "weights over tokens", "per-token component values"  # a TokenMap's two kinds


@dataclass
class Example:
    """An example sentence of the figures: its index in the sample, its text and its kept tokens."""

    text_index: int
    text: str
    tokens: list[str]


@dataclass
class RowSums:
    """Row sums of the maps as captured, before any special-token removal."""

    min: float
    max: float
    mean: float


@dataclass
class CapturedSums:
    """Sums of a per-token map as captured: over the tokens (weights) or over the components, per row."""

    over: str
    min: float
    max: float
    mean: float


@dataclass
class PairMap:
    """The corpus summary of a token-pair map kind (L, K, n, n): offset profile, local share per layer and head,
    the uniform maps' local share, and the examples' maps (averaged over heads and layers; the first one's grid)."""

    token_axes: int  # 2
    layers: int
    heads: int
    n_texts: int
    n_queries: int
    captured_row_sums: RowSums
    offsets: list[int]
    offset_profile: Array  # (L, 2W+1)
    offset_profile_overall: Array  # (2W+1,)
    mass_beyond_max_offset: Array  # (L,)
    local_share: Array  # (L, K)
    local_share_by_layer: Array  # (L,)
    local_share_overall: float
    local_share_uniform: float  # every row uniform over the kept tokens: the no-locality baseline
    example_means: Array  # per example: (m, m)
    grid: Array  # (L, K, m, m) of the first example


@dataclass(kw_only=True)
class TokenMap:
    """The corpus summary of a per-token map kind (L, K, n): weights over the tokens (the sentence node's; their
    entropy, spread, masses) or per-token component values (the gates; their mean), each by relative position, and
    the examples' maps (L, K, m)."""

    token_axes: int  # 1
    layers: int
    components: list[str]
    kind: str  # WEIGHTS or COMPONENTS
    n_texts: int
    n_tokens: int
    captured_sums: CapturedSums
    position_bin_edges: Array  # (B+1,)
    position_tokens: Array  # (B,) kept tokens per bin
    position_profile: Array  # (L, K, B); None for an empty bin
    normalised_entropy: Array | None = omitted()  # weights: (L, K)
    weight_cv: Array | None = omitted()  # weights: (L, K)
    entropy_texts: int | None = omitted()  # weights
    mass_on_kept_tokens: Array | None = omitted()  # weights: (L, K)
    self_weight: Array | None = omitted()  # weights: (L, K)
    component_mean: Array | None = omitted()  # components: (L, K)
    component_mean_overall: Array | None = omitted()  # components: (K,)
    example_maps: Array  # per example: (L, K, m)

    @property
    def over_tokens(self) -> bool:
        """Whether it holds weights over the tokens (else per-token component values)."""
        return self.kind == WEIGHTS

    def statistic(self, name: str) -> Array:
        """One of the per-layer statistics the table lists (normalised_entropy, weight_cv, mass_on_kept_tokens,
        self_weight, component_mean): (L, K)."""
        if name not in ("normalised_entropy", "weight_cv", "mass_on_kept_tokens", "self_weight", "component_mean"):
            raise ValueError(f"a per-token map summary has no statistic {name!r}")
        return getattr(self, name)


@dataclass
class SkippedMap:
    """A map kind that was not summarised, and why."""

    token_axes: int  # 0
    skipped: str


MapSummary = PairMap | TokenMap | SkippedMap
KINDS: dict[int, type] = {2: PairMap, 1: TokenMap, 0: SkippedMap}  # token_axes -> the summary's record


class Maps(records.Named[MapSummary]):
    """Each map kind's summary by its name, in the order computed; saved as ``{name: summary}``."""

    def __init__(self, summaries: Mapping[str, MapSummary] | None = None):
        super().__init__(summaries or {})

    def __repr__(self) -> str:
        return f"Maps({', '.join(self.entries)})"

    def pairs(self) -> list[tuple[str, PairMap]]:
        """(name, summary) of the token-pair maps."""
        return [(n, m) for n, m in self.entries.items() if isinstance(m, PairMap)]

    def tokens(self) -> list[tuple[str, TokenMap]]:
        """(name, summary) of the per-token maps."""
        return [(n, m) for n, m in self.entries.items() if isinstance(m, TokenMap)]

    def to_json(self) -> dict[str, Any]:
        return {n: records.to_json(m) for n, m in self.entries.items()}

    @classmethod
    def from_json(cls, doc: Any, where: str = "maps") -> Maps:
        if not isinstance(doc, Mapping):
            raise Malformed(f"{where}: a mapping of map name to summary, not {type(doc).__name__}")
        out: dict[str, MapSummary] = {}
        for name, summary in doc.items():
            if isinstance(summary, (PairMap, TokenMap, SkippedMap)):
                out[name] = summary
                continue
            axes = summary.get("token_axes") if isinstance(summary, Mapping) else None
            if axes not in KINDS:
                raise Malformed(f"{where}.{name}: token_axes is 0, 1 or 2, not {axes!r}")
            out[name] = records.from_json(KINDS[axes], summary, f"{where}.{name}")
        return cls(out)
