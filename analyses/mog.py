"""Graph-Transformer subgraph weights and per-order attention (Duan & Zhao, Fig. 9 and Fig. 10).

Reads the maps :mod:`probes.models.mog_encoder` captures (no model runs here):

* Fig. 9: the weight-gate's w (Eq. 16; map ``subgraph_weight``, the mean over hidden units per
  token) averaged over a sentence's real tokens (special tokens excluded), then over the sentences
  of each length bucket (length = real tokens), per encoder layer, with the numbers behind the
  paper's three claims in ``claims`` (numbers only: whether a claim holds is decided once, by
  :mod:`analyses.summary.claims`, from ``w_by_bucket`` and ``w_layer_mean``): (1) longer sentences
  get larger w at every layer (the longest used bucket minus the shortest per layer, the share of
  rising bucket steps; Spearman's rho between a sentence's length and its mean w per layer, with
  its p-value); (2) w rises with the layer (the share of rising layer steps); (3) a dip at layer 4
  (w_4 - w_3; null for models with < 4 layers; the claim also compares w_4 with w_5). Buckets with
  fewer than ``min_bucket`` sentences are reported but not used in (1). Self-gate models get the
  layer-mean 3 x 3 slot weights instead (no w exists for them).
* Fig. 10: the three attention matrices (high: Q^i K^i; middle: Q^i K^p and Q^p K^i) of one
  sentence at a chosen layer (mean over heads), and for "smoother" the mean row entropy of each
  order's attention per layer (nats, and divided by log n so sentences of different lengths
  compare), over every row of every head of every sentence; the claim compares per layer the
  high-order normalised entropy with both middle-order ones (:meth:`Result.smoothness_margin`).

Deviation: the paper buckets by source-sentence length on WMT En-De with its own (unstated)
bucket edges; we bucket our corpus sentences by subword tokens with ``--edges``.

    $ python -m analyses.mog --model mog-small --model mog-small-6l [--n-sentences 1000] [--layer 4]
          [--edges 10 --edges 20 --edges 30 --edges 40] [--out out]

Writes out/results/mog/<model>.json (+ .csv: one row per layer and bucket) and
out/figures/mog-subgraph-weights.{png,pdf} (Fig. 9: one panel per weight-gate model) and
out/figures/mog-attention-<model>.{png,pdf} (Fig. 10 + the entropy panel).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy.stats import spearmanr

from analyses import common, records, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import activations_identity
from analyses.inputs import Sentences
from analyses.records import omitted
from analyses.style import model_color
from probes.capture.activations import Activations
from probes.config import arg
from probes.errors import ProbeError

ORDERS = ("attention_high", "attention_middle_qi", "attention_middle_qp")
ORDER_LABELS = {"attention_high": "high  (Q^i, K^i)", "attention_middle_qi": "middle (Q^i, K^p)",
                "attention_middle_qp": "middle (Q^p, K^i)"}


@dataclass
class Config(common.SentenceConfig):
    """Graph-Transformer subgraph weights by length and layer (Fig. 9) and per-order attention (Fig. 10)."""

    model: list[str] = arg(["mog-small"], "Graph-Transformer checkpoints (family mog) from checkpoints.yaml")
    n_sentences: int = arg(1000, "random sentences (seeded sample, as the other sentence analyses)", min=1)
    edges: list[int] = arg([10, 20, 30, 40], "length-bucket edges in real tokens: [<e1, e1..e2-1, ..., >=ek]",
                           min=1)
    min_bucket: int = arg(10, "buckets with fewer sentences are reported but not used in the length claim", min=1)
    layer: int = arg(0, "layer of the Fig. 10 example matrices (1..L; 0 = the last layer)", min=0)
    example_length: int = arg(15, "the example sentence is the first of the sample with this many real tokens "
                                  "(or the closest length)", min=1)


@dataclass
class Rho:
    """Spearman's rho between a sentence's length and its mean w at one layer, with its p-value (None: undefined,
    a constant length or w)."""

    rho: float | None
    p: float | None


@dataclass
class Fig9Claims:
    """The numbers behind Fig. 9's claims of a weight-gate model (numbers only; the verdicts are
    :mod:`analyses.summary.claims`'): the length buckets used, the longest used bucket minus the shortest per layer
    and the share of rising bucket steps (None: fewer than two used buckets), the share of rising layer steps (None:
    one layer) and w_4 - w_3 (None: fewer than 4 layers). Another fusion has none (saved as ``{}``)."""

    buckets_used: int | None = None  # None: not a weight-gate model
    longest_minus_shortest: list[float] | None = None
    rising_bucket_steps_share: float | None = None
    rising_layer_steps_share: float | None = None
    w4_minus_w3: float | None = None

    def to_json(self) -> dict[str, Any]:
        if self.buckets_used is None:
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass
class ByOrder:
    """A number per layer for each attention order (:data:`ORDERS`)."""

    attention_high: list[float]
    attention_middle_qi: list[float]
    attention_middle_qp: list[float]

    def of(self, order: str) -> list[float]:
        return {"attention_high": self.attention_high, "attention_middle_qi": self.attention_middle_qi,
                "attention_middle_qp": self.attention_middle_qp}[order]


@dataclass(kw_only=True)
class Example:
    """Fig. 10's example sentence: its text, tokens (specials included), the layer drawn, its index in the sample
    (None in files written before it was saved) and each order's (n, n) head-mean attention matrix."""

    text: str
    tokens: list[str]
    layer: int
    text_index: int | None = omitted()
    attention_high: list[list[float]]
    attention_middle_qi: list[list[float]]
    attention_middle_qp: list[list[float]]

    def of(self, order: str) -> list[list[float]]:
        return {"attention_high": self.attention_high, "attention_middle_qi": self.attention_middle_qi,
                "attention_middle_qp": self.attention_middle_qp}[order]


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """Numbers of one model (prose lives only in ``definitions``; nothing reads numbers from it)."""

    fusion: str
    n_layers: int
    bucket_labels: list[str]
    bucket_counts: list[int]
    w_by_bucket: list[list[float | None]] | None  # (buckets, L) mean w; None for non-weight-gate models
    w_layer_mean: list[float] | None  # (L,) mean w over all sentences
    spearman_length: list[Rho] | None  # per layer
    claims: Fig9Claims  # the numbers behind the paper's Fig. 9 claims (weight-gate models; empty otherwise)
    slot_weights: list | None  # (L, 3, 3) self-gate slot weights, mean over tokens; None otherwise
    entropy: ByOrder  # order -> (L,) mean row entropy (nats); entropy_normalised likewise in [0, 1]
    entropy_normalised: ByOrder
    example: Example  # Fig. 10's sentence and each order's (n, n) head-mean matrix
    definitions: records.Definitions = field(default_factory=records.Definitions)
    FIRST_LAYER: ClassVar[int] = 1  # maps come from layers 1..L

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: Fig. 9's
        mean subgraph weight w per layer and length bucket for a weight-gate model; for another fusion, each
        order's mean row entropy per layer (Fig. 10's right panel); a marker and line style per bucket or
        order. ``kwargs`` (``color=``, ``label=``, ``linewidth=`` ...) go to the lines; without ``color=`` the
        result takes the next colour of the Axes' cycle; the labels ("<model>: <bucket or order>") enter the
        legend, so results drawn on one Axes overlay. Fonts and colours follow the caller's rcParams. Returns
        the Axes."""
        ax = style.one_axes(ax, (3.6, 2.8))
        drawn = style.on_axes(ax, self, kwargs)
        if self.w_by_bucket is not None:
            _weights_panel(ax, self, drawn)
            ax.set_ylabel("mean subgraph weight w (of 1)")
            return style.finish(ax, title="tokens (sentences)")
        _entropy_panel(ax, self, drawn)
        return style.finish(ax, title="smoother = higher")

    def headline_numbers(self) -> dict[str, stats.Sample]:
        out = {} if self.w_layer_mean is None else {"mean high-order weight w": stats.Sample(
            float(np.mean([w for w in self.w_layer_mean if w is not None])))}
        return {**out, "high - middle normalised entropy, mean over layers": stats.Sample(
            float(np.mean(self.smoothness_margin())))}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: a weight-gate model's mean w per layer in the first length bucket that
        holds sentences; another fusion's first order's normalised mean row entropy per layer."""
        if self.w_by_bucket is None:
            return common.as_floats(self.entropy_normalised.of(ORDERS[0]))
        return common.as_floats(self.w_by_bucket[next(k for k, n in enumerate(self.bucket_counts) if n)])

    def headline(self) -> dict[str, str]:
        out = {"fusion": self.fusion}
        if self.w_layer_mean is not None:
            out["mean w by layer"] = ", ".join(f"{w:.3f}" for w in self.w_layer_mean)
        out["high - middle normalised entropy by layer"] = ", ".join(f"{m:+.3f}" for m in self.smoothness_margin())
        return out

    def used_bucket_weights(self) -> np.ndarray | None:
        """(buckets with at least ``min_bucket`` sentences, L) mean w, shortest bucket first (an empty
        bucket's w NaN); None for a model without the weight-gate."""
        if self.w_by_bucket is None:
            return None
        used = np.asarray(self.bucket_counts) >= self.config["min_bucket"]
        return np.array(self.w_by_bucket, dtype=np.float64)[used]

    def smoothness_margin(self) -> list[float]:
        """Per layer: the high-order attention's normalised row entropy minus the larger of the two
        middle-order ones (>= 0: the high order is at least as smooth, Fig. 10)."""
        high, qi, qp = (self.entropy_normalised.of(o) for o in ORDERS)
        return [h - max(a, b) for h, a, b in zip(high, qi, qp)]


