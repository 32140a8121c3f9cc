"""Maps: where does each model look? Attention maps, ConvBERT's convolution kernels (ConvBERT Fig. 2), S-LSTM gates

The S-LSTM gate maps are in :mod:`analyses.maps.gates`; Config, Result and the shared readers in
:mod:`analyses.maps.common`.

Every map an encoder returns is read as (L, K, n, n) per sentence: layer, head (or kernel head),
query token i (row), key token j (column); rows are distributions over keys. That is attention
for every Transformer and, for ConvBERT, its span-based dynamic convolution kernels written into
banded maps (``probes.models.convbert``), so kernels sit beside attention heads.

* Examples (Fig. 2): for ``--examples`` seeded sentences, the map averaged over heads and layers,
  and a layer x head grid for the first one.
* Corpus summary, per map kind: the mass by relative offset ``d = i - j`` (query i, key j; d > 0:
  the key is to the left of / before the query, so "previous token" is d = +1 and a causal model
  has all its mass at d >= 0) for d = -W..W, per query row averaged over queries, heads and texts,
  per layer and overall; and the local share, the mass within |i - j| <= w, per layer and head.
* Special tokens ([CLS], [SEP], <s>, </s>): by default their rows and columns are removed and each
  remaining row is renormalised to sum to 1 over the kept columns; ``--keep-special`` keeps the
  maps as captured. The policy is written into the result.

Maps with one token axis, (L, K, n) per sentence (the S-LSTM's gates and sentence-node weights),
are summarised and drawn by :mod:`analyses.maps.gates`; this module dispatches to it, so one result
per model holds both kinds.

    $ python -m analyses.maps --model minilm-l6 [--model tiny-convbert] [--corpus PATH] [--n-sentences 200]
          [--local-radius 2] [--max-offset 20] [--examples 3] [--seed 0] [--keep-special] [--out out]

Writes out/results/maps/<model>.json (+ .csv, one row per map kind and layer),
out/figures/maps-<model>.{png,pdf} (averaged example maps + the layer x head grid) and
out/figures/maps-locality.{png,pdf} (offset profile and local share by layer, one line per model and map;
gate shares by layer for models with gate maps).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analyses import records, style
from analyses.analysis import Analysis, Figure
from analyses.common import activations_identity
from analyses.inputs import Sentences
from analyses.maps.common import (
    GRID_DECIMALS,
    MAP_TITLES,
    Config,
    Result,
    is_pair_map,
    is_token_map,
    layer_axis,
    shorten,
    text_keep,
    text_map,
    token_labels,
)
from analyses.maps.gates import (
    gate_maps,
    map_token_axes,
    plot_gate_shares,
    plot_token_maps,
    summarise_token_map,
    token_rows,
)
from analyses.maps.rows import Example, Maps, MapSummary, PairMap, RowSums, SkippedMap, TokenMap
from probes.capture.activations import Activations
from probes.config import tqdm_class
from probes.errors import ProbeError

# ----------------------------------------------------------------------------- map statistics
# maps: (L, K, n, n) for one text; [l, k, i, j] = weight of key j for query i. Offset d = i - j.


def head_layer_mean(maps: np.ndarray) -> np.ndarray:
    """(L, K, n, n) -> (n, n): the map averaged over heads and layers (ConvBERT Fig. 2)."""
    return np.asarray(maps, np.float64).mean(axis=(0, 1))


def offset_profile(maps: np.ndarray, max_offset: int) -> np.ndarray:
    """(L, K, n, n) -> (L, 2W+1): mass at offset d = i - j for d = -W..W (column d + W), per query
    row averaged over the n queries and the K heads. Offsets beyond the sequence contribute 0."""
    maps = np.asarray(maps, np.float64)
    L, K, n, _ = maps.shape
    out = np.zeros((L, 2 * max_offset + 1))
    for d in range(-max_offset, max_offset + 1):
        if abs(d) < n:  # [i, i - d] for all valid i
            out[:, d + max_offset] = np.diagonal(maps, offset=-d, axis1=-2, axis2=-1).sum(-1).mean(1) / n
    return out


def row_local_mass(maps: np.ndarray, w: int) -> np.ndarray:
    """(L, K, n, n) -> (L, K, n): each query row's mass within |i - j| <= w."""
    n = maps.shape[-1]
    i, j = np.indices((n, n))
    return (np.asarray(maps, np.float64) * (np.abs(i - j) <= w)).sum(-1)


