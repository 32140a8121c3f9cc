"""Similarity: which layer of model A represents the same sentences like which layer of model B?

For a reference model A (the first --model) and every other model B, on the same seeded sentence
sample (same --seed: same sentences for every model, via analyses.data.sentence_activations),
for every pair of layers (A x B, and the self-similarity maps A x A and B x B on the same units):

* linear CKA with the debiased (unbiased-HSIC) estimator, streamed in bounded memory;
* SVCCA (99% variance per side, then mean canonical correlation);
* RSA (Spearman correlation of 1 - cosine RDMs of a seeded subsample of units).

The formulas, their degenerate cases and why scikit-learn's CCA is not used are in
analyses.similarity.measures.

Units (--unit):
* ``sentence``: each model's sentence vector at every layer (cls / mean / g, as checkpoints.yaml
  names it). A cls vector is the same [CLS] embedding for every sentence at layer 0: that layer
  has no variance, and its similarities (with itself too) are undefined: null in the result, a hatched
  "n/a" cell in the figures, never a number.
* ``token``: words, so that models with different tokenizers describe the same units. A word is a
  run of a text's non-special tokens: a new word starts at a token without the WordPiece
  continuation mark ``##``, at a SentencePiece token starting with ``▁``, or at a byte-level BPE
  token (GPT-2) whose decoded text starts with a space (``Ġ``); in every scheme a token made only
  of punctuation is a word of its own, as BERT's pre-tokenizer makes it. A word's state is the mean
  of its sub-word states. The word strings (markers removed, lower-cased, accents stripped) must be
  equal in both models, text by text; a text where they differ is dropped from the token units
  (the result counts them). At most --max-units words (a seeded subsample, the same for both).

    $ python -m analyses.similarity --model minilm-l6 --model slstm-small [--model bert-small]
          [--measure cka --measure svcca --measure rsa] [--unit sentence|token] [--corpus PATH]
          [--n-sentences 1000] [--seed 0] [--out out]

Writes out/results/similarity/<A>__<B>__<unit>.json (+ .csv: measure, block, row_layer, column_layer,
value), one file per model pair and unit (--model A alone: A__A__<unit>), and
out/figures/similarity-<A>__<B>__<unit>.{png,pdf} (per measure: A x A | A x B | B x B heatmaps)
and out/figures/similarity-<unit>.{png,pdf} (CKA: A x A beside A x B for every B).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analyses import common, records, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import Identity, SentenceConfig, caller_texts, settings_used
from analyses.inputs import Pairs
from analyses.model_info import ModelPair
from analyses.pairs import PairInfo
from analyses.similarity.measures import DISTANCES, MEASURES, similarity_matrices
from analyses.similarity.rows import Alignment, Blocks, Chance, Matrices, Sides
from analyses.similarity.words import align_words, word_states
from probes.capture.activations import Activations
from probes.config import arg, tqdm_class
from probes.errors import ProbeError
from probes.precision import Float32View

UNITS = ("sentence", "token")
BLOCKS = ("aa", "ab", "bb")


@dataclass
class Config(SentenceConfig):
    """CKA, SVCCA and RSA between every layer of model A and every layer of model B (and of A itself)."""

    model: list[str] = arg(["minilm-l6", "slstm-small"], "checkpoint names; the first is compared with each other")
    n_sentences: int = arg(1000, "random sentences (the same sample for every model)", min=4)
    measure: list[str] = arg(list(MEASURES), "measures: cka, svcca, rsa", choices=MEASURES)
    unit: str = arg("sentence", "units compared: sentence (sentence vectors) or token (words, sub-words averaged)",
                    choices=UNITS)
    max_units: int = arg(20000, "token unit: at most this many words (seeded subsample)", min=4)
    svcca_variance: float = arg(0.99, "SVCCA: fraction of variance each side's PCA keeps", min=0.01, max=1.0)
    rsa_units: int = arg(1000, "RSA: units in the RDMs (seeded subsample; C(m,2) dissimilarities)", min=4)
    rsa_distance: str = arg("cosine", "RSA dissimilarity: cosine (1 - cos) or correlation (1 - Pearson r)",
                            choices=DISTANCES)
    batch_rows: int = arg(4096, "CKA/SVCCA: rows per mini-batch of the streamed sums", min=1)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """Similarity matrices of one model pair: ``matrices.of(measure).of(block)`` (:mod:`.rows`), block "ab" is
    (L_A+1, L_B+1), "aa" (L_A+1, L_A+1), "bb" (L_B+1, L_B+1); row/column l = layer l (0 = embeddings).
    The identity names the pair (model_name "<A>__<B>__<unit>"); its model and activations are "a"/"b"
    dicts, its model saved as "models" (the files' key)."""

    IDENTITY_KEYS = {"model": "models"}
    HEATMAP = True
    PAIR_UNIT = True  # one result per pair and unit: <A>__<B>__<unit> (analyses.pairs.PairInfo)

    model_a: str
    model_b: str
    unit: str
    measures: list[str]
    n_layers_a: int  # L_A
    n_layers_b: int  # L_B
    n_units: int  # units every measure but RSA uses
    n_rsa_units: int  # units in the RDMs
    matrices: Matrices  # measure -> block -> nested lists
    svcca_dims: Sides  # a/b: PCA dimensions kept per layer
    constant_columns: Sides  # a/b: per layer, the number of constant (dropped) columns
    alignment: Alignment  # token unit: texts kept/dropped, words; sentence unit: texts
    svcca_chance: Chance = field(default_factory=Chance)  # per block sqrt(max(k_row, k_col) / (n-1)): SVCCA's chance
    rsa_zero_vectors: Sides = field(default_factory=Sides)  # a/b: per layer, RSA units whose vector is zero
    definitions: records.Definitions = field(default_factory=records.Definitions)  # prose only

    @property
    def name(self) -> str:
        """The results-file stem: <A>__<B>__<unit>."""
        return PairInfo(self.model_a, self.model_b, unit=self.unit).name()

    def sides(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """(name, L) of model A and of model B as the heatmaps label them; with sentence units, a name says how
        its model makes sentence vectors where the two models differ in that ("minilm-l6 (mean)",
        :func:`style.pooling_tags`)."""
        names = [self.model_a, self.model_b]
        if self.unit == "sentence":
            pair = self.identity.pair
            kinds = [m.sentence_vector for m in pair.sides] if pair is not None else [None, None]
            names = [f"{n} ({how})" if how else n for n, how in zip(names, style.pooling_words(kinds))]
        return (names[0], self.n_layers_a), (names[1], self.n_layers_b)

    def matrix(self, measure: str, block: str = "ab") -> np.ndarray:
        return np.asarray(self.matrices.of(measure).of(block), float)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"{m.upper()} last x last layer": stats.Sample(float(self.matrix(m, "ab")[-1, -1]))
                for m in self.measures}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws: the A x B heatmap of CKA (of the first measure without CKA)."""
        return self.matrix("cka" if "cka" in self.measures else self.measures[0], "ab")

    def headline(self) -> dict[str, str]:
        out = {"units": f"{self.n_units} {self.unit} units"}
        for m in self.measures:
            ab = self.matrix(m, "ab")
            shown = [f"{x:.3f}" if np.isfinite(x) else "n/a (undefined)" for x in (ab[-1, -1], np.nanmax(
                np.r_[ab.ravel(), -np.inf]))]
            out[f"{m.upper()} last x last layer"] = f"{shown[0]} (A x B, max {shown[1]})"
        return out

    @style.drawing
    def plot(self, ax=None, measure: str | None = None, block: str = "ab", colorbar: bool = True, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: the ``block``
        ("ab", "aa" or "bb") heatmap of ``measure`` (default: CKA when computed, else the first measure), with
        a colour bar beside it. ``kwargs`` (``cmap=``, ``vmin=``, ``vmax=``, ``alpha=``, ``interpolation=``
        ...) go to ``ax.imshow``. A heatmap does not overlay: an Axes that already holds an image is refused
        (ProbeError); draw two results side by side (``plt.subplots(1, 2)``). Fonts follow the caller's
        rcParams. Returns the Axes."""
        measure = measure or ("cka" if "cka" in self.measures else self.measures[0])
        if measure not in self.measures or block not in BLOCKS:
            raise ProbeError(f"this result holds measures {self.measures} and blocks {list(BLOCKS)}, "
                             f"not ({measure!r}, {block!r})")
        ax = style.one_axes(ax, (4.0, 3.2))
        if ax.images:
            raise ProbeError("a similarity heatmap does not overlay: this Axes already holds an image; draw each "
                             "result on its own Axes (plt.subplots(1, 2))")
        a, b = self.sides()
        y, x = {"aa": (a, a), "ab": (a, b), "bb": (b, b)}[block]
        title = kwargs.pop("title", None)  # none unless asked (the axes and the colour bar name what is drawn)
        im = _heatmap(ax, self.matrix(measure, block), y, x, title, grid=False, **kwargs)
        if colorbar:
            ax.figure.colorbar(im, ax=ax, shrink=0.8, label=f"{LABELS[measure]}, {self.unit} units")
        return ax


# ----------------------------------------------------------------------------- compute


def sentence_layers(acts: Activations) -> list:
    """Each layer's sentence vectors (T, d) as they are stored: views of the memory-mapped cache (a float32
    face of float16 storage), read row by row as the measures stream them, never copied whole."""
    S = acts.sentence
    if isinstance(S, Float32View):
        return [Float32View(S.stored[lyr]) for lyr in range(S.shape[0])]
    return [S[lyr] for lyr in range(S.shape[0])]


def units(acts_a: Activations, acts_b: Activations, cfg: Config, rng) -> tuple:
    """(X_A, X_B, alignment summary) for cfg.unit: per layer 0..L an (n, d) array of each model (X_A[l] (n, d_A),
    X_B[l] (n, d_B)): a list of per-layer views (sentence) or one (L+1, n, d) array (token)."""
    if acts_a.texts != acts_b.texts:
        raise ProbeError("the two models' activations are not of the same texts; use the same corpus and seed")
    if cfg.unit == "sentence":
        return sentence_layers(acts_a), sentence_layers(acts_b), Alignment(n_texts=acts_a.n_texts)
    words = align_words(acts_a, acts_b)
    n = len(words.starts_a)
    if n > cfg.max_units:
        words = words.select(np.sort(rng.choice(n, size=cfg.max_units, replace=False)))
    summary = Alignment(n_texts=acts_a.n_texts, n_texts_kept=words.n_texts_kept,
                        n_texts_dropped=words.n_texts_dropped, n_words_aligned=n,
                        n_words_used=len(words.starts_a), schemes=list(words.schemes))
    if len(words.starts_a) < 4:
        raise ProbeError(f"only {len(words.starts_a)} words are segmented alike by both models "
                         f"({words.n_texts_dropped} of {acts_a.n_texts} texts disagree); use more sentences")
    return (word_states(acts_a, words.tokens_a, words.starts_a),
            word_states(acts_b, words.tokens_b, words.starts_b), summary)


def compute(cfg: Config | None = None, *, acts_a: Activations, acts_b: Activations) -> Result:
    """Every measure for the layer pairs A x B, A x A and B x B of two models on the same texts
    (pass the same activations twice for self-similarity only)."""
    cfg = cfg or Config()
    rng = np.random.default_rng(cfg.seed)
    XA, XB, alignment = units(acts_a, acts_b, cfg, rng)  # per layer (n, d_A), (n, d_B)
    n = len(XA[0])
    if n < 4:
        raise ProbeError(f"need at least 4 units for the debiased estimator, got {n}; use more sentences")
    rsa_rows = np.sort(rng.choice(n, size=min(cfg.rsa_units, n), replace=False))
    same = acts_a is acts_b
    kw: dict[str, Any] = dict(measures=cfg.measure, variance=cfg.svcca_variance, rsa_rows=rsa_rows,
                              distance=cfg.rsa_distance, batch_rows=cfg.batch_rows)  # similarity_matrices'
    La, Lb = len(XA), len(XB)
    total = La * (La + 1) // 2 + (0 if same else La * Lb + Lb * (Lb + 1) // 2)
    name_a, name_b = acts_a.meta["model"]["name"], acts_b.meta["model"]["name"]
    with tqdm_class()(total=total, desc=f"similarity {name_a} x {name_b} ({cfg.unit})", unit="pair") as bar:
        aa = similarity_matrices(XA, None, progress=lambda: bar.update(1), **kw)
        ab = aa if same else similarity_matrices(XA, XB, progress=lambda: bar.update(1), **kw)
        bb = aa if same else similarity_matrices(XB, None, progress=lambda: bar.update(1), **kw)
    matrices = Matrices(**{m: Blocks(**{blk: with_nulls(got[m], got["undefined"][m])
                                        for blk, got in (("aa", aa), ("ab", ab), ("bb", bb))}) for m in cfg.measure})
    meta = {"a": acts_a.meta, "b": acts_b.meta}
    corpus = acts_a.meta.get("corpus") or caller_texts(acts_a.texts)
    identity = Identity(
        model_name=PairInfo(name_a, name_b, unit=cfg.unit).name(),
        config=settings_used(cfg, acts_a.meta, corpus, requested=[name_a, name_b]),
        model=ModelPair.from_json({k: m["model"] for k, m in meta.items()}),
        activations={k: {**{f: m[f] for f in ("key", "n_texts", "n_tokens", "truncated_texts")},
                         **({"intervention": m["intervention"]} if "intervention" in m else {})}  # an edited run's
                     for k, m in meta.items()},
        corpus=corpus)
    dims_a, dims_b = aa["svcca_dims"][0], bb["svcca_dims"][0]  # PCA dimensions kept per layer of A, of B
    return Result(
        identity=identity, model_a=name_a, model_b=name_b, unit=cfg.unit, measures=list(cfg.measure),
        n_layers_a=La - 1, n_layers_b=Lb - 1, n_units=n, n_rsa_units=len(rsa_rows), matrices=matrices,
        svcca_dims=Sides(a=dims_a, b=dims_b),
        svcca_chance=Chance(aa=svcca_chance(dims_a, dims_a, n).tolist(), ab=svcca_chance(dims_a, dims_b, n).tolist(),
                            bb=svcca_chance(dims_b, dims_b, n).tolist()) if "svcca" in cfg.measure else Chance(),
        constant_columns=Sides(a=[len(c) for c in aa["constant"][0]], b=[len(c) for c in bb["constant"][0]]),
        rsa_zero_vectors=Sides(a=aa["rsa_zero"][0], b=bb["rsa_zero"][0]) if "rsa" in cfg.measure else Sides(),
        alignment=alignment,
        definitions=records.Definitions({
            "layers": "row/column l = hidden[l]: 0 = embedding output, l = output of layer l",
            "blocks": "ab: layers of A (rows) x layers of B (columns); aa, bb: self-similarity of A, B",
            "units": "sentence vectors (" + ", ".join(sorted({m["model"]["sentence_vector"] for m in meta.values()}))
                     + ")" if cfg.unit == "sentence" else
                     "words: mean of each word's sub-word states; special tokens excluded; texts whose word "
                     "segmentation differs between the models dropped (see alignment)",
            "cka": "linear CKA, unbiased HSIC (Song et al. 2012; Nguyen et al. 2021), streamed row sums",
            "svcca": f"PCA keeping {cfg.svcca_variance:g} of the variance per side, then mean canonical correlation",
            "rsa": f"Spearman correlation of the {cfg.rsa_distance} RDMs of {len(rsa_rows)} seeded units",
            "svcca_chance": "sqrt(max(k_a, k_b) / (n - 1)): the root of the expected mean squared canonical "
                            "correlation of independent Gaussian data of the same dimensions (tr(P_a P_b) of random "
                            "subspaces); the chance mean correlation is below it. SVCCA near it: no shared subspace",
            "degenerate": "a constant column is dropped; a layer with no variance has no CKA or SVCCA with "
                          "anything (itself included: 0/0), and an RDM with all entries equal no RSA: those cells "
                          "are null (undefined), drawn hatched with n/a",
            "rsa_zero_vectors": "a cosine with a zero vector (a constant one for the correlation distance) is "
                                "undefined: RSA leaves a unit whose vector is zero in either layer of a pair out of "
                                "both RDMs of that pair; rsa_zero_vectors counts them per layer",
        }),
    )


def with_nulls(values: np.ndarray, undefined: np.ndarray) -> list[list]:
    """A matrix as nested lists, None (null) in the cells where the measure is undefined."""
    return [[None if u else float(v) for v, u in zip(row, mask)] for row, mask in zip(values, undefined)]


def svcca_chance(k_rows, k_cols, n: int) -> np.ndarray:
    """(len(k_rows), len(k_cols)) SVCCA's chance level for PCA dimensions k_x, k_y and n units:
    sqrt(max(k_x, k_y) / (n - 1)). For independent data, one side rotation-invariant (Gaussian), the
    squared canonical correlations sum to tr(P_x P_y) of two random projections of ranks k_x, k_y in
    the (n-1)-dimensional centred space, whose expectation is k_x k_y / (n - 1); divided by the
    min(k_x, k_y) correlations SVCCA averages, and rooted (Jensen: the mean correlation is below it)."""
    kr, kc = np.asarray(k_rows, float)[:, None], np.asarray(k_cols, float)[None, :]
    return np.sqrt(np.maximum(kr, kc) / (n - 1)) * ((kr > 0) & (kc > 0))


def check_config(cfg: Config) -> None:
    """What ``arg(min=, choices=)`` cannot say, before any work (ProbeError: one line, exit status 2)."""
    if not isinstance(cfg.unit, str):  # from Python, unit=["sentence"]: one result (and file name) is of one unit
        raise ProbeError(f"unit is one value ({' or '.join(UNITS)}), not {cfg.unit!r}: run once per unit")
    if not cfg.measure or len(set(cfg.measure)) != len(cfg.measure):
        raise ProbeError("name each --measure once (at least one)")
    if not cfg.model:
        raise ProbeError("name at least one --model (the first is compared with every other)")
    if any("__" in m for m in cfg.model):
        raise ProbeError("model names with '__' cannot be told apart in result-file names")


def table_rows(result: Result) -> list[dict]:
    """Flat CSV rows: measure, block, layer_a (row), layer_b (column), value."""
    return [{"measure": m, "block": blk, "row_layer": i, "column_layer": j, "value": v}
            for m in result.measures for blk in BLOCKS
            for i, row in enumerate(result.matrices.of(m).of(blk)) for j, v in enumerate(row)]


# ----------------------------------------------------------------------------- plot

LABELS = {"cka": "linear CKA (debiased)", "svcca": "SVCCA", "rsa": "RSA (Spearman)"}


def _depth_ticks(L: int) -> tuple[list[int], list[str]]:
    """Tick positions (layer indices) and labels (relative depth l / L)."""
    layers = list(range(L + 1)) if L <= 12 else sorted({int(round(x)) for x in np.linspace(0, L, 7)})
    return layers, [f"{lyr / L:.2g}" if L else "0" for lyr in layers]


UNDEFINED = "n/a"  # what an undefined cell (null in the result) shows instead of a number
UNDEFINED_FACE = "0.92"  # its colour: light grey, hatched, outside the colour scale


def _heatmap(ax, M: np.ndarray, row: tuple[str, int], col: tuple[str, int], title: str | None, grid: bool = True,
             **kwargs):
    """M (rows = layers of model row[0], columns = layers of col[0]); colour on [0, 1] (``kwargs``: more
    keywords of ``ax.imshow``); each value written in its cell when there are at most 100, in black or white,
    whichever reads on the cell's colour. A cell where the measure is undefined (NaN: null in the result) is
    never drawn as a number: light grey, hatched, and "n/a" where values are written. ``grid``: the suite's
    figures turn the theme's grid off (it would cross the cells); on a caller's Axes the grid is the caller's."""
    import matplotlib
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Rectangle

    if grid:
        ax.grid(False)
    opts = {"origin": "lower", "vmin": 0.0, "vmax": 1.0, "cmap": "magma", "aspect": "auto",
            "interpolation": "nearest", **kwargs}
    opts["cmap"] = matplotlib.colormaps.get_cmap(opts["cmap"]).with_extremes(bad=UNDEFINED_FACE)
    M = np.ma.masked_invalid(np.asarray(M, float))
    im = ax.imshow(M, **opts)
    for i, j in zip(*np.nonzero(np.ma.getmaskarray(M))):
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="////", edgecolor="0.6", linewidth=0,
                               label=f"undefined {i},{j}"))
    for setter, labeler, (name, L) in ((ax.set_yticks, ax.set_ylabel, row), (ax.set_xticks, ax.set_xlabel, col)):
        pos, lab = _depth_ticks(L)
        setter(pos, lab)
        labeler(f"{name} (depth l/{L})")
    if M.size <= 100:
        for (i, j), v in np.ndenumerate(M.filled(np.nan)):
            if not np.isfinite(v):
                ax.text(j, i, UNDEFINED, ha="center", va="center", fontsize="x-small", color="0.3")
                continue
            r, g, b = to_rgb(im.cmap(im.norm(v)))
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize="x-small",
                    color="k" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "w")
    if title:
        ax.set_title(title)
    return im