# ----------------------------------------------------------------------------- statistics


def bucket_of(lengths: np.ndarray, edges: list[int]) -> np.ndarray:
    """Bucket index per length: 0 for < edges[0], i for edges[i-1] <= n < edges[i], k for >= edges[-1]."""
    return np.searchsorted(np.asarray(edges), lengths, side="right")


def bucket_labels(edges: list[int]) -> list[str]:
    e = list(edges)
    return [f"<{e[0]}"] + [f"{a}-{b - 1}" for a, b in zip(e[:-1], e[1:])] + [f">={e[-1]}"]


def row_entropy(P: np.ndarray) -> np.ndarray:
    """Entropy (nats) of every row of attention maps P (..., n, n) whose rows sum to 1."""
    P = np.asarray(P, dtype=np.float64)
    return -np.sum(np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0), axis=-1)


def fig9_claims(w_by_bucket: np.ndarray, counts: np.ndarray, min_bucket: int) -> dict[str, Any]:
    """The numbers behind Fig. 9's length claim from (buckets, L) mean weights (NaN = empty bucket): the
    buckets used, the longest used bucket minus the shortest per layer, the share of rising bucket steps."""
    used = w_by_bucket[counts >= min_bucket]
    out: dict = {"buckets_used": int(len(used))}
    if len(used) >= 2:
        out["longest_minus_shortest"] = (used[-1] - used[0]).tolist()
        out["rising_bucket_steps_share"] = float(np.mean(np.diff(used, axis=0) > 0))  # of (buckets-1, L) steps
    else:
        out.update(longest_minus_shortest=None, rising_bucket_steps_share=None)
    return out