def local_share(maps: np.ndarray, w: int) -> np.ndarray:
    """(L, K, n, n) -> (L, K): mass within |i - j| <= w, averaged over query rows (how diagonal a head is)."""
    return row_local_mass(maps, w).mean(-1)


def keep_tokens(maps: np.ndarray, keep: np.ndarray, renormalise: bool = True) -> np.ndarray:
    """(L, K, n, n) -> (L, K, m, m): rows and columns of the m kept tokens; with ``renormalise``
    each row is rescaled to sum to 1 over the kept columns (a row with no mass left stays 0)."""
    keep = np.asarray(keep, bool)
    sub = np.asarray(maps, np.float64)[:, :, keep][:, :, :, keep]
    if renormalise:
        s = sub.sum(-1, keepdims=True)
        sub = np.divide(sub, s, out=np.zeros_like(sub), where=s > 0)
    return sub


# ----------------------------------------------------------------------------- reading maps from Activations


def map_names(acts: Activations) -> list[str]:
    """The per-text maps the activations hold: "attention" first, then those the encoder declared."""
    if not acts.maps:
        raise ProbeError("these activations were captured without maps: extract with maps=True")
    return sorted(acts.maps, key=lambda name: name != "attention")  # stable: declared order after attention


def choose_examples(acts: Activations, cfg: Config) -> list[int]:
    """Seeded example sentences among those with 2..example_max_tokens kept tokens (else all)."""
    rng = np.random.default_rng(cfg.seed)
    n_kept = np.array([text_keep(acts, t, cfg.keep_special).sum() for t in range(acts.n_texts)])
    pool = np.flatnonzero((n_kept >= 2) & (n_kept <= cfg.example_max_tokens))
    if len(pool) == 0:
        pool = np.flatnonzero(n_kept >= 1)
    return [int(t) for t in rng.choice(pool, size=min(cfg.examples, len(pool)), replace=False)]


# ----------------------------------------------------------------------------- compute


