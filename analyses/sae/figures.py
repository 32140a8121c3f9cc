"""The SAE analysis's figures, each as the data it draws (a compute function) and its drawing (``plot_*``):

* the frontier: explained variance and loss recovered against L0, one line per model and layer over the SAEs of
  that layer (several ``--k``, or several results), each point with its bootstrap intervals on both axes
  (:func:`frontier`, :func:`plot_frontier`);
* firing density: per layer, the histogram of log10 of each latent's share of held-out tokens it fires on, dead
  latents (density 0) counted beside it (:func:`log10_histogram` computes it in the analysis,
  :func:`densities` reads it back from results, :func:`plot_densities`);
* MCC by layer: the mean correlation coefficient of the seeds' decoders per layer, with the interval over pairs
  of seeds (Student t over the pairs, :func:`analyses.stats.seed_interval`; pairs of one shared seed are not
  independent, so it is a rough guide) and each pair's value (:func:`mcc_by_layer`, :func:`plot_mcc`);
* by layer: a statistic of each model's first-seed SAEs against layer with its band (:func:`layer_line`).

Compute functions never draw; ``plot_*(data, ax=None)`` draw and return the Axes (or Figure).

    $ python -c "from analyses.sae.figures import DENSITY_EDGES; print(DENSITY_EDGES)"
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analyses import common, stats, style

if TYPE_CHECKING:  # the SAE Result (analyses.sae imports this module)
    from analyses.sae import Result

# log10 density bins: [-6, -5.5), ..., [-0.5, 0]; a live latent below 1e-6 counts in the first bin
DENSITY_EDGES = tuple(float(x) for x in np.arange(-6.0, 0.01, 0.5))


def log10_histogram(density: np.ndarray) -> tuple[list[int], int]:
    """Counts of latents per :data:`DENSITY_EDGES` bin of log10(density) for the latents that fire at all, and the
    number that never fire (density 0)."""
    density = np.asarray(density, np.float64)
    live = density[density > 0]
    logs = np.clip(np.log10(live), DENSITY_EDGES[0], DENSITY_EDGES[-1])
    counts, _ = np.histogram(logs, bins=np.asarray(DENSITY_EDGES))
    return [int(c) for c in counts], int((density == 0).sum())


# ----------------------------------------------------------------------------- the frontier


@dataclass(frozen=True)
class FrontierPoint:
    """One SAE on the frontier: its L0, explained variance and loss recovered (None: not spliced), with intervals."""

    model: str
    layer: int
    seed: int
    k: int | None
    width: int
    l0: float
    l0_ci: tuple[float, float] | None
    explained_variance: float
    explained_variance_ci: tuple[float, float] | None
    loss_recovered: float | None
    loss_recovered_ci: tuple[float, float] | None


@dataclass(frozen=True)
class Frontier:
    """Every SAE of the results, ordered by model, layer, seed and L0."""

    points: tuple[FrontierPoint, ...]

    def curves(self) -> list[tuple[str, int, list[FrontierPoint]]]:
        """(model, layer, its first seed's points by L0) per model and layer, in order."""
        out: list[tuple[str, int, list[FrontierPoint]]] = []
        for p in self.points:
            if out and out[-1][:2] == (p.model, p.layer):
                if p.seed == out[-1][2][0].seed:
                    out[-1][2].append(p)
            else:
                out.append((p.model, p.layer, [p]))
        return out


def _pair(ci) -> tuple[float, float] | None:
    return None if ci is None else (float(ci[0]), float(ci[1]))


def frontier(results: Sequence[Result]) -> Frontier:
    """The frontier's points of ``results`` (SAE results of one or more models; several results of one model, e.g.
    one per k, join its lines). SAEs with no L0 or explained variance (not a number) are left out."""
    pts = [FrontierPoint(model=res.model_name, layer=r.layer, seed=r.seed, k=r.k, width=r.width, l0=float(r.l0),
                         l0_ci=_pair(r.l0_ci), explained_variance=float(r.explained_variance),
                         explained_variance_ci=_pair(r.explained_variance_ci),
                         loss_recovered=r.loss_recovered, loss_recovered_ci=_pair(r.loss_recovered_ci))
           for res in results for r in res.saes if r.l0 is not None and r.explained_variance is not None]
    order = {m: i for i, m in enumerate(dict.fromkeys(p.model for p in pts))}
    return Frontier(tuple(sorted(pts, key=lambda p: (order[p.model], p.layer, p.seed, p.l0))))


def _errors(values: list[float], cis: list[tuple[float, float] | None]) -> np.ndarray:
    """(2, n) distances from each value to its interval's ends (0 where there is none) for ``errorbar``."""
    lo = [v - ci[0] if ci else 0.0 for v, ci in zip(values, cis)]
    hi = [ci[1] - v if ci else 0.0 for v, ci in zip(values, cis)]
    return np.maximum(np.array([lo, hi], float), 0.0)


@style.drawing
def plot_frontier(data: Frontier, fig=None):
    """Explained variance (left) and loss recovered (right) against L0, a line per model and layer through its
    first seed's SAEs, error bars: 95% bootstrap intervals of both numbers. Returns the figure."""
    fig = style.new_figure(fig, (7.2, 3.0))
    axes = fig.subplots(1, 2, sharex=True)
    curves = data.curves()
    colors = style.figure_colors(list(dict.fromkeys(m for m, _, _ in curves)))
    markers = "osD^v<>ph*"
    layers = sorted({layer for _, layer, _ in curves})
    for model, layer, pts in curves:
        x = [p.l0 for p in pts]
        kw = {"color": colors[model], "marker": markers[layers.index(layer) % len(markers)], "ms": 3.5,
              "label": f"{style.display_name(model)}, layer {layer}"}
        for ax, key in zip(axes, ("explained_variance", "loss_recovered")):
            y = [getattr(p, key) for p in pts]
            ax.plot(x, common.as_floats(y), lw=1, **kw)
            keep = [i for i, v in enumerate(y) if v is not None]
            if keep:
                ax.errorbar([x[i] for i in keep], [y[i] for i in keep],
                            yerr=_errors([y[i] for i in keep], [getattr(pts[i], f"{key}_ci") for i in keep]),
                            xerr=_errors([x[i] for i in keep], [pts[i].l0_ci for i in keep]),
                            fmt="none", ecolor=colors[model], elinewidth=0.6, capsize=1.5)
    for ax, label in zip(axes, ("explained variance (held out)", "loss recovered (spliced)")):
        ax.set_xlabel("L0 (latents firing per token)")
        ax.set_ylabel(label)
    style.legend(axes, fontsize="x-small")
    return fig


# ----------------------------------------------------------------------------- firing density


@dataclass(frozen=True)
class DensityHistogram:
    """One SAE's latents by log10 firing density (:data:`DENSITY_EDGES`) and its dead latents."""

    model: str
    layer: int
    seed: int
    counts: tuple[int, ...]
    dead: int


def densities(results: Sequence[Result]) -> list[DensityHistogram]:
    """The firing-density histogram of every SAE of ``results`` that records one."""
    return [DensityHistogram(res.model_name, r.layer, r.seed, tuple(r.density_log10_counts), int(r.dead or 0))
            for res in results for r in res.saes if r.density_log10_counts is not None]


@style.drawing
def plot_densities(data: Sequence[DensityHistogram], ax=None):
    """Latents per log10 firing-density bin, a step line per SAE (first seeds; the label says its dead latents).
    Returns the Axes."""
    ax = style.one_axes(ax)
    first = {(h.model, h.layer): h.seed for h in reversed(data)}
    edges = np.asarray(DENSITY_EDGES)
    for h in data:
        if h.seed != first[(h.model, h.layer)]:
            continue
        ax.stairs(np.asarray(h.counts, float), edges,
                  label=f"{style.display_name(h.model)}, layer {h.layer} ({h.dead} dead)")
    ax.set_xlabel("log10 firing density (share of held-out tokens)")
    ax.set_ylabel("latents")
    return style.finish(ax)


# ----------------------------------------------------------------------------- MCC by layer


@dataclass(frozen=True)
class LayerMcc:
    """The MCC of a layer's seeds: the mean over pairs of seeds, each pair's value and the interval over pairs."""

    model: str
    layer: int
    mcc: float
    pairs: tuple[float, ...]
    ci: tuple[float, float] | None


def mcc_by_layer(results: Sequence[Result]) -> list[LayerMcc]:
    """Each layer's MCC in results trained with two or more seeds."""
    out = []
    for res in results:
        for a in res.agreement:
            if a.mcc is not None:
                pairs = tuple(a.pairs or (a.mcc,))
                out.append(LayerMcc(res.model_name, a.layer, float(a.mcc), pairs, stats.seed_interval(pairs)))
    return out


@style.drawing
def plot_mcc(data: Sequence[LayerMcc], ax=None):
    """MCC against layer, a line per model, band: the interval over pairs of seeds, dots: each pair. Returns the
    Axes."""
    ax = style.one_axes(ax)
    models = list(dict.fromkeys(m.model for m in data))
    colors = style.figure_colors(models)
    for model in models:
        rows = sorted((m for m in data if m.model == model), key=lambda m: m.layer)
        x = np.array([m.layer for m in rows])
        ax.plot(x, [m.mcc for m in rows], marker="o", ms=3, color=colors[model], label=style.display_name(model))
        ci = np.array([m.ci or (np.nan, np.nan) for m in rows], float)
        ax.fill_between(x, ci[:, 0], ci[:, 1], color=colors[model], alpha=0.2, lw=0)
        for m in rows:
            ax.plot([m.layer] * len(m.pairs), m.pairs, ".", ms=2, color=colors[model], alpha=0.6)
    ax.set_xlabel("layer l (0 = embeddings)")
    ax.set_ylabel("MCC of the seeds' decoders")
    return style.finish(ax)


# ----------------------------------------------------------------------------- by layer


def layer_line(ax, drawn: style.Drawn, key: str) -> None:
    """``key`` of the first seed's SAE against layer, with its interval band."""
    rows = drawn.result.first_seed()
    x = np.array([r.layer for r in rows])
    ax.plot(x, common.as_floats(getattr(r, key) for r in rows), **drawn.line(marker="o", ms=3))
    ci = np.array([getattr(r, f"{key}_ci") or (np.nan, np.nan) for r in rows], dtype=float)
    if drawn.band:
        ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.2, lw=0, **drawn.quiet)
    ax.set_xlabel("layer l (0 = embeddings)")