@style.drawing
def plot(results: list[Result], fig=None, measures: list[str] | None = None):
    """Per result and measure, one row of heatmaps: A x A | A x B | B x B (colour clipped to [0, 1]).
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    rows = [(r, m) for r in results for m in (measures or r.measures)]
    fig = style.new_figure(fig, (10.5, 3.1 * len(rows)))
    axes = fig.subplots(len(rows), 3, squeeze=False)
    for (r, m), axrow in zip(rows, axes):
        a, b = r.sides()
        for ax, blk, (y, x) in zip(axrow, BLOCKS, ((a, a), (a, b), (b, b))):
            im = _heatmap(ax, r.matrix(m, blk), y, x, f"{m.upper()}: {y[0]} x {x[0]}")
        fig.colorbar(im, ax=list(axrow), shrink=0.8, label=f"{LABELS[m]}, {r.unit} units")
    return fig


@style.drawing
def plot_overview(results: list[Result], fig=None, measure: str = "cka"):
    """Two rows per (model A, unit): on top A x A, then A x B for every B; below each A x B, B x B.
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    results = [r for r in results if measure in r.measures]
    if not results:
        raise ProbeError(f"no result holds the measure {measure!r}")
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.model_a, r.unit), []).append(r)
    ncol = 1 + max(sum(r.model_b != r.model_a for r in g) for g in groups.values())
    fig = style.new_figure(fig, (3.3 * ncol + 0.8, 5.8 * len(groups)))
    axes = fig.subplots(2 * len(groups), ncol, squeeze=False)
    for g, ((name, unit), group) in enumerate(groups.items()):
        top, bottom = axes[2 * g], axes[2 * g + 1]
        a = (name, group[0].n_layers_a)
        im = _heatmap(top[0], group[0].matrix(measure, "aa"), a, a, f"{name} x {name} ({unit})")
        others = [r for r in group if r.model_b != r.model_a]
        for c, r in enumerate(others, start=1):
            a_r, b = r.sides()  # names marked with their pooling where A and this B make sentence vectors differently
            _heatmap(top[c], r.matrix(measure, "ab"), a_r, b, f"{a_r[0]} x {b[0]} ({unit})")
            _heatmap(bottom[c], r.matrix(measure, "bb"), b, b, f"{b[0]} x {b[0]} ({unit})")
        for ax in [bottom[0], *top[1 + len(others):], *bottom[1 + len(others):]]:
            ax.axis("off")
        fig.colorbar(im, ax=[*top, *bottom], shrink=0.6, label=LABELS[measure])
    return fig


ANALYSIS = Analysis(
    name="similarity",
    inputs=Pairs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config,
    figures=(
        Figure("similarity-{}__{}__{}", plot, "One row of heatmaps per measure computed (linear CKA debiased, "
               "SVCCA, RSA: the row titles say which): every layer of the first model against every layer of the "
               "second (A x B, middle), and each model against itself (A x A, B x B); relative depth on the axes; "
               "1 = the same geometry; hatched n/a: undefined (a layer without variance has no similarity, not "
               "even with itself).", each=lambda r: (r.model_a, r.model_b, r.unit)),
        Figure("similarity-{}__{}", plot_overview, "Linear CKA (debiased) of the reference model against itself (top "
               "left) and against every other model (top row), with each other model against itself below it; 1 = "
               "the same geometry up to rotation and scale, 0 = unrelated; hatched n/a: undefined (a layer "
               "without variance).",
               select=lambda rs: [r for r in rs if "cka" in r.measures], each=lambda r: (r.model_a, r.unit)),
    ),
    example=("--model", "tiny-bert", "--model", "tiny-albert", "--n-sentences", "12", "--rsa-units", "8"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line