def summarise_map(acts: Activations, name: str, cfg: Config, examples: list[int]) -> PairMap | SkippedMap:
    """Corpus summary of one map kind over every text, plus the example maps for the figures."""
    W, w = cfg.max_offset, cfg.local_radius
    profile: np.ndarray | None = None  # (L, 2W+1) summed over queries, from the first text kept on
    share: np.ndarray | None = None  # (L, K)
    row_mass: np.ndarray | None = None  # (L,)
    n_queries = n_texts = 0
    uniform = 0.0  # local mass of a uniform map over the same kept tokens, summed over queries
    row_sums = []
    for t in range(acts.n_texts):
        m = text_map(acts, name, t)
        if m.ndim != 4:
            return SkippedMap(token_axes=0, skipped=f"map with {m.ndim - 2} token axis: no offsets to summarise")
        keep = text_keep(acts, t, cfg.keep_special)
        if not keep.any():
            continue
        row_sums.append(m.sum(-1).ravel())
        sub = keep_tokens(m, keep, renormalise=not cfg.keep_special)
        q = sub.shape[-1]
        if profile is None:
            profile, share = np.zeros((sub.shape[0], 2 * W + 1)), np.zeros(sub.shape[:2])
            row_mass = np.zeros(sub.shape[0])
        profile += offset_profile(sub, W) * q  # weighted by queries: every query row counts once
        share += local_share(sub, w) * q
        row_mass += sub.sum(-1).mean(1).sum(-1)  # (L,): row sums, mean over heads, summed over queries
        i = np.arange(q)
        uniform += float(((np.minimum(i + w, q - 1) - np.maximum(i - w, 0) + 1) / q).sum())
        n_queries += q
        n_texts += 1
    if n_texts == 0 or profile is None or share is None or row_mass is None:  # all None exactly when no text
        raise ProbeError("no sentence has a token left once special tokens are dropped; try --keep-special")
    profile, share, row_mass = profile / n_queries, share / n_queries, row_mass / n_queries
    rs = np.concatenate(row_sums)
    ex_maps = []
    for t in examples:
        sub = keep_tokens(text_map(acts, name, t), text_keep(acts, t, cfg.keep_special), not cfg.keep_special)
        ex_maps.append(np.round(head_layer_mean(sub), GRID_DECIMALS))
    grid = keep_tokens(text_map(acts, name, examples[0]), text_keep(acts, examples[0], cfg.keep_special),
                       not cfg.keep_special)
    L, K = share.shape
    return PairMap(
        token_axes=2, layers=L, heads=K, n_texts=n_texts, n_queries=n_queries,
        captured_row_sums=RowSums(min=float(rs.min()), max=float(rs.max()), mean=float(rs.mean())),
        offsets=list(range(-W, W + 1)),
        offset_profile=profile,  # (L, 2W+1)
        offset_profile_overall=profile.mean(0),  # (2W+1,)
        mass_beyond_max_offset=row_mass - profile.sum(1),  # (L,): |i - j| > max_offset
        local_share=share,  # (L, K)
        local_share_by_layer=share.mean(1),  # (L,)
        local_share_overall=float(share.mean()),
        local_share_uniform=uniform / n_queries,  # baseline: every row uniform over the kept tokens
        example_means=ex_maps,  # per example: (m, m), averaged over heads and layers
        grid=np.round(grid, GRID_DECIMALS),  # (L, K, m, m) of examples[0]
    )


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """Example maps and the corpus locality summary of every map in ``acts``."""
    cfg = cfg or Config()
    names = map_names(acts)
    examples = choose_examples(acts, cfg)
    if not examples:
        raise ProbeError("no sentence has a token left once special tokens are dropped; try --keep-special")
    maps: dict[str, MapSummary] = {}
    axes = {name: map_token_axes(acts, name) for name in names}
    for name in tqdm_class()(names, desc=f"maps {acts.meta['model']['name']}", unit="map"):
        if axes[name] == 1:
            maps[name] = summarise_token_map(acts, name, cfg, examples)
        else:
            maps[name] = summarise_map(acts, name, cfg, examples)
    definitions: dict[str, Any] = {}
    if any(a == 1 for a in axes.values()):
        definitions["per_token_maps"] = {
            "maps": "per sentence (L, K, n): [layer, component, token i]; for the S-LSTM, layer l is recurrent "
                    "step l of its shared block",
            "special_tokens": "kept" if cfg.keep_special else "special tokens dropped: their values are not "
                              "counted; weights over tokens are renormalised over the kept tokens",
            "component_mean": "per-token component values (gates: softmax weights averaged over hidden units; "
                              "gates_dominant: share of hidden units where the gate weighs most), averaged over "
                              "the kept tokens of all texts (every token counts once), per layer and component",
            "position_profile": f"{cfg.position_bins} bins of relative position (i + 0.5) / m of kept token i "
                                "(0-based) of m; per layer, component and bin the mean over the tokens in the "
                                "bin of the component value, or for weights over tokens of m * p_i (1 = uniform)",
            "weights_over_tokens": "sentence_weights p_i: the captured weights renormalised to sum to 1 over "
                                   "the kept tokens of the sentence"
                                   + (" (all tokens with --keep-special)" if cfg.keep_special else ""),
            "normalised_entropy": "H(p) / log m of the renormalised weights (1 = uniform over the m kept tokens, "
                                  "0 = one token), averaged over texts with m >= 2",
            "weight_cv": "coefficient of variation of the renormalised weights over the kept tokens, std(p) * m "
                         "(0 = uniform; resolves near-uniform weights where the entropy rounds to 1), averaged "
                         "over texts with m >= 2",
            "mass_on_kept_tokens": "captured weight summed over the kept tokens, before renormalisation, mean "
                                   "over texts",
            "self_weight": "1 - captured weight summed over all tokens (special ones included): the sentence "
                           "node's weight of its own previous cell, mean over texts",
            "example_maps": f"per example (L, K, m) over the kept tokens (weights over tokens renormalised), "
                            f"rounded to 1e-{GRID_DECIMALS}",
        }
    ex = []
    for t in examples:
        keep = text_keep(acts, t, cfg.keep_special)
        ex.append(Example(text_index=t, text=acts.texts[t], tokens=[s for s, k in zip(acts.tokens[t], keep) if k]))
    return Result(
        identity=activations_identity(acts, cfg),
        definitions=records.Definitions({
            "maps": "per sentence (L, K, n, n): [layer, head, query i, key j]; rows are distributions over keys "
                    "(maps with one token axis: see per_token_maps)",
            "offset": "d = i - j (query i, key j): d > 0 is a key before the query (previous token: d = +1); "
                      "a causal model has all its mass at d >= 0",
            "offset_profile": f"mass at offset d for d = -{cfg.max_offset}..{cfg.max_offset}, per query row, "
                              "averaged over queries, heads and texts (each query row of the corpus counts once)",
            "local_share": f"mass within |i - j| <= {cfg.local_radius}, averaged over query rows and texts, per "
                           "layer and head; local_share_by_layer averages heads; local_share_uniform is the same for "
                           "maps uniform over the kept tokens of the same sentences (the no-locality baseline)",
            "special_tokens": "kept; maps as captured (rows not renormalised)" if cfg.keep_special else
                              "rows and columns of special tokens dropped, each row renormalised to sum to 1 over "
                              "the kept tokens",
            "captured_row_sums": "row sums of the maps as captured, before any special-token removal",
            "examples": f"{len(examples)} sentences drawn with the seed among those with at most "
                        f"{cfg.example_max_tokens} kept tokens; example maps rounded to 1e-{GRID_DECIMALS}",
            "map_descriptions": {n: acts.meta.get("maps", {}).get(n, {}).get("description", "") for n in names},
            **definitions,
        }),
        maps_captured=names,
        examples=ex,
        maps=Maps(maps),
    )