def layer_claims(w_layer: np.ndarray) -> dict[str, Any]:
    """The numbers behind claims (2) w rises with the layer (the share of rising steps) and (3) a dip at
    layer 4 (w_4 - w_3), from (L,) mean weights."""
    L = len(w_layer)
    return {"rising_layer_steps_share": float(np.mean(np.diff(w_layer) > 0)) if L > 1 else None,
            "w4_minus_w3": float(w_layer[3] - w_layer[2]) if L >= 4 else None}


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """Fig. 9 and Fig. 10 statistics of one Graph-Transformer's captured maps."""
    cfg = cfg or Config()
    missing = [m for m in ORDERS if m not in acts.maps]
    if missing:
        raise ProbeError(f"model '{acts.meta['model']['name']}' has no map {missing[0]}: analyses.mog needs a "
                         f"Graph-Transformer (family mog) captured with maps")
    if list(cfg.edges) != sorted(set(cfg.edges)) or not cfg.edges or cfg.edges[0] < 1:
        raise ProbeError(f"--edges must be increasing positive token counts, got {cfg.edges}")
    T, L = acts.n_texts, acts.n_layers
    layer = cfg.layer or L
    if not 1 <= layer <= L:
        raise ProbeError(f"--layer {cfg.layer} is outside 1..{L}")
    fusion = acts.meta["model"].get("fusion", "sum")
    real = [~acts.special[acts.offsets[t]:acts.offsets[t + 1]] for t in range(T)]
    lengths = np.array([int(r.sum()) for r in real])
    if np.any(lengths == 0):
        raise ProbeError("a sentence has no real tokens")
    ent = {m: np.zeros(L) for m in ORDERS}
    ent_n = {m: np.zeros(L) for m in ORDERS}
    rows = 0
    w_text = np.full((T, L), np.nan)
    slots = np.zeros((L, 3, 3))
    for t in range(T):
        n = len(real[t])
        for m in ORDERS:
            H = row_entropy(acts.text_map(m, t))  # (L, heads, n)
            ent[m] += H.sum((1, 2))
            ent_n[m] += (H / np.log(n)).sum((1, 2)) if n > 1 else 0.0
        rows += acts.text_map(ORDERS[0], t).shape[1] * n
        if fusion == "weight-gate":
            w_text[t] = acts.text_map("subgraph_weight", t)[:, 0, real[t]].mean(-1)
        elif fusion == "self-gate":
            slots += acts.text_map("subgraph_weight", t)[:, :, real[t]].sum(-1).reshape(L, 3, 3)
    labels = bucket_labels(cfg.edges)
    b = bucket_of(lengths, cfg.edges)
    counts = np.bincount(b, minlength=len(labels))
    w_by_bucket = w_layer = spear = None
    claims = Fig9Claims()
    if fusion == "weight-gate":
        wb = np.full((len(labels), L), np.nan)
        for k in range(len(labels)):
            if counts[k]:
                wb[k] = w_text[b == k].mean(0)
        w_layer = w_text.mean(0)
        spear = []
        for j in range(L):
            defined = np.ptp(lengths) > 0 and np.ptp(w_text[:, j]) > 0  # else rho is undefined: null
            rho, p = spearmanr(lengths, w_text[:, j]) if defined else (np.nan, np.nan)
            spear.append(Rho(rho=None if np.isnan(rho) else float(rho), p=None if np.isnan(p) else float(p)))
        claims = Fig9Claims(**fig9_claims(wb, counts, cfg.min_bucket), **layer_claims(w_layer))
        w_by_bucket = [[None if np.isnan(v) else float(v) for v in row] for row in wb]  # empty bucket: null
        w_layer = w_layer.tolist()
    e_n = {m: ent_n[m] / rows for m in ORDERS}
    n_tok = float(lengths.sum())
    ex = int(np.argmin(np.abs(lengths - cfg.example_length)))  # Fig. 10: the whole sentence, specials included
    example = Example(text=acts.texts[ex], tokens=acts.tokens[ex], layer=layer, text_index=ex,
                      **{m: acts.text_map(m, ex)[layer - 1].mean(0).tolist() for m in ORDERS})
    return Result(
        identity=activations_identity(acts, cfg), fusion=fusion, n_layers=L, bucket_labels=labels,
        bucket_counts=counts.tolist(), w_by_bucket=w_by_bucket, w_layer_mean=w_layer, spearman_length=spear,
        claims=claims, slot_weights=(slots / n_tok).tolist() if fusion == "self-gate" else None,
        entropy=ByOrder(**{m: (ent[m] / rows).tolist() for m in ORDERS}),
        entropy_normalised=ByOrder(**{m: e_n[m].tolist() for m in ORDERS}), example=example,
        definitions=records.Definitions({
            "w": "weight-gate w (Eq. 16) averaged over hidden units, then a sentence's real tokens, then the "
                 "sentences of a bucket", "length": "real (non-special) subword tokens",
            "entropy": "mean over layers' rows (every head, every query token) of -sum p log p; normalised: divided "
                       "by log n",
            "slot_weights": "self-gate softmax weights, query slot x key slot (high, middle, low), mean over real "
                            "tokens"}))


