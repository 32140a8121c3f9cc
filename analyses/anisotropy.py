"""Anisotropy: how spread out are an encoder's vectors? (S-LSTM paper §7.1, Fig. 6; Ethayarajh 2019)

For every layer l = 0..L (0 = embeddings):

* token cosines: all C(N, 2) pairwise cosines of N random token occurrences (special tokens
  excluded unless --keep-special) -> histogram on [-1, 1] with fixed bins, mean, std, quantiles,
  fraction below zero. An isotropic space is centred on 0; a narrow cone sits near 1.
* sentence cosines: the same for the sentence vectors of the sampled sentences (cls / mean /
  last / g, as checkpoints.yaml names it for the model).
* Ethayarajh's statistics: the average cosine of random tokens (the anisotropy baseline),
  self-similarity (mean cosine between occurrences of the same token type in different
  sentences), intra-sentence similarity (mean cosine of a sentence's tokens with their mean),
  and maximum explainable variance sigma_1^2 / sum_i sigma_i^2 of a token type's (uncentred)
  occurrence matrix. Each is also reported minus its random baseline.

A cosine with a zero vector is undefined: zero vectors are left out of every cosine statistic and counted
(``n_zero_vectors`` in each cosine summary, ``n_zero_tokens`` per layer). The statistics themselves (pairwise cosines
in bounded memory, their summary, Ethayarajh's) are :mod:`analyses.cosines`; this module draws the sample, computes
them per layer and draws the figures.

    $ python -m analyses.anisotropy --model minilm-l6 [--model tiny-bert] [--corpus PATH] [--layer L]
          [--n-tokens 5000] [--n-sentences 5000] [--seed 0] [--out out]

Writes out/results/anisotropy/<model>.json (+ .csv) and out/figures/anisotropy.{png,pdf}
(Fig. 6: one column per model, tokens on top, sentences below) and
out/figures/anisotropy-layers.{png,pdf} (the per-layer statistics, one line per model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity, mark_final_norm
from analyses.cosines import (  # noqa: F401 - pairwise_cosines, exact_quantiles, QUANTILES: the module's API too
    CHUNK_ELEMENTS,
    QUANTILES,
    CosineSummary,
    cosine_summary,
    exact_quantiles,
    intra_sentence,
    intra_sentence_similarity,
    max_explainable_variance,
    pairwise_cosines,
    self_similarity,
)
from analyses.inputs import Sentences
from analyses.layer_points import ByLevel
from analyses.records import Definitions, omitted
from probes.capture.activations import Activations, layer_index
from probes.config import arg, tqdm_class
from probes.errors import ProbeError


@dataclass
class Config(SentenceConfig):
    """Cosine-similarity distributions and Ethayarajh's anisotropy statistics, per layer."""

    layer: int = arg(-1, "layer drawn in the Fig. 6 histogram (0 = embeddings, -1 = last); all are computed")
    n_tokens: int = arg(5000, "random token occurrences N (C(N,2) pairs)", min=2)
    bins: int = arg(100, "histogram bins on [-1, 1]", min=1)
    keep_special: bool = arg(False, "include special tokens ([CLS], [SEP], <s>, ...) in token statistics")
    min_occurrences: int = arg(5, "self-similarity / MEV: token types seen in at least this many sentences", min=2)
    max_occurrences: int = arg(20, "self-similarity / MEV: at most this many occurrences per type (seeded)", min=2)
    max_types: int = arg(1000, "self-similarity / MEV: at most this many token types (seeded)", min=1)
    exact_limit: int = arg(50_000_000, "above this many pairs, quantiles come from the histogram (streaming)", min=1)


# ----------------------------------------------------------------------------- compute


@dataclass
class Sample:
    """The random choices, made once and shared by every layer."""

    tokens: np.ndarray  # (n_tokens,) indices into the token axis
    groups: list[np.ndarray]  # per token type: indices of its occurrences (one per sentence)
    group_types: list[int]  # token id of each group
    random_groups: list[np.ndarray]  # size-matched groups of random occurrences (MEV / self-sim baselines)
    keep: np.ndarray  # (N,) bool: tokens that count