def table_rows(result: Result) -> list[dict]:
    """Flat CSV rows. Token-pair maps: one per (map, layer): local share (mean/min/max over heads) and the
    offset profile. Per-token maps: one per (map, layer, component, statistic) with its value (the mean,
    or for weights over tokens the entropy, masses and the position profile). Every row has every column."""
    rows = []
    for name, m in result.maps.items():
        if isinstance(m, TokenMap):
            rows += token_rows(name, m)
            continue
        if not isinstance(m, PairMap):  # not summarised
            continue
        for lyr, (share, prof) in enumerate(zip(m.local_share, m.offset_profile)):
            share = np.asarray(share)
            rows.append({"map": name, "layer": lyr + 1, "heads": m.heads, "local_share_mean": share.mean(),
                         "local_share_min": share.min(), "local_share_max": share.max(),
                         **{f"offset_{d}": v for d, v in zip(m.offsets, prof)}})
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return [{k: r.get(k) for k in columns} for r in rows]


# ----------------------------------------------------------------------------- plot


def _summaries(drawn: list[style.Drawn]):
    """(drawn result, line style, summary, label) per result and token-pair map kind: colour = the result's
    (in a figure its model's, :func:`analyses.style.in_figure`), line style = map kind."""
    styles = {"attention": "-"}
    for d in drawn:
        for name, m in d.result.maps.pairs():
            ls = styles.setdefault(name, ("--", ":", "-.")[(len(styles) - 1) % 3])
            yield d, ls, m, f"{d.label} ({MAP_TITLES.get(name, name)})"


