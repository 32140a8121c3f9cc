"""MoG lens: which terms of Eq. 14 make up each layer's attention logits? (Graph-Transformer paper)

How much of each layer's attention-logit variance comes from each term of the Graph-Transformer paper's
Eq. 14 (pp, pi, ip, ii) and from the biases, per layer and sentence-length bucket, for any BERT-style Hugging Face
encoder (self-attention on the layer's input, absolute positions: BERT, RoBERTa, MiniLM, ...): a registry entry of
family ``mog-lens``, or any registry name, model folder, ``hf:org/name`` or loaded model object of such an encoder,
read through the lens (``probes.models.mog_lens.lens_spec``; its cache entries are its own).

From the maps of :mod:`probes.models.mog_lens` (no model runs here): for term t, its share of the logit
variance is sum cov_t / sum var_logit, pooled over every query row (specials included) of every
head and sentence in the group; cov_t is the within-row centred covariance of the term with the
logit (rows are centred because the softmax ignores row constants), so the six shares add to 1
exactly and a term can have a negative share. Also each term's own variance ratio
sum var_t / sum var_logit (no covariances; these need not add to 1). The paper's argument is that
r_p r_p^T ("pp") is recomputed at every layer and over-weights low orders: its share is the number.

    $ python -m analyses.mog_lens --model minilm-l6-lens [--model bert-small] [--model path/to/folder]
          [--n-sentences 300] [--edges 10 --edges 20 --edges 30 --edges 40] [--out out]

Writes out/results/mog_lens/<model>.json (+ .csv: one row per layer, bucket and term) and
out/figures/mog-lens.{png,pdf} (share of each term per layer, one panel per model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from analyses import common, records, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import activations_identity
from analyses.inputs import Sentences, caller_texts_list, corpus_of, is_object, object_options, python_cache
from analyses.mog import bucket_labels, bucket_of
from probes.capture.activations import Activations
from probes.capture.store import USER_CACHE
from probes.config import arg
from probes.errors import ProbeError
from probes.models.mog_lens import TERMS

ALL = "all"


@dataclass
class Config(common.SentenceConfig):
    """Share of each Eq. 14 term in the attention-logit variance, per layer and length bucket."""

    model: list[str] = arg(["minilm-l6-lens"], "registry entries of family mog-lens")
    n_sentences: int = arg(300, "random sentences (seeded sample)", min=1)
    edges: list[int] = arg([10, 20, 30, 40], "length-bucket edges in real tokens: [<e1, e1..e2-1, ..., >=ek]",
                           min=1)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """Shares of one model: share[bucket][layer][term]; bucket "all" pools every sentence."""

    n_layers: int
    n_heads: int
    terms: list[str]
    bucket_labels: list[str]  # "all" first
    bucket_counts: list[int]
    share: list  # (buckets, L, 6) covariance shares (add to 1); null rows for empty buckets
    variance_ratio: list  # (buckets, L, 6) sum var_t / sum var_logit
    definitions: records.Definitions = field(default_factory=records.Definitions)  # prose only
    FIRST_LAYER: ClassVar[int] = 1  # maps come from layers 1..L

    def headline_numbers(self) -> dict[str, stats.Sample]:
        last = self.share[0][-1]
        return {} if last is None else {f"{t} share, last layer": stats.Sample(v) for t, v in zip(self.terms, last)}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the first term's share of the logit variance per layer, all sentences."""
        return np.asarray(self.share[0], float)[:, 0]

    def headline(self) -> dict[str, str]:
        last = self.share[0][-1]
        if last is None:
            return {}
        return {"shares at the last layer (all sentences)": ", ".join(f"{t} {v:.3f}" for t, v in zip(self.terms, last))}

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: each term's
        share of the logit variance per layer, all sentences, one line per term (a marker and line style per
        term). ``kwargs`` (``color=``, ``label=``, ``linewidth=`` ...) go to the lines; without ``color=`` the
        result takes the next colour of the Axes' cycle; the labels ("<model>: <term>") enter the legend, so
        results drawn on one Axes overlay. Fonts and colours follow the caller's rcParams. Returns the Axes."""
        ax = style.one_axes(ax, (3.6, 2.8))
        _shares_panel(ax, self, style.on_axes(ax, self, kwargs))
        ax.set_ylabel("share of logit variance (of 1)")
        return style.finish(ax)


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """Pooled term shares per length bucket and layer."""
    cfg = cfg or Config()
    if "mog_lens_cov" not in acts.maps or "mog_lens_var" not in acts.maps:
        raise ProbeError(f"model '{acts.meta['model']['name']}' has no MoG lens maps: use a registry entry of "
                         f"family mog-lens captured with maps")
    if list(cfg.edges) != sorted(set(cfg.edges)) or not cfg.edges or cfg.edges[0] < 1:
        raise ProbeError(f"--edges must be increasing positive token counts, got {cfg.edges}")
    L, K = acts.n_layers, len(TERMS)
    H = acts.meta["maps"]["mog_lens_cov"]["k"] // K
    labels = [ALL] + bucket_labels(cfg.edges)
    lengths = np.array([int((~acts.special[acts.offsets[t]:acts.offsets[t + 1]]).sum()) for t in range(acts.n_texts)])
    bucket = bucket_of(lengths, cfg.edges) + 1
    cov = np.zeros((len(labels), L, K))
    var = np.zeros((len(labels), L, K + 1))
    for t in range(acts.n_texts):
        c = acts.text_map("mog_lens_cov", t).reshape(L, K, H, -1).sum((2, 3), dtype=np.float64)
        v = acts.text_map("mog_lens_var", t).reshape(L, K + 1, H, -1).sum((2, 3), dtype=np.float64)
        for b in (0, bucket[t]):
            cov[b] += c
            var[b] += v
    counts = np.bincount(bucket, minlength=len(labels))
    counts[0] = acts.n_texts
    total = var[..., -1:]
    ok = (counts > 0)[:, None, None] & (total > 0)
    share = np.where(ok, cov / np.where(total > 0, total, 1), np.nan)
    ratio = np.where(ok, var[..., :-1] / np.where(total > 0, total, 1), np.nan)
    nul = lambda a: [[None if np.isnan(r).any() else r.tolist() for r in layer_rows] for layer_rows in a]  # noqa: E731
    return Result(identity=activations_identity(acts, cfg), n_layers=L, n_heads=H, terms=list(TERMS),
                  bucket_labels=labels, bucket_counts=counts.tolist(), share=nul(share), variance_ratio=nul(ratio),
                  definitions=records.Definitions({
                      "share": "sum over rows of cov(term, logit) / sum of var(logit), rows centred",
                      "variance_ratio": "sum over rows of var(term) / sum of var(logit)",
                      "r_p": "layer l: hidden[l-2] (0 for layer 1); r_i = hidden[l-1] - r_p",
                      "length": "real (non-special) subword tokens; empty buckets are null"}))


