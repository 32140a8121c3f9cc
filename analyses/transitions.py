"""Transitions: how much does each layer change the token and sentence vectors? (S-LSTM §7.3, Fig. 7)

For every layer l = 1..L, between its input hidden[l-1] and its output hidden[l]:

* token level: the L2 distance ||hidden[l]_i - hidden[l-1]_i||_2, averaged over a text's tokens
  (special tokens excluded unless --keep-special), then mean and std over texts;
* sentence level: ||s_l - s_{l-1}||_2 of the model's sentence vector (cls / mean / last / g, as
  checkpoints.yaml names it), mean and std over texts;
* at both levels also the cosine between layer input and output (1 = the layer kept the direction).

The texts are the same seeded sentence sample as the anisotropy analysis (same defaults), so the
cached activations are shared and a second analysis costs no second extraction.

    $ python -m analyses.transitions --model minilm-l6 [--model tiny-bert] [--corpus PATH]
          [--n-sentences 5000] [--seed 0] [--keep-special] [--out out]

Writes out/results/transitions/<model>.json (+ .csv, one row per layer) and
out/figures/transitions.{png,pdf} (Fig. 7: L2 distances, token level left, sentence level right, one
line per model) and out/figures/transitions-cosines.{png,pdf} (the input/output cosines, same layout).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity, mark_final_norm
from analyses.inputs import Sentences
from analyses.records import Definitions, omitted
from probes.capture.activations import Activations
from probes.config import arg
from probes.errors import ProbeError

BLOCK_TOKENS = 4096  # tokens per block when streaming the (memory-mapped) hidden states: bounded memory


@dataclass
class Config(SentenceConfig):
    """Hidden-state change from layer to layer, for tokens and sentences (S-LSTM Fig. 7)."""

    keep_special: bool = arg(False, "include special tokens ([CLS], [SEP], <s>, ...) in token statistics")


# ----------------------------------------------------------------------------- per-token transitions


def _check_hidden(hidden) -> np.ndarray:
    if np.ndim(hidden) != 3 or np.shape(hidden)[0] < 2:
        raise ProbeError(f"hidden must be (L+1, n, d) with L >= 1, got shape {np.shape(hidden)}")
    return hidden


def token_transitions(hidden) -> tuple[np.ndarray, np.ndarray]:
    """Per layer and token: (distances, cosines), each (L, n), between hidden[l-1] and hidden[l].

    hidden (L+1, n, d). Float64. A zero vector has cosine 0 with anything; a state that holds NaN or inf has a NaN
    distance and cosine (its layer's mean is then undefined and written as null)."""
    h = np.asarray(_check_hidden(hidden), dtype=np.float64)
    a, b = h[:-1], h[1:]  # layer inputs, layer outputs
    dist = np.linalg.norm(b - a, axis=-1)
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    denom = na * nb
    undefined = np.where(np.isfinite(denom), 0.0, np.nan)  # zero vectors: 0; non-finite states: NaN
    cos = np.divide(np.einsum("lnd,lnd->ln", a, b), denom, out=undefined, where=denom > 0)
    return dist, cos


def layer_distances(hidden) -> np.ndarray:
    """(L,): for l = 1..L the mean over the n tokens of ||hidden[l]_i - hidden[l-1]_i||_2. hidden (L+1, n, d)."""
    if np.shape(_check_hidden(hidden))[1] == 0:
        raise ProbeError("hidden has no tokens")
    return token_transitions(hidden)[0].mean(axis=1)


def layer_cosines(hidden) -> np.ndarray:
    """(L,): for l = 1..L the mean over the n tokens of cos(hidden[l-1]_i, hidden[l]_i). hidden (L+1, n, d)."""
    if np.shape(_check_hidden(hidden))[1] == 0:
        raise ProbeError("hidden has no tokens")
    return token_transitions(hidden)[1].mean(axis=1)


# ----------------------------------------------------------------------------- compute


def per_text_transitions(acts: Activations, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distances, cosines, used): per text the mean over its kept tokens, each (L, T'), for the T'
    texts with at least one kept token (``used``: their indices). Streams the token axis in blocks."""
    L, N = acts.n_layers, len(acts.token_ids)
    text_of = acts.text_index()
    sums = np.zeros((2, L, acts.n_texts))
    for start in range(0, N, BLOCK_TOKENS):
        stop = min(start + BLOCK_TOKENS, N)
        k = keep[start:stop]
        if not k.any():
            continue
        block = np.stack([np.asarray(acts.layer_hidden(lyr, slice(start, stop))) for lyr in range(L + 1)])
        dist, cos = token_transitions(block[:, k])  # block: (L+1, stop - start, d)
        t = text_of[start:stop][k]
        for lyr in range(L):
            sums[0, lyr] += np.bincount(t, weights=dist[lyr], minlength=acts.n_texts)
            sums[1, lyr] += np.bincount(t, weights=cos[lyr], minlength=acts.n_texts)
    counts = np.bincount(text_of[keep], minlength=acts.n_texts)
    used = np.flatnonzero(counts > 0)
    means = sums[:, :, used] / counts[used]
    return means[0], means[1], used


def transition_intervals(per_text: dict, used: np.ndarray, n_texts: int, seed: int,
                         units: str) -> tuple[dict[str, np.ndarray], stats.Replicated]:
    """Percentile intervals of every layer's mean distance and cosine, resampling texts (one
    weight matrix over all texts, so token and sentence levels, and two models on the same texts, see
    the same resamples). ``per_text``: level -> (distances, cosines), each (L, texts); the token level
    covers the texts ``used``. Returns the intervals, ``{level}_{quantity}_mean_ci`` -> (2, L) (the layer
    rows' fields of that name), and the bootstrap block with the token distance replicates (B, L)."""
    boot = stats.bootstrap_block("sentence", n_texts, seed=seed, units_id=units)
    W = stats.resample_weights(n_texts, boot.resamples, seed)
    token_distance = None
    cis = {}
    for level, values in per_text.items():
        w = W[:, used] if level == "token" else W
        for q, v in zip(("distance", "cosine"), values):
            rep = stats.mean_replicates(np.asarray(v).T, w)  # (B, L)
            cis[f"{level}_{q}_mean_ci"] = stats.interval(rep, boot.level)  # (2, L)
            if level == "token" and q == "distance":
                token_distance = rep
    return cis, stats.Replicated(**vars(boot), replicates={"token_distance_mean": stats.rounded(token_distance)})


@dataclass
class Change:
    """One level's change from a layer's input to its output, over texts: the mean and the std (ddof = 0) of
    the L2 distance and of the cosine."""

    distance_mean: float
    distance_std: float
    cosine_mean: float
    cosine_std: float

    def mean(self, quantity: str) -> float:
        """The mean ``quantity`` ("distance" or "cosine")."""
        return self.distance_mean if quantity == "distance" else self.cosine_mean

    def std(self, quantity: str) -> float:
        """The std of ``quantity`` ("distance" or "cosine") over texts."""
        return self.distance_std if quantity == "distance" else self.cosine_std


@dataclass(kw_only=True)
class LayerRow:
    """Layer l's transition, from its input hidden[l-1] to its output hidden[l]: a row of :attr:`Result.layers`
    (the saved keys, in order), with the bootstrap intervals of the means over texts (absent from old files)."""

    layer: int  # l = 1..L
    token: Change
    sentence: Change
    token_distance_mean_ci: list[float] | None = omitted()
    token_cosine_mean_ci: list[float] | None = omitted()
    sentence_distance_mean_ci: list[float] | None = omitted()
    sentence_cosine_mean_ci: list[float] | None = omitted()

    def of(self, level: str) -> Change:
        """The ``level`` ("token" or "sentence") change."""
        if level not in ("token", "sentence"):
            raise ProbeError(f"level must be 'token' or 'sentence', got {level!r}")
        return self.token if level == "token" else self.sentence

    def mean_ci(self, level: str, quantity: str) -> list[float] | None:
        """The interval of ``level``'s mean ``quantity`` (None where the file saved none)."""
        if level == "token":
            return self.token_distance_mean_ci if quantity == "distance" else self.token_cosine_mean_ci
        return self.sentence_distance_mean_ci if quantity == "distance" else self.sentence_cosine_mean_ci


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's layer transitions: the saved document's keys, in order."""
    n_layers: int  # L
    n_texts_used: int  # texts with at least one counted token
    definitions: Definitions  # prose only: nothing reads numbers from it
    layers: list[LayerRow]  # per layer l = 1..L
    bootstrap: stats.Replicated | None = None  # of the intervals + "replicates": token_distance_mean (B, L)

    @style.drawing
    def plot(self, ax=None, level: str = "token", quantity: str = "distance", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: ``level``
        ("token" or "sentence") ``quantity`` ("distance" or "cosine") by layer, Fig. 7's left panel, with its
        band (± std over texts) and bootstrap bars. ``kwargs`` (``color=``, ``label=``, ``linestyle=``,
        ``marker=`` ...) go to the line; without ``color=`` the next colour of the Axes' cycle; the label
        (default: the model) enters the legend, so results drawn on one Axes overlay. Fonts and colours
        follow the caller's rcParams. Returns the Axes."""
        ax = style.one_axes(ax, (3.8, 2.9))
        _transition_panel(ax, [style.on_axes(ax, self, kwargs)], level, quantity, relative=False, titled=False)
        return style.finish(ax, title=LEGEND)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {"token L2 change, intermediate layers": self.middle_token_distance()}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the mean token L2 change of each layer (null: NaN)."""
        return common.as_floats(row.token.distance_mean for row in self.layers)

    def headline(self) -> dict[str, str]:
        tok = ", ".join(f"{row.token.distance_mean:.3g}" for row in self.layers)
        cos = np.mean([row.sentence.cosine_mean for row in self.layers])
        return {"token L2 change, layers 1..L": tok, "sentence cosine(input, output), mean over layers": f"{cos:.3f}"}

    def middle_token_distance(self) -> stats.Sample:
        """The mean token L2 change over the intermediate layers (2..L-1; every layer when L < 3) with its
        bootstrap replicates over sentences (the point value alone when the result saved none)."""
        middle = lambda v: v[..., 1:-1].mean(-1) if v.shape[-1] >= 3 else v.mean(-1)  # noqa: E731
        point = middle(np.array([row.token.distance_mean for row in self.layers], dtype=np.float64))
        reps = ((self.bootstrap.replicates if self.bootstrap else None) or {}).get("token_distance_mean")
        return stats.Sample.saved(float(point), None if reps is None else middle(np.asarray(reps, dtype=np.float64)),
                                  self.bootstrap)


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """Per-layer token and sentence transitions (L2 distance and cosine) for one model's activations."""
    cfg = cfg or Config()
    L = acts.n_layers
    if L < 1:
        raise ProbeError("transitions need at least one layer besides the embeddings")
    keep = np.ones(len(acts.token_ids), bool) if cfg.keep_special else ~np.asarray(acts.special)
    tok_dist, tok_cos, used = per_text_transitions(acts, keep)
    if len(used) == 0:
        raise ProbeError("no text has a non-special token; use --keep-special or other texts")
    sen_dist, sen_cos = token_transitions(np.asarray(acts.sentence))  # (L, T) each
    cis, boot = transition_intervals({"token": (tok_dist, tok_cos), "sentence": (sen_dist, sen_cos)}, used,
                                     acts.n_texts, cfg.seed, stats.units_id(acts.texts))
    change = lambda dist, cos, lyr: Change(distance_mean=dist.mean(1)[lyr], distance_std=dist.std(1)[lyr],  # noqa: E731
                                           cosine_mean=cos.mean(1)[lyr], cosine_std=cos.std(1)[lyr])  # over texts
    layers = [LayerRow(layer=lyr + 1, token=change(tok_dist, tok_cos, lyr), sentence=change(sen_dist, sen_cos, lyr),
                       **{name: ci[:, lyr].tolist() for name, ci in cis.items()}) for lyr in range(L)]
    return Result(
        identity=activations_identity(acts, cfg),
        n_layers=L,
        n_texts_used=int(len(used)),
        definitions=Definitions({
            "layers": "0 = embedding output, l = output of layer l; row l compares hidden[l-1] (input) "
                      "with hidden[l] (output)",
            "special_tokens": "kept" if cfg.keep_special else "excluded from token statistics",
            "sentence_vector": acts.meta["model"]["sentence_vector"],
            "token_distance": "per text: mean over its tokens of ||hidden[l]_i - hidden[l-1]_i||_2; "
                              "then mean and std over texts",
            "sentence_distance": "||s_l - s_{l-1}||_2 of the sentence vectors; mean and std over texts",
            "cosine": "cos(input, output) per token (per sentence vector), averaged the same way; 0 for a zero vector",
            "std": "population standard deviation over texts (ddof = 0)",
        }),
        layers=layers,
        bootstrap=boot,
    )


def table_rows(result: Result) -> list[dict]:
    """Flat CSV rows, one per layer l = 1..L."""
    rows = []
    for row in result.layers:
        flat = {"layer": row.layer}
        for level in ("token", "sentence"):
            flat.update({f"{level}_{k}": v for k, v in dataclasses.asdict(row.of(level)).items()})
        rows.append(flat)
    return rows


# ----------------------------------------------------------------------------- plot


LEGEND = "band: ± std over texts\nbars: 95% bootstrap CI of the mean"  # two lines: a narrower legend
QUANTITIES = {"distance": r"L2 distance $\|h_l - h_{l-1}\|_2$ (hidden-state units)",
              "cosine": r"cosine$(h_{l-1}, h_l)$"}


def _transition_panel(ax, drawn: list[style.Drawn], level: str, quantity: str, relative: bool,
                      titled: bool = True) -> None:
    """``level``'s ``quantity`` by layer on ``ax``, one line per result in its colour (band: ± std); the panel's
    title names the level where ``titled`` (the module's figures; a ``Result.plot`` sets none)."""
    from matplotlib.ticker import MaxNLocator

    if quantity not in QUANTITIES:
        raise ProbeError(f"quantity must be one of {', '.join(QUANTITIES)}, got {quantity!r}")
    if level not in ("token", "sentence"):
        raise ProbeError(f"level must be 'token' or 'sentence', got {level!r}")
    for d in drawn:
        res = d.result
        lyr = np.array([row.layer for row in res.layers])
        x = style.relative_depth(len(lyr))[lyr] if relative else lyr  # layers 1..L: l / L
        m = np.array([row.of(level).mean(quantity) for row in res.layers])
        s = np.array([row.of(level).std(quantity) for row in res.layers])
        ax.plot(x, m, **d.line(marker="o", ms=3.5))
        if d.band:  # seed variants: a line each, one band
            ax.fill_between(x, m - s, m + s, alpha=0.15, lw=0, **d.quiet)
        ci = [row.mean_ci(level, quantity) for row in res.layers]
        if all(ci):  # the bootstrap interval of the mean over texts: a bar at each layer
            ax.vlines(x, *np.array(ci, dtype=float).T, lw=2.0, alpha=0.9, **d.quiet)
        mark_final_norm(ax, res, x, m, d.color)
    if titled:
        ax.set_title(f"{level} representations")
    ax.set_xlabel("relative depth l / L" if relative else "layer l (input = output of layer l - 1)")
    ax.set_ylabel(QUANTITIES[quantity])
    if not relative:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


@style.drawing
def plot(results: list[Result], fig=None, relative_depth: bool | None = None, quantity: str = "distance"):
    """Fig. 7: token level left, sentence level right; one line per model in its colour (band: ± std
    over texts).

    ``quantity`` is "distance" (Fig. 7) or "cosine" (input/output cosine). x is the layer index
    l = 1..L, or the relative depth l / L when ``relative_depth`` (default: only when the models
    differ in depth); the axis label says which. ``fig``: a Figure or SubFigure to draw into
    (default: a new figure). Returns the figure."""
    if quantity not in QUANTITIES:
        raise ProbeError(f"quantity must be one of {', '.join(QUANTITIES)}, got {quantity!r}")
    relative = len({len(r.layers) for r in results}) > 1 if relative_depth is None else relative_depth
    fig = style.new_figure(fig, (7.2, 2.9))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, level in zip(axes, ("token", "sentence")):
        _transition_panel(ax, style.in_figure(results, pooling=True), level, quantity, relative)
    style.legend(axes, title=LEGEND)
    return fig


def plot_cosines(results: list[Result], fig=None, relative_depth: bool | None = None):
    """The cosine between each layer's input and output, laid out like :func:`plot`."""
    return plot(results, fig, relative_depth, quantity="cosine")


ANALYSIS = Analysis(
    name="transitions",
    inputs=Sentences(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("transitions", plot, "L2 change of token (left) and sentence (right) states from each layer's input "
               "to its output (S-LSTM Fig. 7): smooth curves = weight-shared models, small values = little change "
               "per layer."),
        Figure("transitions-cosines", plot_cosines, "Cosine between each layer's input and output states."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "12"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