def table_rows(res: Result) -> list[dict]:
    rows = []
    for j in range(res.n_layers):
        for k, label in enumerate(res.bucket_labels):
            w = res.w_by_bucket[k][j] if res.w_by_bucket else None
            rows.append({"layer": j + 1, "bucket": label, "sentences": res.bucket_counts[k], "w": w,
                         **{f"entropy_{m}": res.entropy.of(m)[j] for m in ORDERS}})
    return rows


# ----------------------------------------------------------------------------- figures


def _weights_panel(a, r: Result, drawn: style.Drawn | None = None, title_color=None) -> None:
    """Fig. 9 for one weight-gate model on ``a``: mean w per layer, one line per length bucket (a colour each,
    the model in the title in ``title_color``; with ``drawn``, ``Result.plot``: the result's colour and
    keywords, a marker and line style each, no title)."""
    import matplotlib.pyplot as plt

    if r.w_by_bucket is None:  # not a weight-gate model (the callers pass only those)
        return
    x = np.arange(1, r.n_layers + 1)
    for k, label in enumerate(r.bucket_labels):
        if r.bucket_counts[k]:
            y = np.array([np.nan if v is None else v for v in r.w_by_bucket[k]])
            if drawn is not None:
                a.plot(x, y, **drawn.series(k, f"{label} ({r.bucket_counts[k]})", ms=3))
                continue
            a.plot(x, y, marker="o", ms=3, color=plt.cm.viridis(k / max(1, len(r.bucket_labels) - 1)),
                   label=f"{label} ({r.bucket_counts[k]})")
    if drawn is None:
        a.set_title(f"{r.model_name} ({r.n_layers} layers)", color=title_color)
    a.set_xlabel("encoder layer")
    a.set_xticks(x)


