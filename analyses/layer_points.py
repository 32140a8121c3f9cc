"""Point clouds per layer for the geometry analyses (analyses.isoscore, analyses.intrinsic_dimension):
the seeded token sample, its sentences as bootstrap units, and the per-layer line figure they share.

* :func:`draw_tokens`: N random token occurrences (special tokens excluded unless asked), drawn exactly as
  analyses.anisotropy draws its token sample with the same seed, so the three analyses look at the same points.
* :func:`clouds`: per level ("token", "sentence") the (n, d) points of one layer and the sentence of each point
  (a sentence vector is its own unit; a token belongs to its sentence), the unit a bootstrap resamples.
* :func:`plot_levels`: a per-layer statistic with its bootstrap band, token level left and sentence level right,
  one line per model in its colour; :func:`level_panel` draws one of the two panels on one Axes.

    tokens = draw_tokens(acts, 5000, seed=0, keep_special=False)   # acts: an Activations
    for level, (X, unit_of) in clouds(acts, layer, tokens).items(): ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from analyses import style
from analyses.common import mark_final_norm
from probes.capture.activations import Activations
from probes.errors import ProbeError

LEVELS = ("token", "sentence")
T = TypeVar("T")


class ByLevel(Generic[T]):
    """A layer row's lookup by level, for a row dataclass that declares ``token`` and ``sentence`` fields of one
    record type (``class LayerRow(ByLevel[Cloud])``): :meth:`of` names the level."""

    token: T
    sentence: T

    def of(self, level: str) -> T:
        """The ``level`` ("token" or "sentence") record."""
        if level not in LEVELS:
            raise ProbeError(f"level must be 'token' or 'sentence', got {level!r}")
        return self.token if level == "token" else self.sentence

# what a line of the figure reads off a layer row at a level: the value and its interval (None: undefined)
Statistic = Callable[[Any, str], tuple["float | None", "Sequence[float | None] | None"]]


def draw_tokens(acts: Activations, n_tokens: int, seed: int, keep_special: bool) -> np.ndarray:
    """(n,) sorted indices into the token axis: ``min(n_tokens, usable)`` occurrences drawn without replacement
    with ``numpy.random.default_rng(seed)`` from the usable tokens (analyses.anisotropy's draw)."""
    keep = np.ones(len(acts.token_ids), bool) if keep_special else ~np.asarray(acts.special)
    pool = np.flatnonzero(keep)
    if len(pool) < 3:
        raise ProbeError(f"only {len(pool)} usable tokens in the sampled sentences; use more sentences")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(pool, size=min(n_tokens, len(pool)), replace=False))


def clouds(acts: Activations, layer: int, tokens: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"token": (X (n_tokens, d), sentence of each), "sentence": (S (n_texts, d), arange)}`` at ``layer``,
    float64 (the cache's float16 or float32 values, exactly)."""
    X = np.asarray(acts.layer_hidden(layer, tokens), dtype=np.float64)  # (n, d)
    S = np.asarray(acts.sentence[layer], dtype=np.float64)  # (T, d)
    return {"token": (X, acts.text_index()[tokens]), "sentence": (S, np.arange(acts.n_texts))}


def finite(x):
    """``x`` (a number or a sequence of numbers) with every non-finite number as None: a result stores None
    (JSON null) where a statistic is undefined, so that it reads back and writes again byte for byte."""
    if isinstance(x, (list, tuple, np.ndarray)):
        return [finite(v) for v in x]
    return float(x) if x is not None and np.isfinite(x) else None


def level_panel(ax, drawn: list[style.Drawn], statistic: Statistic, level: str, relative: bool,
                ylabel: str) -> None:
    """``statistic(row, level)``'s value against depth on ``ax``, one line per result (``drawn``: its colour,
    label and line keywords), with its interval as the band where ``band``; the last layer is marked when the
    model's hidden[L] includes a final norm."""
    for d in drawn:
        res = d.result
        L = len(res.layers) - 1
        x = style.relative_depth(L) if relative else np.arange(L + 1)
        read = [statistic(r, level) for r in res.layers]
        y = np.array([np.nan if value is None else value for value, _ in read], float)
        ax.plot(x, y, **d.line(marker="o", ms=3))
        ci = np.array([[np.nan if v is None else v for v in (interval or (None, None))] for _, interval in read],
                      dtype=float)  # (L+1, 2); a missing interval is a gap
        if d.band:
            ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.2, lw=0, **d.quiet)
        mark_final_norm(ax, res, x, y, d.color)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("relative depth l / L" if relative else "layer l (0 = embeddings)")


def plot_levels(results: list, statistic: Statistic, ylabel: str, fig=None, relative_depth: bool | None = None,
                ylim: tuple | None = None):
    """Token level left, sentence level right: ``statistic`` (:func:`level_panel`) by layer for every result.
    x is the layer index, or
    l / L when ``relative_depth`` (default: when the models differ in depth). Returns the figure."""
    relative = len({len(r.layers) for r in results}) > 1 if relative_depth is None else relative_depth
    fig = style.new_figure(fig, (7.2, 2.9))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, level in zip(axes, LEVELS):
        level_panel(ax, style.in_figure(results, pooling=True), statistic, level, relative, ylabel)
        ax.set_title(f"{level}s")  # the figure's panels say their level (a Result.plot on one Axes sets no title)
        if ylim is not None:
            ax.set_ylim(*ylim)
    style.legend(axes)
    return fig