def draw_sample(acts: Activations, cfg: Config) -> Sample:
    rng = np.random.default_rng(cfg.seed)
    keep = np.ones(len(acts.token_ids), bool) if cfg.keep_special else ~acts.special
    pool = np.flatnonzero(keep)
    if len(pool) < 2:
        raise ProbeError(f"only {len(pool)} usable tokens in the sampled sentences; use more sentences")
    tokens = np.sort(rng.choice(pool, size=min(cfg.n_tokens, len(pool)), replace=False))
    # occurrences of each token type, at most one per sentence (different contexts)
    text_of = acts.text_index()
    ids = acts.token_ids[pool]
    order = np.lexsort((text_of[pool], ids))
    by_type: dict[int, list[int]] = {}
    last_text: dict[int, int] = {}
    for j in order:
        tid, t = int(ids[j]), int(text_of[pool[j]])
        if last_text.get(tid) != t:
            by_type.setdefault(tid, []).append(int(pool[j]))
            last_text[tid] = t
    types = sorted(t for t, occ in by_type.items() if len(occ) >= cfg.min_occurrences)
    if len(types) > cfg.max_types:
        types = sorted(rng.choice(types, size=cfg.max_types, replace=False).tolist())
    groups = []
    for t in types:
        occ = np.array(by_type[t])
        if len(occ) > cfg.max_occurrences:
            occ = np.sort(rng.choice(occ, size=cfg.max_occurrences, replace=False))
        groups.append(occ)
    random_groups = [np.sort(rng.choice(pool, size=len(g), replace=False)) for g in groups]
    return Sample(tokens, groups, types, random_groups, keep)