def _entropy_panel(a, result: Result, drawn: style.Drawn | None = None) -> None:
    """Each order's mean row entropy / log n per layer on ``a`` (Fig. 10's right panel; with ``drawn``,
    ``Result.plot``: the result's colour and keywords, a marker and line style per order, no title)."""
    x = np.arange(1, result.n_layers + 1)
    for i, m in enumerate(ORDERS):
        if drawn is not None:
            a.plot(x, result.entropy_normalised.of(m), **drawn.series(i, ORDER_LABELS[m], ms=3))
        else:
            a.plot(x, result.entropy_normalised.of(m), marker="o", ms=3, color=f"C{i}", label=ORDER_LABELS[m])
    a.set_xlabel("encoder layer")
    a.set_ylabel("mean row entropy / log n (of 1)")
    a.set_xticks(x)
    if drawn is None:
        a.legend()
        a.set_title(f"{result.model_name}: smoother = higher", color=model_color(result.model_name))


@style.drawing
def plot(results: list[Result], fig=None):
    """Fig. 9: mean w per layer (x), one line per length bucket, one panel per weight-gate model.
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    res = [r for r in results if r.w_by_bucket is not None]
    if not res:
        raise ProbeError("no weight-gate Graph-Transformer among the results: Fig. 9 needs one")
    fig = style.new_figure(fig, (3.3 * len(res), 2.8))
    axes = np.ravel(fig.subplots(1, len(res), squeeze=False))
    colors = style.figure_colors([r.model_name for r in res])
    for a, r in zip(axes, res):
        _weights_panel(a, r, title_color=colors[r.model_name])
    axes[0].set_ylabel("mean subgraph weight w (of 1)")
    axes[0].legend(title="tokens (sentences)")
    return fig


@style.drawing
def plot_attention(result: Result, fig=None):
    """Fig. 10: the three attention matrices of the example sentence + mean row entropy per layer.
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (13, 3.3))
    axes = fig.subplots(1, 4)
    ex = result.example
    for a, m in zip(axes[:3], ORDERS):
        M = np.asarray(ex.of(m))
        a.imshow(M, cmap="viridis", vmin=0, vmax=float(M.max()) or 1.0)
        a.set_title(f"{ORDER_LABELS[m]}, layer {ex.layer}")
        small = style.points("xtick.labelsize", 5 / 7)  # one label per token: smaller than the theme's ticks
        a.set_xticks(range(len(ex.tokens)), ex.tokens, rotation=90, fontsize=small)
        a.set_yticks(range(len(ex.tokens)), ex.tokens, fontsize=small)
        a.set_xlabel("key token")
        a.set_ylabel("query token")
        a.grid(False)
    _entropy_panel(axes[3], result)
    return fig


ANALYSIS = Analysis(
    name="mog",
    # before any model runs, a model of another family is refused: it would be extracted and cached whole first;
    # maps only: the cache entry keeps no token states
    inputs=Sentences(maps=True, token_states=False, family="mog", needs="analyses.mog needs a Graph-Transformer"),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("mog-subgraph-weights", plot, "Graph-Transformer Fig. 9: mean weight w of the high-order part by "
               "layer, one line per sentence-length bucket; the paper finds w larger for longer sentences and rising "
               "with depth.", select=lambda rs: [r for r in rs if r.w_by_bucket is not None]),
        Figure("mog-attention-{}", plot_attention, "Graph-Transformer Fig. 10: the high-order and two middle-order "
               "attention matrices of one sentence, and each order's mean row entropy by layer (higher = smoother).",
               each=lambda r: r.model_name, single=True),
    ),
    example=("--model", "tiny-mog", "--n-sentences", "12"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
