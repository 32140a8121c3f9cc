"""What the map analyses share: reading per-text maps from Activations, their names, drawing helpers.

Used by :mod:`analyses.maps` (token-pair maps: attention, ConvBERT kernels) and
:mod:`analyses.maps.gates` (per-token maps: the S-LSTM's gates and sentence-node weights).
A map summary in a result says what it is by its ``token_axes`` value (2: token pairs, 1: per token,
0: not summarised, with the reason under ``skipped``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeGuard

import numpy as np

from analyses import common, records, stats
from analyses.common import SentenceConfig, arg
from analyses.maps.rows import Example, Maps, MapSummary, PairMap, TokenMap
from probes.capture.activations import Activations

GRID_DECIMALS = 5  # example maps stored in the JSON (for the figures) are rounded to 1e-5
MAP_TITLES = {"attention": "self-attention", "conv_kernel": "convolution kernels", "gates": "gate weights",
              "gates_dominant": "dominant gate", "sentence_weights": "sentence node's weights"}


def text_map(acts: Activations, name: str, t: int) -> np.ndarray:
    """(L, K, n_t, n_t) (or (L, K, n_t) for one-token-axis maps) of text t."""
    return np.asarray(acts.text_map(name, t))


def text_keep(acts: Activations, t: int, keep_special: bool) -> np.ndarray:
    """(n_t,) bool: the tokens of text t that count (all, or all but the special ones)."""
    special = np.asarray(acts.special[acts.offsets[t]:acts.offsets[t + 1]], bool)
    return np.ones_like(special) if keep_special else ~special


def is_pair_map(m: MapSummary) -> TypeGuard[PairMap]:
    """A token-pair map summary (L, K, n, n): attention or kernels."""
    return isinstance(m, PairMap)


def is_token_map(m: MapSummary) -> TypeGuard[TokenMap]:
    """A per-token map summary (L, K, n): gates, sentence-node weights."""
    return isinstance(m, TokenMap)


def token_labels(ax, tokens: list[str], fontsize: float) -> None:
    """Tokens as the x and y tick labels of a token x token heatmap."""
    ticks = np.arange(len(tokens))
    ax.set_xticks(ticks, tokens, rotation=90, fontsize=fontsize)
    ax.set_yticks(ticks, tokens, fontsize=fontsize)
    ax.tick_params(length=1.5, pad=1)


def layer_axis(depths: list[int]) -> tuple[str, Callable[[int], np.ndarray]]:
    """The x axis of per-layer lines: layer number when every model has the same depth, else relative
    depth l / L (analyses.style.relative_depth). Returns (label, x(L) -> (L,) positions of layers 1..L)."""
    from analyses.style import relative_depth

    if len(set(depths)) <= 1:
        return "layer", lambda L: np.arange(1, L + 1)
    return "relative depth (layer / L)", lambda L: relative_depth(L)[1:]


def shorten(text: str, limit: int = 70) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis)."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass
class Config(SentenceConfig):
    """Attention / kernel maps: Fig. 2-style averaged maps, offset profiles and local shares."""

    n_sentences: int = arg(200, "random sentences for the corpus summary", min=1)
    local_radius: int = arg(2, "local share: mass within |i - j| <= local radius", min=0)
    max_offset: int = arg(20, "offset profile: offsets i - j from -max_offset to +max_offset", min=0)
    examples: int = arg(3, "example sentences drawn (seeded) for the averaged maps; the first gets the grid", min=1)
    example_max_tokens: int = arg(28, "examples are drawn among sentences of at most this many (kept) tokens", min=2)
    position_bins: int = arg(10, "per-token maps: bins of relative position (i + 0.5) / m in the sentence", min=1)
    keep_special: bool = arg(False, "keep special-token rows/columns (default: drop them, renormalise rows)")


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's maps: the saved document's keys, in order (prose only in ``definitions``).

    ``maps`` holds one summary per map kind, told apart by its ``token_axes`` value: 2 (token pairs:
    :func:`summarise_map`), 1 (per token: :func:`analyses.maps.gates.summarise_token_map`) or 0 (not
    summarised: its ``skipped`` says why)."""

    definitions: records.Definitions  # prose: what every number means (nothing reads numbers from it)
    maps_captured: list[str]  # map kinds, "attention" first
    examples: list[Example]  # per example sentence: text_index, text, kept tokens
    maps: Maps  # map kind -> summary
    FIRST_LAYER: ClassVar[int] = 1  # maps come from layers 1..L

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"{MAP_TITLES.get(name, name)}: local share": stats.Sample(m.local_share_overall)
                for name, m in self.maps.pairs()}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: per layer, the mean over heads of the first attention-like map's local
        share (a map of (query, key) token axes)."""
        return np.mean(self.maps.pairs()[0][1].local_share, axis=1)

    def headline(self) -> dict[str, str]:
        out = {}
        for name, m in self.maps.items():
            if is_pair_map(m):
                out[f"{MAP_TITLES.get(name, name)}: local share"] = (f"{m.local_share_overall:.3f} (uniform maps "
                                                                      f"{m.local_share_uniform:.3f})")
            elif is_token_map(m):
                out[MAP_TITLES.get(name, name)] = f"{m.kind}, {len(m.components)} components"
        return out

    def plot(self, ax=None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: the local
        share by layer of each token-pair map (attention, kernels); for a model without them (the S-LSTM), its
        gate shares by layer. ``kwargs`` (``color=``, ``label=``, ``marker=``, ``linewidth=`` ...) go to the
        lines; without ``color=`` the next colour of the Axes' cycle; the labels enter the legend, so results
        drawn on one Axes overlay. Fonts and colours follow the caller's rcParams. Returns the Axes."""
        from analyses.maps import plot_result

        return plot_result(self, ax, **kwargs)