@dataclass(kw_only=True)
class LayerRow(ByLevel[CosineSummary]):
    """One layer's statistics, a row of :attr:`Result.layers` (the saved keys, in order; ``row.of("token")``: a
    level's cosines). A statistic with no pair to average is NaN (null in the file, None read back)."""

    layer: int  # 0 = embeddings, l = output of layer l
    token: CosineSummary  # the pairwise cosines of the token sample
    sentence: CosineSummary  # ... of the sentence vectors
    baseline_cosine: float  # the mean token cosine: the anisotropy baseline
    # percentile intervals of the mean token / sentence cosine, resampling sentences (absent from old files)
    token_mean_ci: list[float] | None = omitted()
    sentence_mean_ci: list[float] | None = omitted()
    baseline_cosine_ci: list[float] | None = omitted()
    # Ethayarajh's per-type statistics (absent without token types that meet the bounds)
    self_similarity: float | None = omitted()
    self_similarity_baseline: float | None = omitted()
    self_similarity_adjusted: float | None = omitted()
    mev: float | None = omitted()
    mev_baseline: float | None = omitted()
    mev_adjusted: float | None = omitted()
    intra_sentence_similarity: float
    intra_sentence_adjusted: float
    n_zero_tokens: int | None = omitted()  # kept tokens whose state is a zero vector: left out of every cosine

    def mean_ci(self, level: str) -> list[float] | None:
        """The interval of the mean ``level`` cosine (None where the file saved none)."""
        return self.token_mean_ci if level == "token" else self.sentence_mean_ci


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's anisotropy statistics: the saved document's keys, in order."""
    headline_layer: int  # layer drawn in the Fig. 6 histograms (0 = embeddings)
    definitions: Definitions  # prose only: nothing reads numbers from it
    layers: list[LayerRow]  # per layer 0..L
    bootstrap: stats.Replicated | None = None  # of the intervals, with the replicates of the last layer's means

    @style.drawing
    def plot(self, ax=None, level: str = "token", layer: int | None = None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: the histogram
        of ``level`` ("token" or "sentence") cosines at the headline layer (or ``layer``), Fig. 6's top row,
        with a line at its mean. ``kwargs`` (``color=``, ``label=``, ``alpha=``, ``linewidth=``, ``fill=`` ...)
        go to ``ax.stairs``; without ``color=`` the next colour of the Axes' cycle; the label (default: the
        model, the layer, the mean and the share below 0) enters the legend, so results drawn on one Axes
        overlay. Fonts and colours follow the caller's rcParams. Returns the Axes."""
        from matplotlib.patches import StepPatch

        ax = style.one_axes(ax, (3.4, 2.6))
        lyr = self.headline_layer if layer is None else layer
        s = _summary(self, level, lyr)
        label = (f"{style.display_name(self.model_name)}, layer {lyr}: mean {s.mean:.2f}, "
                 f"{100 * s.frac_negative:.1f}% < 0")
        drawn = style.on_axes(ax, self, kwargs, label, StepPatch, ("color", "facecolor", "edgecolor"))
        _histogram(ax, drawn, level, lyr, {"color": drawn.color, "lw": 0.9, "ls": "--"}, alpha=0.5)
        ax.set_xlabel(f"{level} cosine similarity")
        ax.set_ylabel("density")
        return style.finish(ax)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"{level} cosine, last layer": self.last_layer_mean(level) for level in ("token", "sentence")}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the token cosine histogram at the headline layer, as a density on
        [-1, 1]."""
        counts = np.asarray(self.layers[self.headline_layer].token.counts, float)
        return counts / counts.sum() / (2 / len(counts))

    def headline(self) -> dict[str, str]:
        last = self.layers[-1]
        return {f"{level} cosine, last layer": f"mean {last.of(level).mean:.3f}, "
                                                f"{100 * last.of(level).frac_negative:.1f}% below 0"
                for level in ("token", "sentence")}

    def last_layer_mean(self, level: str) -> stats.Sample:
        """The last layer's mean ``level`` ("token" / "sentence") cosine with its bootstrap replicates
        over sentences (the point value alone when the result saved none for the last layer)."""
        point = self.layers[-1].of(level).mean
        reps = (self.bootstrap.replicates if self.bootstrap else None) or {}
        if reps.get("layer") != len(self.layers) - 1:
            return stats.Sample(point)
        return stats.Sample.saved(point, reps.get(f"{level}_mean"), self.bootstrap)


def cosine_intervals(tokens, token_text, sentences, boot: stats.Bootstrap) -> dict[str, np.ndarray]:
    """Percentile intervals of the mean token and sentence cosines, resampling sentences as ``boot`` says
    (the token sample's pairs among resampled sentences; see analyses.stats.pairwise_cosine_replicates;
    zero vectors left out): the replicates, ``token_mean`` and ``sentence_mean`` (B,); the layer row's intervals
    (token_mean_ci, sentence_mean_ci = baseline_cosine_ci) are read off them.
    The resamples are drawn in blocks (analyses.stats.blockwise_replicates): the same replicates as from the
    whole (resamples, sentences) weight matrix, which is never held. Returns the replicates."""
    n = int(boot.n_units)
    token_sums = stats.grouped_unit_sums(tokens, token_text, n)  # (n, d), (n,), (n,)
    sentence_sums = stats.grouped_unit_sums(sentences, np.arange(len(sentences)), n)

    def both(W: np.ndarray) -> np.ndarray:  # (b, 2): token, sentence replicates of one block of resamples
        return np.stack([stats.pairwise_cosine_replicates(*token_sums, W),
                         stats.pairwise_cosine_replicates(*sentence_sums, W)], 1)

    reps = stats.blockwise_replicates(both, n, int(boot.resamples), int(boot.seed))  # (B, 2)
    return {"token_mean": reps[:, 0], "sentence_mean": reps[:, 1]}


class LayerRows:
    """One layer of ``acts`` as an (N, d) array whose rows are read only when indexed (``H[a:b]``, ``H[idx]``
    read those rows through Activations.layer_hidden(layer, rows=...)): never the whole layer at once."""

    def __init__(self, acts: Activations, layer: int):
        self.acts, self.layer = acts, layer
        self.shape = tuple(acts.hidden.shape[1:])  # (N, d)

    def __getitem__(self, rows) -> np.ndarray:
        return np.asarray(self.acts.layer_hidden(self.layer, rows=rows))


def _rows_of(acts: Activations, layer: int, groups: list[np.ndarray]) -> list[np.ndarray]:
    """The states at ``layer`` of each group's token rows, read in one gather (not the whole layer)."""
    if not groups:
        return []
    X = np.asarray(acts.layer_hidden(layer, rows=np.concatenate(groups)))  # (sum k_i, d)
    return np.split(X, np.cumsum([len(g) for g in groups])[:-1])


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """Per-layer cosine distributions and Ethayarajh statistics for one model's activations (every
    layer's token states: activations made with ``extract(layers=[...])`` are refused, naming the
    first layer they lack). The result records the number of token occurrences drawn as ``n_tokens`` (fewer
    than asked for when the sentences hold fewer usable tokens). A layer is read in runs of whole sentences
    and gathers of the sampled rows, never whole, so memory does not grow with the number of tokens.

    A cosine with a zero vector is undefined: zero vectors are left out of every cosine statistic, each
    cosine summary counts those it left out (``n_zero_vectors``), and each layer counts its zero kept tokens
    (``n_zero_tokens``)."""
    cfg = cfg or Config()
    L = acts.n_layers
    layer = layer_index(cfg.layer, L, f"--layer {cfg.layer}")
    sample = draw_sample(acts, cfg)
    boot = stats.bootstrap_block("sentence", acts.n_texts, seed=cfg.seed, units_id=stats.units_id(acts.texts))
    token_text = acts.text_index()[sample.tokens]  # (n_tokens,) the sentence of each sampled token
    layers = []
    for lyr in tqdm_class()(range(L + 1), desc=f"anisotropy {acts.meta['model']['name']}", unit="layer"):
        tokens = np.asarray(acts.layer_hidden(lyr, rows=sample.tokens))  # (n_tokens, d)
        sentences = np.asarray(acts.sentence[lyr])  # (T, d)
        tok = cosine_summary(tokens, cfg.bins, cfg.exact_limit)
        sen = cosine_summary(sentences, cfg.bins, cfg.exact_limit)
        replicates = cosine_intervals(tokens, token_text, sentences, boot)
        tok_ci, sen_ci = (stats.interval(r, boot.level).tolist() for r in replicates.values())
        del tokens, sentences
        row = LayerRow(layer=lyr, token=tok, sentence=sen, baseline_cosine=tok.mean, token_mean_ci=tok_ci,
                       sentence_mean_ci=sen_ci, baseline_cosine_ci=tok_ci, intra_sentence_similarity=np.nan,
                       intra_sentence_adjusted=np.nan)
        if sample.groups:
            groups, random_groups = _rows_of(acts, lyr, sample.groups), _rows_of(acts, lyr, sample.random_groups)
            ss, ss_base = self_similarity(groups), self_similarity(random_groups)
            mev, mev_base = max_explainable_variance(groups), max_explainable_variance(random_groups)
            del groups, random_groups
            row = dataclasses.replace(row, self_similarity=ss, self_similarity_baseline=ss_base,
                                      self_similarity_adjusted=ss - ss_base, mev=mev, mev_baseline=mev_base,
                                      mev_adjusted=mev - mev_base)
        intra, n_zero = intra_sentence(LayerRows(acts, lyr), acts.offsets, sample.keep)  # read in runs
        layers.append(dataclasses.replace(row, intra_sentence_similarity=intra,
                                          intra_sentence_adjusted=intra - tok.mean, n_zero_tokens=n_zero))
    return Result(
        identity=activations_identity(acts, dataclasses.replace(cfg, n_tokens=len(sample.tokens))),
        headline_layer=layer,
        definitions=Definitions({
            "layers": "0 = embedding output, l = output of layer l",
            "special_tokens": "kept" if cfg.keep_special else "excluded from token statistics",
            "sentence_vector": acts.meta["model"]["sentence_vector"],
            "histogram_edges": f"numpy.linspace(-1, 1, {cfg.bins + 1}); values clipped to [-1, 1]",
            "token_sample": f"{len(sample.tokens)} occurrences drawn without replacement from "
                            f"{int(sample.keep.sum())} tokens of {acts.n_texts} sentences",
            "self_similarity": f"{len(sample.groups)} token types seen in >= {cfg.min_occurrences} sentences, "
                               f"<= {cfg.max_occurrences} occurrences each, one per sentence; "
                               "baseline: size-matched groups of random occurrences",
            "mev": "sigma_1^2 / sum sigma_i^2 of the uncentred occurrence matrix (Ethayarajh 2019)",
            "intra_sentence": "cosine of each token with the mean of its sentence's tokens; "
                              "adjusted = minus the random-token baseline",
            "zero_vectors": "a cosine with a zero vector (norm 0 in float32) is undefined: zero vectors are left "
                            "out of every cosine statistic and its interval (n_zero_vectors of each summary, "
                            "n_zero_tokens of each layer's kept tokens); a statistic left with no pair is null",
        }),
        layers=layers,
        bootstrap=stats.Replicated(**vars(boot), replicates={"layer": L, **{k: stats.rounded(v)
                                                                            for k, v in replicates.items()}}),
    )


