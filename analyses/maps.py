"""Maps: where does each model look? Attention maps, ConvBERT's convolution kernels (ConvBERT Fig. 2), S-LSTM gates

Every map an encoder returns is read as (L, K, n, n) per sentence: layer, head (or kernel head),
query token i (row), key token j (column); rows are distributions over keys. That is attention
for every Transformer and, for ConvBERT, its span-based dynamic convolution kernels written into
banded maps (``probes.convbert``), so kernels sit beside attention heads.

* Examples (Fig. 2): for ``--examples`` seeded sentences, the map averaged over heads and layers,
  and a layer x head grid for the first one.
* Corpus summary, per map kind: the mass by relative offset ``d = i - j`` (query i, key j; d > 0:
  the key is to the left of / before the query, so "previous token" is d = +1 and a causal model
  has all its mass at d >= 0) for d = -W..W, per query row averaged over queries, heads and texts,
  per layer and overall; and the local share, the mass within |i - j| <= w, per layer and head.
* Special tokens ([CLS], [SEP], <s>, </s>): by default their rows and columns are removed and each
  remaining row is renormalised to sum to 1 over the kept columns; ``--keep-special`` keeps the
  maps as captured. The policy is written into the result.

Maps with one token axis, (L, K, n) per sentence (``token_axes: 1`` in ``acts.meta["maps"]``; the
S-LSTM, which has no attention): ``gates`` (its five softmaxed cell gates input/left/right/self/
sentence, mean over hidden units), ``gates_dominant`` (share of hidden units where each gate weighs
most) and ``sentence_weights`` (the sentence node's weights over the tokens).

* Per-token shares (gates): per layer and component, the mean over the kept tokens of the corpus
  (every token counts once), and the profile by relative position (i + 0.5) / m of kept token i of m.
* Weights over tokens (``sentence_weights``): renormalised over the kept tokens of each sentence;
  per layer the mean normalised entropy H(p) / log m (1 = uniform), the weight by relative position
  as m * p_i (1 = uniform), the captured mass on the kept tokens and the node's own-cell weight
  (1 - the captured sum over all tokens).
* Figure: the example sentence's maps as layer x component x token heatmaps; the locality figure
  gets a panel of gate shares by layer.

    $ python -m analyses.maps --model minilm-l6 [--model tiny-convbert] [--corpus PATH] [--n-sentences 200]
          [--local-radius 2] [--max-offset 20] [--examples 3] [--seed 0] [--keep-special] [--out out]

Writes out/results/maps/<model>.json (+ .csv, one row per map kind and layer),
out/figures/maps-<model>.{png,pdf} (averaged example maps + the layer x head grid) and
out/figures/maps-locality.{png,pdf} (offset profile and local share by layer, one line per model and map;
gate shares by layer for models with gate maps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from analyses.common import (
    SentenceConfig,
    arg,
    parse_config,
    result_header,
    run_main,
    save_figure,
)
from probes.activations import Activations
from probes.errors import ProbeError

GRID_DECIMALS = 5  # example maps stored in the JSON (for the figures) are rounded to 1e-5
MAP_TITLES = {"attention": "self-attention", "conv_kernel": "convolution kernels", "gates": "gate weights",
              "gates_dominant": "dominant gate", "sentence_weights": "sentence node's weights"}
# one-token-axis maps whose K rows are weights over the tokens (renormalised over the kept ones);
# every other one-axis map holds per-token values of K components (e.g. gate shares summing to 1 over K)
TOKEN_DISTRIBUTIONS = ("sentence_weights",)
GATES = ("input", "left", "right", "self", "sentence")  # probes.slstm.GATES (not imported: no torch here)
COMPONENT_LABELS = {"gates": GATES, "gates_dominant": GATES, "sentence_weights": ("weight",)}


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
        raise ProbeError("these activations were captured without maps: extract with attentions=True")
    return sorted(acts.maps, key=lambda name: name != "attention")  # stable: declared order after attention


def text_map(acts: Activations, name: str, t: int) -> np.ndarray:
    """(L, K, n_t, n_t) (or (L, K, n_t) for one-token-axis maps) of text t."""
    return np.asarray(acts.text_map(name, t))


def _text_keep(acts: Activations, t: int, keep_special: bool) -> np.ndarray:
    special = np.asarray(acts.special[acts.offsets[t]:acts.offsets[t + 1]], bool)
    return np.ones_like(special) if keep_special else ~special


def choose_examples(acts: Activations, cfg: Config) -> list[int]:
    """Seeded example sentences among those with 2..example_max_tokens kept tokens (else all)."""
    rng = np.random.default_rng(cfg.seed)
    n_kept = np.array([_text_keep(acts, t, cfg.keep_special).sum() for t in range(acts.n_texts)])
    pool = np.flatnonzero((n_kept >= 2) & (n_kept <= cfg.example_max_tokens))
    if len(pool) == 0:
        pool = np.flatnonzero(n_kept >= 1)
    return [int(t) for t in rng.choice(pool, size=min(cfg.examples, len(pool)), replace=False)]


# ----------------------------------------------------------------------------- compute


def summarise_map(acts: Activations, name: str, cfg: Config, examples: list[int]) -> dict:
    """Corpus summary of one map kind over every text, plus the example maps for the figures."""
    W, w = cfg.max_offset, cfg.local_radius
    profile = share = row_mass = None
    n_queries = n_texts = 0
    uniform = 0.0  # local mass of a uniform map over the same kept tokens, summed over queries
    row_sums = []
    for t in range(acts.n_texts):
        m = text_map(acts, name, t)
        if m.ndim != 4:
            return {"skipped": f"map with {m.ndim - 2} token axis: no offsets to summarise"}
        keep = _text_keep(acts, t, cfg.keep_special)
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
    if n_texts == 0:
        raise ProbeError("no sentence has a token left once special tokens are dropped; try --keep-special")
    profile, share, row_mass = profile / n_queries, share / n_queries, row_mass / n_queries
    rs = np.concatenate(row_sums)
    ex_maps = []
    for t in examples:
        sub = keep_tokens(text_map(acts, name, t), _text_keep(acts, t, cfg.keep_special), not cfg.keep_special)
        ex_maps.append(np.round(head_layer_mean(sub), GRID_DECIMALS))
    grid = keep_tokens(text_map(acts, name, examples[0]), _text_keep(acts, examples[0], cfg.keep_special),
                       not cfg.keep_special)
    L, K = share.shape
    return {
        "layers": L, "heads": K, "n_texts": n_texts, "n_queries": n_queries,
        "captured_row_sums": {"min": float(rs.min()), "max": float(rs.max()), "mean": float(rs.mean())},
        "offsets": list(range(-W, W + 1)),
        "offset_profile": profile,  # (L, 2W+1)
        "offset_profile_overall": profile.mean(0),  # (2W+1,)
        "mass_beyond_max_offset": row_mass - profile.sum(1),  # (L,): |i - j| > max_offset
        "local_share": share,  # (L, K)
        "local_share_by_layer": share.mean(1),  # (L,)
        "local_share_overall": float(share.mean()),
        "local_share_uniform": uniform / n_queries,  # baseline: every row uniform over the kept tokens
        "example_means": ex_maps,  # per example: (m, m), averaged over heads and layers
        "grid": np.round(grid, GRID_DECIMALS),  # (L, K, m, m) of examples[0]
    }


# ----------------------------------------------------------------------------- per-token maps (one token axis)
# maps: (L, K, n) for one text; [l, k, i] = component k's value at token i (gates), or the weight of
# token i (sentence_weights).


def map_token_axes(acts: Activations, name: str) -> int:
    """1 for per-token maps (L, K, n), 2 for token-pair maps (L, K, n, n)."""
    spec = acts.meta.get("maps", {}).get(name)
    if spec and "token_axes" in spec:
        return int(spec["token_axes"])
    return text_map(acts, name, 0).ndim - 2


def component_labels(name: str, k: int) -> list[str]:
    labels = COMPONENT_LABELS.get(name)
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


def _nan_to_none(a: np.ndarray):
    return [(_nan_to_none(x) if isinstance(x, np.ndarray) else None if np.isnan(x) else float(x)) for x in a]


def summarise_token_map(acts: Activations, name: str, cfg: Config, examples: list[int]) -> dict:
    """Corpus summary of one per-token map kind (L, K, n), plus the example maps for the figure."""
    over_tokens = name in TOKEN_DISTRIBUTIONS
    B = cfg.position_bins
    total = prof = ent = kept_mass = own = None
    counts = np.zeros(B)
    n_tokens = n_texts = n_ent = 0
    captured = []
    for t in range(acts.n_texts):
        m = np.asarray(text_map(acts, name, t), np.float64)
        keep = _text_keep(acts, t, cfg.keep_special)
        if not keep.any():
            continue
        if total is None:
            total, prof = np.zeros(m.shape[:2]), np.zeros((*m.shape[:2], B))
            ent, cv, kept_mass, own = (np.zeros(m.shape[:2]) for _ in range(4))
        q = int(keep.sum())
        if over_tokens:
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
    if n_texts == 0:
        raise ProbeError("no sentence has a token left once special tokens are dropped; try --keep-special")
    with np.errstate(invalid="ignore", divide="ignore"):
        prof = prof / counts
    cs = np.concatenate(captured)
    L, K = total.shape
    ex_maps = []
    for t in examples:
        m, keep = text_map(acts, name, t), _text_keep(acts, t, cfg.keep_special)
        x = renormalise_over_tokens(m, keep) if over_tokens else np.asarray(m, np.float64)[..., keep]
        ex_maps.append(np.round(x, GRID_DECIMALS))
    out = {
        "token_axes": 1, "layers": L, "components": component_labels(name, K),
        "kind": "weights over tokens" if over_tokens else "per-token component values",
        "n_texts": n_texts, "n_tokens": n_tokens,
        "captured_sums": {"over": "tokens" if over_tokens else "components",
                          "min": float(cs.min()), "max": float(cs.max()), "mean": float(cs.mean())},
        "position_bin_edges": np.linspace(0, 1, B + 1),
        "position_tokens": counts,  # (B,) kept tokens per bin
        "position_profile": _nan_to_none(prof),  # (L, K, B); None for an empty bin
    }
    if over_tokens:
        out.update({
            "normalised_entropy": ent / max(n_ent, 1),  # (L, K)
            "weight_cv": cv / max(n_ent, 1),  # (L, K)
            "entropy_texts": n_ent,
            "mass_on_kept_tokens": kept_mass / n_texts,  # (L, K)
            "self_weight": own / n_texts,  # (L, K)
        })
    else:
        mean = total / n_tokens
        out.update({"component_mean": mean, "component_mean_overall": mean.mean(0)})
    out["example_maps"] = ex_maps  # per example: (L, K, m)
    return out


def check_config(cfg: Config) -> None:
    """Bad settings fail before any model runs."""
    if cfg.local_radius < 0 or cfg.max_offset < 0 or cfg.examples < 1 or cfg.example_max_tokens < 1:
        raise ProbeError("--local-radius and --max-offset must be >= 0, --examples and --example-max-tokens >= 1")
    if cfg.position_bins < 1:
        raise ProbeError("--position-bins must be >= 1")


def compute(acts: Activations, cfg: Config | None = None) -> dict:
    """Example maps and the corpus locality summary of every map in ``acts``. Returns a JSON-ready dict."""
    cfg = cfg or Config()
    check_config(cfg)
    names = map_names(acts)
    examples = choose_examples(acts, cfg)
    if not examples:
        raise ProbeError("no sentence has a token left once special tokens are dropped; try --keep-special")
    maps = {}
    axes = {name: map_token_axes(acts, name) for name in names}
    for name in tqdm(names, desc=f"maps {acts.meta['model']['name']}", unit="map"):
        if axes[name] == 1:
            maps[name] = summarise_token_map(acts, name, cfg, examples)
        else:
            maps[name] = summarise_map(acts, name, cfg, examples)
    definitions = {}
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
        keep = _text_keep(acts, t, cfg.keep_special)
        ex.append({"text_index": t, "text": acts.texts[t], "tokens": [s for s, k in zip(acts.tokens[t], keep) if k]})
    return {
        **result_header(acts, cfg),
        "definitions": {
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
        },
        "maps_captured": names,
        "examples": ex,
        "maps": maps,
    }


def _is_pair_map(m: dict) -> bool:
    return "offset_profile" in m


def _is_token_map(m: dict) -> bool:
    return m.get("token_axes") == 1


def _token_rows(name: str, m: dict) -> list[dict]:
    """Long rows (map, layer, component, statistic, value) of one per-token map kind."""
    rows = []
    edges = m["position_bin_edges"]
    stats = ["component_mean"] if "component_mean" in m else \
        ["normalised_entropy", "weight_cv", "mass_on_kept_tokens", "self_weight"]
    for lyr in range(m["layers"]):
        for c, comp in enumerate(m["components"]):
            for stat in stats:
                rows.append({"map": name, "layer": lyr + 1, "component": comp, "statistic": stat.replace(
                    "component_", ""), "value": m[stat][lyr][c]})
            for b, v in enumerate(m["position_profile"][lyr][c]):
                rows.append({"map": name, "layer": lyr + 1, "component": comp,
                             "statistic": f"position_{edges[b]:.2f}-{edges[b + 1]:.2f}", "value": v})
    return rows


def table_rows(result: dict) -> list[dict]:
    """Flat CSV rows. Token-pair maps: one per (map, layer): local share (mean/min/max over heads) and the
    offset profile. Per-token maps: one per (map, layer, component, statistic) with its value (the mean,
    or for weights over tokens the entropy, masses and the position profile). Every row has every column."""
    rows = []
    for name, m in result["maps"].items():
        if "skipped" in m:
            continue
        if _is_token_map(m):
            rows += _token_rows(name, m)
            continue
        for lyr, (share, prof) in enumerate(zip(m["local_share"], m["offset_profile"])):
            share = np.asarray(share)
            rows.append({"map": name, "layer": lyr + 1, "heads": m["heads"], "local_share_mean": share.mean(),
                         "local_share_min": share.min(), "local_share_max": share.max(),
                         **{f"offset_{d}": v for d, v in zip(m["offsets"], prof)}})
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return [{k: r.get(k) for k in columns} for r in rows]


# ----------------------------------------------------------------------------- plot


def _summaries(results: list[dict]):
    """(colour, line style, summary, label) per model and map kind: colour = model, style = map kind."""
    styles = {"attention": "-"}
    for c, res in enumerate(results):
        for name, m in res["maps"].items():
            if "skipped" in m or not _is_pair_map(m):
                continue
            ls = styles.setdefault(name, ("--", ":", "-.")[(len(styles) - 1) % 3])
            kind = MAP_TITLES.get(name, name)
            yield f"C{c % 10}", ls, m, f"{res['model_name']} ({kind})"


def _gate_maps(results: list[dict]):
    """(model, map name, summary) of every per-token component map (S-LSTM gates)."""
    return [(res["model_name"], name, m) for res in results for name, m in res["maps"].items()
            if _is_token_map(m) and "component_mean" in m]


def plot(results: list[dict], axes=None):
    """Locality: (a) offset profile averaged over layers, (b) local share by layer (heads as dots),
    one line per model and map kind; (c) gate shares by layer when a model has gate maps (the S-LSTM,
    which has no attention). Returns the figure."""
    import matplotlib.pyplot as plt

    pair, gates = list(_summaries(results)), _gate_maps(results)
    if axes is None:
        n = (2 if pair or not gates else 0) + (1 if gates else 0)
        fig, axes = plt.subplots(1, n, figsize=(5 * n, 3.4), constrained_layout=True, squeeze=False)
    axes = list(np.ravel(axes))
    fig = axes[0].figure
    if gates:
        _plot_gate_shares(axes[-1], gates)
        axes = axes[:-1]
    if pair or not gates:
        _plot_locality(axes[0], axes[1], results)
    return fig


def _plot_gate_shares(ax, gates) -> None:
    """Mean gate weight (solid) and dominant-gate share (dashed) by layer, one colour per gate."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    styles = {"gates": "-", "gates_dominant": "--"}
    markers = "os^Dv"
    models = list(dict.fromkeys(model for model, _, _ in gates))
    n_layers, k_max, values = 1, 1, []
    for model, name, m in gates:
        mean = np.asarray(m["component_mean"])  # (L, K)
        layers = np.arange(1, len(mean) + 1)
        n_layers, k_max = max(n_layers, len(mean)), max(k_max, mean.shape[1])
        values.append(mean.ravel())
        for c in range(mean.shape[1]):
            ax.plot(layers, mean[:, c], color=plt.cm.Set1(c % 9), ls=styles.get(name, ":"),
                    marker=markers[models.index(model) % len(markers)], ms=3.5, lw=1.3)
    ax.axhline(1 / k_max, color="0.5", lw=0.8, ls=":")
    handles = [Line2D([], [], color=plt.cm.Set1(c % 9), lw=1.5, label=comp)
               for c, comp in enumerate(gates[0][2]["components"])]
    names = list(dict.fromkeys(name for _, name, _ in gates))
    handles += [Line2D([], [], color="0.3", ls=styles.get(n, ":"), lw=1.2, label=MAP_TITLES.get(n, n))
                for n in names]
    if len(models) > 1:
        handles += [Line2D([], [], color="0.3", ls="none", marker=markers[i % len(markers)], label=mdl)
                    for i, mdl in enumerate(models)]
    handles.append(Line2D([], [], color="0.5", ls=":", lw=0.8, label=f"uniform 1/{k_max}"))
    ax.legend(handles=handles, fontsize=6.5, loc="best", ncol=2)
    who = models[0] if len(models) == 1 else "S-LSTM"
    ax.set_title(f"{who} gate shares by layer (no attention)", fontsize=9)
    ax.set_xlabel("layer (recurrent step)", fontsize=8)
    ax.set_ylabel("share, mean over kept tokens", fontsize=8)
    ax.set_xlim(0.5, n_layers + 0.5)
    v = np.concatenate([*values, [1 / k_max]])
    pad = max(0.02, 0.15 * (v.max() - v.min()))
    ax.set_ylim(max(0.0, v.min() - pad), min(1.0, v.max() + pad))  # shares near 1/K: zoomed, 1/K marked
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.25, lw=0.5)