def _in_figure(results: list[Result]) -> list[style.Drawn]:
    """The figure's results in their models' colours, labelled by registry name (line style: the map kind)."""
    return [d._replace(kw={"color": d.color, "label": d.result.model_name}) for d in style.in_figure(results)]


@style.drawing
def plot(results: list[Result], fig=None):
    """Locality: (a) offset profile averaged over layers, (b) local share by layer (heads as dots),
    one line per model and map kind; (c) gate shares by layer when a model has gate maps (the S-LSTM,
    which has no attention). Each model has its colour in the figure (analyses.style.figure_colors); models of
    different depth share the by-layer axis as relative depth. ``fig``: a Figure or SubFigure to draw
    into (default: a new figure). Returns the figure."""
    drawn = _in_figure(results)
    pair, gates = list(_summaries(drawn)), gate_maps(results)
    n = (2 if pair or not gates else 0) + (1 if gates else 0)
    fig = style.new_figure(fig, (5 * n, 3.4))
    axes = list(np.ravel(fig.subplots(1, n, squeeze=False)))
    if gates:
        plot_gate_shares(axes[-1], gates)
        axes = axes[:-1]
    if pair or not gates:
        _plot_locality(axes[0], axes[1], drawn)
    return fig


@style.drawing
def plot_result(result: Result, ax=None, **kwargs):
    """``Result.plot``: one model's local share by layer (line: mean over heads, dots: heads, dotted: uniform
    maps; line style: map kind), or, without token-pair maps, its gate shares (marker: gate) on one Axes (a
    new figure when None). ``kwargs`` go to the lines; the result takes the next colour of the Axes' cycle
    unless ``color=`` is given; the labels (default: the model, then the map kind or gate) enter the legend,
    so results drawn on one Axes overlay. Returns the Axes."""
    ax = style.one_axes(ax, (4.4, 3.2))
    drawn = style.on_axes(ax, result, kwargs)
    if not list(_summaries([drawn])) and gate_maps([result]):
        plot_gate_shares(ax, gate_maps([result]), drawn)
        return style.finish(ax, title="solid: mean weight; dashed: dominant share")
    policy = _plot_shares(ax, [drawn], legend=False, titled=False)
    return style.finish(ax, title=policy)


def _plot_locality(ax_p, ax_s, drawn: list[style.Drawn]) -> None:
    """The offset profile on ``ax_p`` and the local share by layer on ``ax_s``."""
    summaries = list(_summaries(drawn))
    for d, ls, m, label in summaries:
        ax_p.plot(m.offsets, m.offset_profile_overall, **{**d.line(ls=ls, marker="o", ms=2.5, lw=1.2),
                                                                 "label": label})
    ax_p.set_xlabel("offset i - j (tokens; query i, key j; > 0: key before query)")
    ax_p.set_ylabel("mass per query row (share of 1)")
    ax_p.set_title("attention mass by relative offset (mean over layers)")
    ax_p.set_ylim(bottom=0)
    ax_p.axvline(0, color="0.5", lw=0.6, ls=":")
    without = [d.result.model_name for d in drawn if not any(is_pair_map(m) for m in d.result.maps.values())]
    if without:
        ax_p.text(0.98, 0.97, "no attention or kernel maps: " + ", ".join(without), transform=ax_p.transAxes,
                  ha="right", va="top", fontsize="small", color="0.35")
    _plot_shares(ax_s, drawn)


UNIFORM = "uniform maps, same sentences"