def table_rows(result: Result) -> list[dict]:
    """Flat CSV rows, one per layer: token and sentence cosine summaries, then Ethayarajh's statistics."""
    rows = []
    for row in result.layers:
        flat: dict = {"layer": row.layer}
        for level in ("token", "sentence"):
            s = row.of(level)
            flat.update({f"{level}_mean": s.mean, f"{level}_std": s.std, f"{level}_frac_negative": s.frac_negative,
                         **{f"{level}_q{k}": v for k, v in s.quantiles.items()}})
        flat.update(baseline_cosine=row.baseline_cosine, self_similarity=row.self_similarity,
                    self_similarity_adjusted=row.self_similarity_adjusted,
                    intra_sentence_similarity=row.intra_sentence_similarity,
                    intra_sentence_adjusted=row.intra_sentence_adjusted, mev=row.mev, mev_adjusted=row.mev_adjusted,
                    n_zero_tokens=row.n_zero_tokens)
        rows.append(flat)
    return rows


# ----------------------------------------------------------------------------- plot


def _summary(res: Result, level: str, layer: int) -> CosineSummary:
    return res.layers[layer].of(level)


def _histogram(ax, drawn: style.Drawn, level: str, layer: int, mean: dict, **defaults) -> None:
    """One result's ``level`` cosine histogram at ``layer`` on ``ax`` (``drawn.kw`` and ``defaults``: the
    keywords of ``ax.stairs``), a line at its mean (keywords ``mean``) and a dotted one at 0."""
    from matplotlib.patches import StepPatch

    s = _summary(drawn.result, level, layer)
    counts = np.asarray(s.counts, float)
    edges = np.linspace(-1, 1, len(counts) + 1)
    ax.stairs(counts / counts.sum() / np.diff(edges), edges, **drawn.line(StepPatch, fill=True, **defaults))
    ax.axvline(0, color="0.4", lw=0.6, ls=":", label="_nolegend_")
    ax.axvline(s.mean, **{"label": "_nolegend_", **mean})
    ax.set_xlim(-1, 1)
    ax.set_xticks([-1, -0.5, 0, 0.5, 1])  # five ticks: labels that never run into each other
    ax.set_yticks([])