def table_rows(res: Result) -> list[dict]:
    return [{"bucket": label, "sentences": res.bucket_counts[b], "layer": j + 1, "term": term,
             "share": None if res.share[b][j] is None else res.share[b][j][k],
             "variance_ratio": None if res.variance_ratio[b][j] is None else res.variance_ratio[b][j][k]}
            for b, label in enumerate(res.bucket_labels) for j in range(res.n_layers)
            for k, term in enumerate(res.terms)]


def _shares_panel(a, r: Result, drawn: style.Drawn | None = None, title_color=None) -> None:
    """One model's term shares per layer (all sentences) on ``a``: a colour per term, the model in the title
    (its colour ``title_color``); or, with ``drawn`` (``Result.plot``), in the result's colour and keywords, a
    marker and line style per term, no title."""
    x = np.arange(1, r.n_layers + 1)
    S = np.array(r.share[0], dtype=float)  # (L, 6)
    for k, term in enumerate(r.terms):
        if term != "bias_row":  # always 0: the softmax ignores row constants
            if drawn is None:
                a.plot(x, S[:, k], marker="o", ms=3, color=f"C{k}", label=term)
            else:
                a.plot(x, S[:, k], **drawn.series(k, term, ms=3))
    a.axhline(0, color="0.5", lw=0.5, label="_nolegend_")
    if drawn is None:
        a.set_title(r.model_name, color=title_color)
    a.set_xlabel("encoder layer")
    a.set_xticks(x)


@style.drawing
def plot(results: list[Result], fig=None):
    """Share of each term per layer (all sentences), one panel per model. ``fig``: a Figure or
    SubFigure to draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (3.4 * len(results), 2.8))
    axes = np.ravel(fig.subplots(1, len(results), squeeze=False))
    colors = style.figure_colors([r.model_name for r in results])
    for a, r in zip(axes, results):
        _shares_panel(a, r, title_color=colors[r.model_name])
    axes[0].set_ylabel("share of logit variance (of 1)")
    axes[0].legend()
    return fig


@dataclass(frozen=True)
class LensSentences(Sentences):
    """The sentence sample's maps through the MoG lens, for a ``mog-lens`` entry or any other Hugging Face encoder
    (a registry name, a folder, ``hf:org/name``, or a loaded model object with its ``tokenizer=``), which is read
    as the ``mog-lens`` entry of the same source (:func:`probes.models.mog_lens.lens_spec`)."""

    def resolve(self, name: str):
        from probes.models.mog_lens import lens_spec

        return lens_spec(super().resolve(name))

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        from probes.models.mog_lens import lens_encoder

        if is_object(model):
            model = lens_encoder(model, tokenizer, name)
        else:
            object_options(model, tokenizer, name)
            model = self.resolve(model)
        given = None if texts is None or corpus_of(texts) is not None else caller_texts_list(texts)
        return {"acts": self.activations(model, cfg, given, **python_cache(cache_dir))}


ANALYSIS = Analysis(
    name="mog_lens",
    inputs=LensSentences(maps=True, token_states=False, family="mog-lens",
                         needs="analyses.mog_lens reads a BERT-style Hugging Face encoder"),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("mog-lens", plot, "The MoG lens: share of each Eq. 14 term (r_p r_p, r_p r_i, r_i r_p, r_i r_i, bias) "
               "in the variance of the attention logits, per layer; r_p r_p large = attention mostly recomputes the "
               "previous layer's input."),
    ),
    example=("--model", "tiny-bert-lens", "--n-sentences", "12"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