def _plot_shares(ax_s, drawn: list[style.Drawn], legend: bool = True, titled: bool = True) -> str:
    """Local share by layer (line: mean over heads; dots: heads), one line per result and map kind; the panel's
    title says so where ``titled`` (the module's figures; a ``Result.plot`` sets none). Returns the special-token
    policy (the legend's title)."""
    import matplotlib.pyplot as plt

    summaries = list(_summaries(drawn))
    xlabel, layer_x = layer_axis([len(m.local_share) for _, _, m, _ in summaries])
    baselines: dict[int, object] = {}  # result -> its uniform-maps line
    for d, ls, m, label in summaries:
        share = np.asarray(m.local_share)  # (L, K)
        layers = layer_x(len(share))
        ax_s.plot(layers, share.mean(1), **{**d.line(ls=ls, marker="o", ms=4, lw=1.4), "label": label})
        step = layers[0] if len(layers) else 1.0  # spacing of the layer positions
        jitter = (np.arange(share.shape[1]) - (share.shape[1] - 1) / 2) * min(0.5 / share.shape[1], 0.04) * step
        ax_s.scatter((layers[:, None] + jitter[None]).ravel(), share.ravel(), s=6, alpha=0.35, lw=0, **d.quiet)
        if id(d) not in baselines:  # one baseline per result; one legend entry on the Axes
            named = UNIFORM in ax_s.get_legend_handles_labels()[1]
            baselines[id(d)] = ax_s.axhline(m.local_share_uniform, color=d.color, ls=":", lw=0.9,
                                            label="_nolegend_" if named else UNIFORM)
    cfg = drawn[0].result.config
    ax_s.set_xlabel(xlabel)
    ax_s.set_ylabel(f"share of mass within |i - j| <= {cfg['local_radius']} tokens")
    if titled:
        ax_s.set_title("local share by layer (line: mean over heads; dots: heads)")
    ax_s.set_ylim(0, 1.02)
    if xlabel == "layer":
        ax_s.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        n_layers = max((len(m.local_share) for _, _, m, _ in summaries), default=1)
        ax_s.set_xlim(0.5, n_layers + 0.5)
    else:
        ax_s.set_xlim(0, 1.05)
    policy = "special tokens kept" if cfg["keep_special"] else "[CLS]/[SEP] dropped, rows renormalised"
    if legend and ax_s.get_legend_handles_labels()[0]:
        ax_s.legend(loc="best", title=policy)
    return policy