def _figure_panel(ax, drawn: style.Drawn, level: str, layer: int | None, title: bool, ylabel: bool,
                  xlabel: bool, how: str = "") -> None:
    """Fig. 6's panel of one model: its histogram in its colour, the mean and the share below 0 written in it;
    ``how``: how its sentence vectors are made, in the title (where the figure's models differ in that)."""
    res = drawn.result
    lyr = res.headline_layer if layer is None else layer
    _histogram(ax, drawn, level, lyr, {"color": "k", "lw": 0.8}, alpha=0.75)
    s = _summary(res, level, lyr)
    ax.text(0.03, 0.95, f"mean {s.mean:.2f}\n<0: {100 * s.frac_negative:.1f}%", transform=ax.transAxes,
            va="top")
    if title:
        ax.set_title(f"{style.display_name(res.model_name)} (layer {lyr}{', ' + how if how else ''})")
    if ylabel:
        ax.set_ylabel(f"{level} cosine\ndensity")
    if xlabel:
        ax.set_xlabel("cosine similarity")


@style.drawing
def plot(results: list[Result], fig=None, layer: int | None = None):
    """Fig. 6: one column per model (in the model's colour); token cosines on top, sentence cosines below.

    ``fig``: a Figure or SubFigure to draw into (default: a new figure); ``layer`` overrides each
    result's headline layer. Returns the figure. One panel on one Axes: ``result.plot(ax=ax)``."""
    fig = style.new_figure(fig, (2.6 * len(results) + 0.6, 4.4))
    axes = fig.subplots(2, len(results), squeeze=False, sharex=True)
    for col, (drawn, how) in enumerate(zip(style.in_figure(results), style.pooling_tags(results))):
        for r, level in enumerate(("token", "sentence")):
            _figure_panel(axes[r, col], drawn, level, layer, title=r == 0, ylabel=col == 0, xlabel=r == 1, how=how)
    return fig