def _plot_locality(ax_p, ax_s, results: list[dict]) -> None:
    import matplotlib.pyplot as plt

    baselines = {}
    for color, ls, m, label in _summaries(results):
        ax_p.plot(m["offsets"], m["offset_profile_overall"], color=color, ls=ls, marker="o", ms=2.5, lw=1.2,
                  label=label)
        share = np.asarray(m["local_share"])  # (L, K)
        layers = np.arange(1, len(share) + 1)
        ax_s.plot(layers, share.mean(1), color=color, ls=ls, marker="o", ms=4, lw=1.4, label=label)
        jitter = (np.arange(share.shape[1]) - (share.shape[1] - 1) / 2) * min(0.5 / share.shape[1], 0.04)
        ax_s.scatter((layers[:, None] + jitter[None]).ravel(), share.ravel(), s=6, color=color, alpha=0.35, lw=0)
        if "local_share_uniform" in m and color not in baselines:  # one baseline per model
            baselines[color] = ax_s.axhline(m["local_share_uniform"], color=color, ls=":", lw=0.9,
                                            label="uniform maps, same sentences" if not baselines else None)
    cfg = results[0]["config"]
    ax_p.set_xlabel("offset i - j  (query i, key j; > 0: key before query)", fontsize=8)
    ax_p.set_ylabel("mass per query row", fontsize=8)
    ax_p.set_title("attention mass by relative offset (mean over layers)", fontsize=9)
    ax_p.set_ylim(bottom=0)
    ax_p.axvline(0, color="0.5", lw=0.6, ls=":")
    ax_s.set_xlabel("layer", fontsize=8)
    ax_s.set_ylabel(f"share within |i - j| <= {cfg['local_radius']}", fontsize=8)
    ax_s.set_title("local share by layer (line: mean over heads; dots: heads)", fontsize=9)
    ax_s.set_ylim(0, 1.02)
    ax_s.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    n_layers = max((len(m["local_share"]) for _, _, m, _ in _summaries(results)), default=1)
    ax_s.set_xlim(0.5, n_layers + 0.5)
    for ax in (ax_p, ax_s):
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.25, lw=0.5)
    policy = "special tokens kept" if cfg["keep_special"] else "[CLS]/[SEP] dropped, rows renormalised"
    without = [res["model_name"] for res in results
               if not any(_is_pair_map(m) for m in res["maps"].values() if "skipped" not in m)]
    if without:
        ax_p.text(0.98, 0.97, "no attention or kernel maps: " + ", ".join(without), transform=ax_p.transAxes,
                  ha="right", va="top", fontsize=6.5, color="0.35")
    if ax_s.get_legend_handles_labels()[0]:
        ax_s.legend(fontsize=7, loc="best", title=policy, title_fontsize=7)