@style.drawing
def plot_examples(result: Result, fig=None):
    """One model: Fig. 2-style maps of the example sentences (averaged over heads and layers; one row
    per map kind) above the layer x head grid of the first example. ``fig``: a Figure or SubFigure to
    draw into (default: a new figure). Returns the figure."""
    from matplotlib.colors import PowerNorm

    kinds = result.maps.pairs()
    if not kinds:
        return plot_token_maps(result, fig)
    examples = result.examples
    E, R = len(examples), len(kinds)
    heads = [m.heads for _, m in kinds]
    L = max(m.layers for _, m in kinds)
    cell = 0.62 if sum(heads) <= 16 else 0.45
    grid_w = sum(heads) * cell + 1.0 * R
    width = max(3.4 * E + 0.8, grid_w, 6.0)
    top_h, grid_h = 4.1 * R + 0.3, L * cell + 0.9
    fig = style.new_figure(fig, (width, top_h + grid_h))
    top, bottom = fig.subfigures(2, 1, height_ratios=[top_h, grid_h], hspace=0.04)
    policy = "special tokens kept" if result.config["keep_special"] else "[CLS]/[SEP] dropped, rows renormalised"
    top.suptitle(f"{result.model_name}: maps averaged over heads and layers ({policy})")
    axes = np.atleast_2d(top.subplots(R, E, squeeze=False))
    gamma = 0.5
    for r, (name, m) in enumerate(kinds):
        vmax = max(float(np.max(a)) for a in m.example_means) or 1.0
        for c, ex in enumerate(examples):
            ax = axes[r, c]
            im = ax.imshow(np.asarray(m.example_means[c]), cmap="viridis",
                           norm=PowerNorm(gamma, vmin=0, vmax=vmax), interpolation="nearest")
            n = len(ex.tokens)
            token_labels(ax, ex.tokens, fontsize=style.points("xtick.labelsize", max(0.5, min(1.0, 21 / max(n, 1)))))
            ax.set_title(f"{MAP_TITLES.get(name, name)}: sentence {ex.text_index}",
                         fontsize=style.points("axes.titlesize", 8 / 9))
            ax.grid(False)
            if c == 0:
                ax.set_ylabel("query token i")
            ax.set_xlabel("key token j", labelpad=1)
        cb = top.colorbar(im, ax=axes[r, :].tolist(), shrink=0.8, pad=0.01)
        cb.set_label("weight (sqrt scale)")
    bottom.suptitle(f"layer x head maps of sentence {examples[0].text_index} "
                    f"(\"{shorten(examples[0].text)}\")", fontsize=style.points("figure.titlesize", 0.9))
    sub = np.atleast_1d(bottom.subfigures(1, R, width_ratios=[h + 1.2 for h in heads], wspace=0.02))
    for sf, (name, m) in zip(sub, kinds):
        grid = np.asarray(m.grid)  # (L, K, n, n)
        gax = sf.subplots(m.layers, m.heads, squeeze=False, gridspec_kw={"wspace": 0.05, "hspace": 0.05})
        norm = PowerNorm(gamma, vmin=0, vmax=float(grid.max()) or 1.0)
        for lyr in range(m.layers):
            for h in range(m.heads):
                ax = gax[lyr, h]
                im = ax.imshow(grid[lyr, h], cmap="viridis", norm=norm, interpolation="nearest")
                ax.set_xticks([])
                ax.set_yticks([])
                ax.grid(False)
                small = style.points("axes.titlesize", 2 / 3)  # the grid's cells are small
                if lyr == 0:
                    ax.set_title(f"h{h + 1}", fontsize=small, pad=2)
                if h == 0:
                    ax.set_ylabel(f"L{lyr + 1}", fontsize=small, rotation=0, ha="right", va="center", labelpad=2)
        sf.suptitle(MAP_TITLES.get(name, name), fontsize=style.points("figure.titlesize", 0.8))
        cb = sf.colorbar(im, ax=gax.ravel().tolist(), shrink=0.6, pad=0.02, aspect=30)
        cb.set_label("weight (sqrt scale)", fontsize=style.points("axes.labelsize", 0.75))
        cb.ax.tick_params(labelsize=style.points("ytick.labelsize", 6 / 7))
    return fig


def both_kinds(result: Result) -> bool:
    """Whether a result holds token-pair maps and per-token maps (the per-token ones get a figure of their own)."""
    kinds = list(result.maps.values())
    return any(map(is_pair_map, kinds)) and any(map(is_token_map, kinds))


EXAMPLES = ("One sentence's maps: attention averaged over heads and layers and as a layer x head grid (ConvBERT Fig. "
            "2); for the S-LSTM its gates, for the Graph-Transformer its per-order attentions.")
ANALYSIS = Analysis(
    name="maps",
    inputs=Sentences(maps=True, token_states=False),  # maps only: the cache entry keeps no token states
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("maps-{}", plot_examples, EXAMPLES, each=lambda r: r.model_name, single=True),
        Figure("maps-{}-tokens", plot_token_maps, EXAMPLES, each=lambda r: r.model_name if both_kinds(r) else None,
               single=True),
        Figure("maps-locality", plot, "Attention mass by relative offset i - j and the share within the local window "
               "per layer: how diagonal (local) each model's maps are (ConvBERT Fig. 2)."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "8", "--examples", "1"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line
