"""S-LSTM gate maps: per-token maps (one token axis) summarised over a corpus, and their figures.

Maps with one token axis, (L, K, n) per sentence (``token_axes: 1`` in ``acts.meta["maps"]``; the
S-LSTM, which has no attention): ``gates`` (its five softmaxed cell gates input/left/right/self/
sentence, mean over hidden units), ``gates_dominant`` (share of hidden units where each gate weighs
most) and ``sentence_weights`` (the sentence node's weights over the tokens). The component names
come from the encoder (``MapSpec.components``), not from a copy here.

* Per-token shares (gates): per layer and component, the mean over the kept tokens of the corpus
  (every token counts once), and the profile by relative position (i + 0.5) / m of kept token i of m.
* Weights over tokens (``sentence_weights``): renormalised over the kept tokens of each sentence;
  per layer the mean normalised entropy H(p) / log m (1 = uniform), the weight by relative position
  as m * p_i (1 = uniform), the captured mass on the kept tokens and the node's own-cell weight
  (1 - the captured sum over all tokens).
* Figures: the example sentence's maps as layer x component x token heatmaps
  (:func:`plot_token_maps`); gate shares by layer (:func:`plot_gate_shares`, a panel of the
  maps-locality figure).

Part of ``python -m analyses.maps`` (one result per model holds both kinds of map).
"""

from __future__ import annotations

import numpy as np

from analyses import style
from analyses.maps.common import (
    GRID_DECIMALS,
    MAP_TITLES,
    Config,
    Result,
    layer_axis,
    shorten,
    text_keep,
    text_map,
)
from analyses.maps.rows import COMPONENTS, WEIGHTS, CapturedSums, TokenMap
from probes.capture.activations import Activations
from probes.errors import ProbeError

# one-token-axis maps whose K rows are weights over the tokens (renormalised over the kept ones);
# every other one-axis map holds per-token values of K components (e.g. gate shares summing to 1 over K)
TOKEN_DISTRIBUTIONS = ("sentence_weights",)


def over_tokens(m: TokenMap) -> bool:
    """Whether a per-token map summary holds weights over the tokens (else per-token component values)."""
    return m.over_tokens


def map_token_axes(acts: Activations, name: str) -> int:
    """1 for per-token maps (L, K, n), 2 for token-pair maps (L, K, n, n)."""
    spec = acts.meta.get("maps", {}).get(name)
    if spec and "token_axes" in spec:
        return int(spec["token_axes"])
    return text_map(acts, name, 0).ndim - 2


def component_labels(acts: Activations, name: str, k: int) -> list[str]:
    """The names of map ``name``'s k components as the encoder declared them (else k1..kK)."""
    labels = acts.meta.get("maps", {}).get(name, {}).get("components")
    return list(labels) if labels and len(labels) == k else [f"k{c + 1}" for c in range(k)]