def _token_labels(ax, tokens: list[str], fontsize: float) -> None:
    ticks = np.arange(len(tokens))
    ax.set_xticks(ticks, tokens, rotation=90, fontsize=fontsize)
    ax.set_yticks(ticks, tokens, fontsize=fontsize)
    ax.tick_params(length=1.5, pad=1)


def plot_examples(result: dict, fig=None):
    """One model: Fig. 2-style maps of the example sentences (averaged over heads and layers; one row
    per map kind) above the layer x head grid of the first example. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import PowerNorm

    kinds = [(n, m) for n, m in result["maps"].items() if "skipped" not in m and _is_pair_map(m)]
    if not kinds:
        return plot_token_maps(result, fig)
    examples = result["examples"]
    E, R = len(examples), len(kinds)
    heads = [m["heads"] for _, m in kinds]
    L = max(m["layers"] for _, m in kinds)
    cell = 0.62 if sum(heads) <= 16 else 0.45
    grid_w = sum(heads) * cell + 1.0 * R
    width = max(3.4 * E + 0.8, grid_w, 6.0)
    top_h, grid_h = 4.1 * R + 0.3, L * cell + 0.9
    if fig is None:
        fig = plt.figure(figsize=(width, top_h + grid_h), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[top_h, grid_h], hspace=0.04)
    policy = "special tokens kept" if result["config"]["keep_special"] else "[CLS]/[SEP] dropped, rows renormalised"
    top.suptitle(f"{result['model_name']}: maps averaged over heads and layers ({policy})", fontsize=10)
    axes = np.atleast_2d(top.subplots(R, E, squeeze=False))
    gamma = 0.5
    for r, (name, m) in enumerate(kinds):
        vmax = max(float(np.max(a)) for a in m["example_means"]) or 1.0
        for c, ex in enumerate(examples):
            ax = axes[r, c]
            im = ax.imshow(np.asarray(m["example_means"][c]), cmap="viridis",
                           norm=PowerNorm(gamma, vmin=0, vmax=vmax), interpolation="nearest")
            n = len(ex["tokens"])
            _token_labels(ax, ex["tokens"], fontsize=max(3.5, min(7.0, 150 / max(n, 1))))
            ax.set_title(f"{MAP_TITLES.get(name, name)}: sentence {ex['text_index']}", fontsize=8)
            if c == 0:
                ax.set_ylabel("query i", fontsize=7)
            ax.set_xlabel("key j", fontsize=7, labelpad=1)
        cb = top.colorbar(im, ax=axes[r, :].tolist(), shrink=0.8, pad=0.01)
        cb.set_label("weight (sqrt scale)", fontsize=7)
        cb.ax.tick_params(labelsize=6)
    bottom.suptitle(f"layer x head maps of sentence {examples[0]['text_index']} "
                    f"(\"{_shorten(examples[0]['text'])}\")", fontsize=9)
    sub = np.atleast_1d(bottom.subfigures(1, R, width_ratios=[h + 1.2 for h in heads], wspace=0.02))
    for sf, (name, m) in zip(sub, kinds):
        grid = np.asarray(m["grid"])  # (L, K, n, n)
        gax = sf.subplots(m["layers"], m["heads"], squeeze=False, gridspec_kw={"wspace": 0.05, "hspace": 0.05})
        norm = PowerNorm(gamma, vmin=0, vmax=float(grid.max()) or 1.0)
        for lyr in range(m["layers"]):
            for h in range(m["heads"]):
                ax = gax[lyr, h]
                im = ax.imshow(grid[lyr, h], cmap="viridis", norm=norm, interpolation="nearest")
                ax.set_xticks([])
                ax.set_yticks([])
                if lyr == 0:
                    ax.set_title(f"h{h + 1}", fontsize=6, pad=2)
                if h == 0:
                    ax.set_ylabel(f"L{lyr + 1}", fontsize=6, rotation=0, ha="right", va="center", labelpad=2)
        sf.suptitle(MAP_TITLES.get(name, name), fontsize=8)
        cb = sf.colorbar(im, ax=gax.ravel().tolist(), shrink=0.6, pad=0.02, aspect=30)
        cb.ax.tick_params(labelsize=6)
    return fig


def plot_token_maps(result: dict, fig=None, example: int = 0):
    """One model's per-token maps (S-LSTM) for one example sentence: a (layer x component) x token
    heatmap per map kind, coloured around the uniform value (white), and, for weights over tokens, the
    corpus profile by relative position per layer. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    kinds = [(n, m) for n, m in result["maps"].items() if _is_token_map(m)]
    ex = result["examples"][example]
    tokens = ex["tokens"]
    n = len(tokens)
    weights = [(name, m) for name, m in kinds if "component_mean" not in m]
    rows = [np.asarray(m["example_maps"][example]).shape[0] * np.asarray(m["example_maps"][example]).shape[1]
            for _, m in kinds]
    cell = 0.2
    heights = [r * cell + 0.45 for r in rows] + ([1.9] if weights else [])
    width = max(n * 0.3 + 2.6, 6.5)
    if fig is None:
        fig = plt.figure(figsize=(width, sum(heights) + 0.6), layout="constrained")
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    policy = "special tokens kept" if result["config"]["keep_special"] else "special tokens dropped"
    fig.suptitle(f"{result['model_name']}: per-token maps of sentence {ex['text_index']} ({policy})\n"
                 f"\"{_shorten(ex['text'], 90)}\"", fontsize=9)
    share = None
    for r, (name, m) in enumerate(kinds):
        x = np.asarray(m["example_maps"][example], np.float64)  # (L, K, n)
        L, K = x.shape[:2]
        ax = fig.add_subplot(gs[r], sharex=share)
        share = share or ax
        over_tokens = "component_mean" not in m
        centre = 1 / max(x.shape[-1], 1) if over_tokens else 1 / K
        lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
        norm = TwoSlopeNorm(vcenter=centre, vmin=min(lo, centre * 0.999), vmax=max(hi, centre * 1.001))
        im = ax.imshow(x.reshape(L * K, -1), cmap="RdBu_r", norm=norm, aspect="auto", interpolation="nearest")
        labels = [f"L{lyr + 1} {c}" if K > 1 else f"L{lyr + 1}" for lyr in range(L) for c in m["components"]]
        ax.set_yticks(np.arange(L * K), labels, fontsize=5.5 if K > 1 else 6.5)
        for lyr in range(1, L):
            ax.axhline(lyr * K - 0.5, color="k", lw=0.8 if K > 1 else 0.3)
        ax.tick_params(length=1.5, pad=1)
        what = "uniform 1/m" if over_tokens else f"uniform 1/{K}"
        ax.set_title(f"{MAP_TITLES.get(name, name)} ({name}; white = {what})", fontsize=8, loc="left")
        cb = fig.colorbar(im, ax=ax, pad=0.01, aspect=max(5, 2.5 * L * K ** 0.5), fraction=0.03)
        cb.ax.tick_params(labelsize=6)
        cb.set_label("weight over tokens" if over_tokens else "share", fontsize=6.5)
        if r < len(kinds) - 1:
            ax.tick_params(labelbottom=False)
        else:
            ax.set_xticks(np.arange(n), tokens, rotation=90, fontsize=max(4.5, min(7.0, 160 / max(n, 1))))
    if weights:
        ax = fig.add_subplot(gs[-1])
        name, m = weights[0]
        edges = np.asarray(m["position_bin_edges"])
        centres = (edges[:-1] + edges[1:]) / 2
        prof = np.asarray(m["position_profile"], dtype=float)  # (L, K, B), None -> nan
        ent, cv = np.asarray(m["normalised_entropy"]), np.asarray(m["weight_cv"])
        for lyr in range(prof.shape[0]):
            colour = plt.cm.viridis(lyr / max(prof.shape[0] - 1, 1))
            ax.plot(centres, prof[lyr, 0], marker="o", ms=3, lw=1.2, color=colour,
                    label=f"L{lyr + 1}: entropy {ent[lyr, 0]:.4f}, CV {cv[lyr, 0]:.2g}")
        ax.axhline(1, color="0.5", ls=":", lw=0.8)
        ax.set_xlim(0, 1)
        ax.set_xlabel("relative position in the sentence, (i + 0.5) / m", fontsize=7)
        ax.set_ylabel("m * weight (1 = uniform)", fontsize=7)
        ax.set_title(f"corpus: {MAP_TITLES.get(name, name)} by position ({m['n_texts']} sentences; "
                     "normalised entropy and weight CV per layer)", fontsize=8, loc="left")
        ax.tick_params(labelsize=6.5)
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.grid(alpha=0.25, lw=0.5)
        ax.legend(fontsize=6, ncol=min(prof.shape[0], 2), loc="best")
    return fig


def _shorten(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def figures(results: list[dict], out: str) -> list:
    """Draw and save maps-<model> for each result and maps-locality for all of them."""
    import matplotlib.pyplot as plt

    paths = []
    for res in results:
        fig = plot_examples(res)
        paths += save_figure(fig, out, f"maps-{res['model_name']}")
        plt.close(fig)
        kinds = [m for m in res["maps"].values() if "skipped" not in m]
        if any(map(_is_pair_map, kinds)) and any(map(_is_token_map, kinds)):  # both: the per-token ones apart
            fig = plot_token_maps(res)
            paths += save_figure(fig, out, f"maps-{res['model_name']}-tokens")
            plt.close(fig)
    fig = plot(results)
    paths += save_figure(fig, out, "maps-locality")
    plt.close(fig)
    return paths


# ----------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> None:
    from analyses.data import run_sentence_analysis

    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    check_config(cfg)
    run_sentence_analysis("maps", cfg, compute, table_rows, figures, maps=True)


if __name__ == "__main__":
    run_main(main)