LAYER_PANELS = (("baseline_cosine", "random-token cosine\n(anisotropy baseline)"),
                ("self_similarity", "self-similarity"),
                ("intra_sentence_similarity", "intra-sentence similarity"),
                ("mev", "max. explainable variance"))
LAYER_UNITS = {"baseline_cosine": "mean cosine", "self_similarity": "mean cosine",
               "intra_sentence_similarity": "mean cosine", "mev": "fraction of variance"}  # y-axis labels
# each panel's value of a layer row (None: the layer lacks it) and, where it has one, its interval
LAYER_VALUES: dict[str, Callable[[LayerRow], float | None]] = {
    "baseline_cosine": lambda row: row.baseline_cosine, "self_similarity": lambda row: row.self_similarity,
    "intra_sentence_similarity": lambda row: row.intra_sentence_similarity, "mev": lambda row: row.mev}
LAYER_INTERVALS: dict[str, Callable[[LayerRow], list[float] | None]] = {
    "baseline_cosine": lambda row: row.baseline_cosine_ci}


@style.drawing
def plot_layers(results: list[Result], fig=None, relative_depth: bool | None = None):
    """Ethayarajh's statistics against depth, one line per model in its colour. x is the layer index
    l = 0..L, or the relative depth l / L when ``relative_depth`` (default: when the models differ in
    depth); the axis label says which. A statistic a layer lacks (no token type met the
    self-similarity bounds) is a gap. ``fig``: a Figure or SubFigure to draw into. Returns the figure."""
    relative = len({len(r.layers) for r in results}) > 1 if relative_depth is None else relative_depth
    fig = style.new_figure(fig, (11, 2.6))
    axes = fig.subplots(1, len(LAYER_PANELS))
    for drawn in style.in_figure(results):
        res = drawn.result
        L = len(res.layers) - 1
        x = style.relative_depth(L) if relative else np.arange(L + 1)
        for ax, (key, _) in zip(np.ravel(axes), LAYER_PANELS):
            y = [np.nan if (v := LAYER_VALUES[key](row)) is None else v for row in res.layers]
            ax.plot(x, y, **drawn.line(marker="o", ms=3))
            interval = LAYER_INTERVALS.get(key)
            ci = [interval(row) if interval else None for row in res.layers]
            if all(ci) and drawn.band:  # bootstrap band over sentences (seed 0 only)
                ax.fill_between(x, *np.array(ci, dtype=float).T, alpha=0.2, lw=0, **drawn.quiet)
            mark_final_norm(ax, res, x, y, drawn.color)
    for ax, (key, title) in zip(np.ravel(axes), LAYER_PANELS):
        ax.set_title(title)
        ax.set_ylabel(LAYER_UNITS[key])
        ax.set_xlabel("relative depth l / L" if relative else "layer l (0 = embeddings)")
    style.legend(np.ravel(axes))
    return fig


def first_seeds(results: list[Result]) -> list[Result]:
    """The seed-0 models' results (Fig. 6 draws one column per model; the layer figure draws every seed)."""
    return [r for r in results if not style.seed_of(r.model_name)[1]] or results


ANALYSIS = Analysis(
    name="anisotropy",
    inputs=Sentences(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("anisotropy", plot, "Cosine similarity of random pairs of token (top) and sentence (bottom) vectors "
               "at the last layer (S-LSTM paper Fig. 6). Mass near 1 = a narrow cone (anisotropic); near 0 = spread "
               "out.", select=first_seeds),
        Figure("anisotropy-layers", plot_layers, "Ethayarajh's statistics by layer (relative depth l/L when the "
               "models differ in depth): mean cosine of random tokens (the anisotropy baseline), self-similarity, "
               "intra-sentence similarity and maximum explainable variance."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "12", "--n-tokens", "40"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