def renormalise_over_tokens(w: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """(L, K, n) weights over tokens -> (L, K, m): the m kept tokens, each row rescaled to sum to 1
    (a row with no mass on the kept tokens stays 0)."""
    sub = np.asarray(w, np.float64)[..., np.asarray(keep, bool)]
    s = sub.sum(-1, keepdims=True)
    return np.divide(sub, s, out=np.zeros_like(sub), where=s > 0)


def normalised_entropy(p: np.ndarray) -> np.ndarray:
    """(..., m) distributions -> (...): H(p) / log m in [0, 1] (1 = uniform); NaN for m < 2."""
    p = np.asarray(p, np.float64)
    m = p.shape[-1]
    if m < 2:
        return np.full(p.shape[:-1], np.nan)
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(-1) / np.log(m)


def position_bins(m: int, bins: int) -> np.ndarray:
    """(m,) the bin of each of m tokens by relative position (i + 0.5) / m, bins of width 1 / bins."""
    return np.minimum((bins * (np.arange(m) + 0.5) / m).astype(int), bins - 1)


def nan_to_none(a: np.ndarray):
    """Nested lists of floats with NaN -> None (JSON null: an empty bin)."""
    return [(nan_to_none(x) if isinstance(x, np.ndarray) else None if np.isnan(x) else float(x)) for x in a]


def summarise_token_map(acts: Activations, name: str, cfg: Config, examples: list[int]) -> TokenMap:
    """Corpus summary of one per-token map kind (L, K, n), plus the example maps for the figure."""
    weighted = name in TOKEN_DISTRIBUTIONS
    B = cfg.position_bins
    # sums over texts, from the first text kept on: (L, K), prof (L, K, B)
    total: np.ndarray | None = None
    prof: np.ndarray | None = None
    ent: np.ndarray | None = None
    cv: np.ndarray | None = None
    kept_mass: np.ndarray | None = None
    own: np.ndarray | None = None
    counts = np.zeros(B)
    n_tokens = n_texts = n_ent = 0
    captured = []
    for t in range(acts.n_texts):
        m = np.asarray(text_map(acts, name, t), np.float64)
        keep = text_keep(acts, t, cfg.keep_special)
        if not keep.any():
            continue
        if total is None:
            total, prof = np.zeros(m.shape[:2]), np.zeros((*m.shape[:2], B))
            ent, cv, kept_mass, own = (np.zeros(m.shape[:2]) for _ in range(4))
        q = int(keep.sum())
        if weighted:
            captured.append(m.sum(-1).ravel())  # per row: the captured mass over all tokens
            kept_mass += m[..., keep].sum(-1)
            own += 1 - m.sum(-1)
            x = renormalise_over_tokens(m, keep)
            vals = x * q  # relative to uniform over the kept tokens
            if q >= 2:
                ent += normalised_entropy(x)
                cv += vals.std(-1)
                n_ent += 1
        else:
            captured.append(m.sum(1).ravel())  # per token: the sum over components
            vals = x = m[..., keep]
        total += x.sum(-1)
        onehot = (position_bins(q, B)[:, None] == np.arange(B)).astype(np.float64)  # (q, B)
        prof += vals @ onehot
        counts += onehot.sum(0)
        n_tokens += q
        n_texts += 1
    if (n_texts == 0 or total is None or prof is None or ent is None or cv is None or kept_mass is None
            or own is None):  # the sums are None exactly when no text was kept
        raise ProbeError("no sentence has a token left once special tokens are dropped; try --keep-special")
    with np.errstate(invalid="ignore", divide="ignore"):
        prof = prof / counts
    cs = np.concatenate(captured)
    L, K = total.shape
    ex_maps = []
    for t in examples:
        m, keep = text_map(acts, name, t), text_keep(acts, t, cfg.keep_special)
        x = renormalise_over_tokens(m, keep) if weighted else np.asarray(m, np.float64)[..., keep]
        ex_maps.append(np.round(x, GRID_DECIMALS))
    mean = total / n_tokens
    return TokenMap(
        token_axes=1, layers=L, components=component_labels(acts, name, K), kind=WEIGHTS if weighted else COMPONENTS,
        n_texts=n_texts, n_tokens=n_tokens,
        captured_sums=CapturedSums(over="tokens" if weighted else "components", min=float(cs.min()),
                                   max=float(cs.max()), mean=float(cs.mean())),
        position_bin_edges=np.linspace(0, 1, B + 1),
        position_tokens=counts,  # (B,) kept tokens per bin
        position_profile=nan_to_none(prof),  # (L, K, B); None for an empty bin
        **(dict(normalised_entropy=ent / max(n_ent, 1), weight_cv=cv / max(n_ent, 1), entropy_texts=n_ent,
                mass_on_kept_tokens=kept_mass / n_texts, self_weight=own / n_texts) if weighted else
           dict(component_mean=mean, component_mean_overall=mean.mean(0))),
        example_maps=ex_maps)  # per example: (L, K, m)


def token_rows(name: str, m: TokenMap) -> list[dict]:
    """Long rows (map, layer, component, statistic, value) of one per-token map kind."""
    rows = []
    edges = m.position_bin_edges
    stats = ["normalised_entropy", "weight_cv", "mass_on_kept_tokens", "self_weight"] if over_tokens(m) else \
        ["component_mean"]
    for lyr in range(m.layers):
        for c, comp in enumerate(m.components):
            for stat in stats:
                rows.append({"map": name, "layer": lyr + 1, "component": comp, "statistic": stat.replace(
                    "component_", ""), "value": m.statistic(stat)[lyr][c]})
            for b, v in enumerate(m.position_profile[lyr][c]):
                rows.append({"map": name, "layer": lyr + 1, "component": comp,
                             "statistic": f"position_{edges[b]:.2f}-{edges[b + 1]:.2f}", "value": v})
    return rows


def gate_maps(results: list[Result]):
    """(model, map name, summary) of every per-token component map (S-LSTM gates)."""
    return [(res.model_name, name, m) for res in results for name, m in res.maps.tokens() if not over_tokens(m)]


def plot_gate_shares(ax, gates, drawn: style.Drawn | None = None) -> None:
    """Mean gate weight (solid) and dominant-gate share (dashed) by layer, one colour per gate (a
    marker per model; relative depth on x when the models' depths differ). With ``drawn`` (one result on a
    caller's Axes, ``Result.plot``): in the result's colour and keywords, a marker per gate, each mean-weight
    line labelled "<label>: <gate>" (the caller draws the legend); the y range then grows to hold what the
    Axes already shows."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    styles = {"gates": "-", "gates_dominant": "--"}
    markers = "os^Dv"
    models = list(dict.fromkeys(model for model, _, _ in gates))
    xlabel, layer_x = layer_axis([len(m.component_mean) for _, _, m in gates])
    n_layers, k_max, values = 1, 1, []
    shown = ax.get_ylim() if drawn is not None and ax.has_data() else None
    for model, name, m in gates:
        mean = np.asarray(m.component_mean)  # (L, K)
        layers = layer_x(len(mean))
        n_layers, k_max = max(n_layers, len(mean)), max(k_max, mean.shape[1])
        values.append(mean.ravel())
        for c in range(mean.shape[1]):
            if drawn is None:
                ax.plot(layers, mean[:, c], color=plt.cm.Set1(c % 9), ls=styles.get(name, ":"),
                        marker=markers[models.index(model) % len(markers)], ms=3.5, lw=1.3)
            else:
                line = drawn.series(c, str(m.components[c]) if c < len(m.components) else f"gate {c}",
                                    ms=3.5, lw=1.3)
                line["linestyle"] = drawn.kw.get("linestyle", styles.get(name, ":"))
                ax.plot(layers, mean[:, c], **{**line, "label": line["label"] if name == "gates" else "_nolegend_"})
    uniform = f"uniform 1/{k_max}"
    ax.axhline(1 / k_max, color="0.5", lw=0.8, ls=":",
               label=uniform if drawn is not None and uniform not in ax.get_legend_handles_labels()[1] else None)
    if drawn is not None:
        _gate_axes(ax, xlabel, n_layers, np.concatenate([*values, [1 / k_max]]), shown)  # a caller's Axes: no title
        return
    handles = [Line2D([], [], color=plt.cm.Set1(c % 9), lw=1.5, label=comp)
               for c, comp in enumerate(gates[0][2].components)]
    names = list(dict.fromkeys(name for _, name, _ in gates))
    handles += [Line2D([], [], color="0.3", ls=styles.get(n, ":"), lw=1.2, label=MAP_TITLES.get(n, n))
                for n in names]
    if len(models) > 1:
        handles += [Line2D([], [], color="0.3", ls="none", marker=markers[i % len(markers)], label=mdl)
                    for i, mdl in enumerate(models)]
    handles.append(Line2D([], [], color="0.5", ls=":", lw=0.8, label=f"uniform 1/{k_max}"))
    ax.legend(handles=handles, fontsize="small", loc="best", ncol=2)
    who = models[0] if len(models) == 1 else "S-LSTM"
    ax.set_title(f"{who} gate shares by layer (no attention)")
    _gate_axes(ax, xlabel, n_layers, np.concatenate([*values, [1 / k_max]]))


def _gate_axes(ax, xlabel: str, n_layers: int, v: np.ndarray, shown: tuple | None = None) -> None:
    """Labels and ranges of a gate-share panel: the y range zoomed on the values ``v`` (shares near 1/K), or
    grown to hold them where the Axes already shows ``shown``."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(f"{xlabel} (recurrent step)")
    ax.set_ylabel("gate share (of 1), mean over kept tokens")
    if xlabel == "layer":
        ax.set_xlim(0.5, max(n_layers + 0.5, ax.get_xlim()[1] if shown else 0))
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    pad = max(0.02, 0.15 * (v.max() - v.min()))
    lo, hi = max(0.0, v.min() - pad), min(1.0, v.max() + pad)  # shares near 1/K: zoomed, 1/K marked
    ax.set_ylim(min(lo, shown[0]) if shown else lo, max(hi, shown[1]) if shown else hi)


@style.drawing
def plot_token_maps(result: Result, fig=None, example: int = 0):
    """One model's per-token maps (S-LSTM) for one example sentence: a (layer x component) x token
    heatmap per map kind, coloured around the uniform value (white), and, for weights over tokens, the
    corpus profile by relative position per layer. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    kinds = result.maps.tokens()
    ex = result.examples[example]
    tokens = ex.tokens
    n = len(tokens)
    weights = [(name, m) for name, m in kinds if over_tokens(m)]
    rows = [np.asarray(m.example_maps[example]).shape[0] * np.asarray(m.example_maps[example]).shape[1]
            for _, m in kinds]
    cell = 0.2
    heights = [r * cell + 0.45 for r in rows] + ([1.9] if weights else [])
    width = max(n * 0.3 + 2.6, 6.5)
    fig = style.new_figure(fig, (width, sum(heights) + 0.6))
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    policy = "special tokens kept" if result.config["keep_special"] else "special tokens dropped"
    fig.suptitle(f"{result.model_name}: per-token maps of sentence {ex.text_index} ({policy})\n"
                 f"\"{shorten(ex.text, 90)}\"", fontsize=style.points("figure.titlesize", 0.9))
    share = None
    for r, (name, m) in enumerate(kinds):
        x = np.asarray(m.example_maps[example], np.float64)  # (L, K, n)
        L, K = x.shape[:2]
        ax = fig.add_subplot(gs[r], sharex=share)
        share = share or ax
        weighted = over_tokens(m)
        centre = 1 / max(x.shape[-1], 1) if weighted else 1 / K
        lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
        norm = TwoSlopeNorm(vcenter=centre, vmin=min(lo, centre * 0.999), vmax=max(hi, centre * 1.001))
        im = ax.imshow(x.reshape(L * K, -1), cmap="RdBu_r", norm=norm, aspect="auto", interpolation="nearest")
        ax.grid(False)
        labels = [f"L{lyr + 1} {c}" if K > 1 else f"L{lyr + 1}" for lyr in range(L) for c in m.components]
        ax.set_yticks(np.arange(L * K), labels, fontsize=style.points("ytick.labelsize", 0.8 if K > 1 else 0.93))
        ax.set_ylabel("layer, component" if K > 1 else "layer", fontsize=style.points("axes.labelsize", 0.8))
        for lyr in range(1, L):
            ax.axhline(lyr * K - 0.5, color="k", lw=0.8 if K > 1 else 0.3)
        ax.tick_params(length=1.5, pad=1)
        what = "uniform 1/m" if weighted else f"uniform 1/{K}"
        ax.set_title(f"{MAP_TITLES.get(name, name)} ({name}; white = {what})", loc="left",
                     fontsize=style.points("axes.titlesize", 8 / 9))
        cb = fig.colorbar(im, ax=ax, pad=0.01, aspect=max(5, 2.5 * L * K ** 0.5), fraction=0.03)
        cb.ax.tick_params(labelsize=style.points("ytick.labelsize", 6 / 7))
        cb.set_label("weight over tokens" if weighted else "share", fontsize=style.points("axes.labelsize", 0.8))
        if r < len(kinds) - 1:
            ax.tick_params(labelbottom=False)
        else:
            ax.set_xticks(np.arange(n), tokens, rotation=90,
                          fontsize=style.points("xtick.labelsize", max(4.5 / 7, min(1.0, 160 / 7 / max(n, 1)))))
            ax.set_xlabel("kept token of the sentence", fontsize=style.points("axes.labelsize", 7 / 8))
    if weights:
        ax = fig.add_subplot(gs[-1])
        name, m = weights[0]
        edges = np.asarray(m.position_bin_edges)
        centres = (edges[:-1] + edges[1:]) / 2
        prof = np.asarray(m.position_profile, dtype=float)  # (L, K, B), None -> nan
        ent, cv = np.asarray(m.normalised_entropy), np.asarray(m.weight_cv)
        for lyr in range(prof.shape[0]):
            colour = plt.cm.viridis(lyr / max(prof.shape[0] - 1, 1))
            ax.plot(centres, prof[lyr, 0], marker="o", ms=3, lw=1.2, color=colour,
                    label=f"L{lyr + 1}: entropy {ent[lyr, 0]:.4f}, CV {cv[lyr, 0]:.2g}")
        ax.axhline(1, color="0.5", ls=":", lw=0.8)
        ax.set_xlim(0, 1)
        ax.set_xlabel("relative position in the sentence, (i + 0.5) / m (share of its length)")
        ax.set_ylabel("m * weight (1 = uniform)")
        ax.set_title(f"corpus: {MAP_TITLES.get(name, name)} by position ({m.n_texts} sentences; "
                     "normalised entropy and weight CV per layer)", loc="left",
                     fontsize=style.points("axes.titlesize", 8 / 9))
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.legend(fontsize="small", ncol=min(prof.shape[0], 2), loc="best")
    return fig
