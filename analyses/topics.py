"""Topic propagation: do continuations stay on the context's topic? (recurrence paper §5.3.1)

Generation and windows live in probes.models.lm and probes.capture.windows; the steps:

1. **LDA.** gensim ``LdaModel`` with K = 20 topics (``--topics``), ``random_state = seed``,
   ``minimum_probability = 0``, fitted on the TRAIN part of the corpus (the first 90% of every
   document; :func:`probes.corpus.split_text`), cut into chunks of consecutive paragraphs of at least
   ``--lda-chunk-words`` (200) words. Preprocessing of every text (training chunks, contexts,
   continuations): ``gensim.utils.simple_preprocess`` (lowercase, accents stripped, alphabetic
   tokens of 3-15 letters), minus gensim's ``STOPWORDS``; the dictionary keeps words in at least
   ``--no-below`` (5) chunks and at most ``--no-above`` (50%) of them. The fit is done once and reused: kept
   in memory and under the run's activation cache (``<out>/cache/.lda/<key>/``; from Python the ``cache_dir``'s),
   keyed by the sha256 of the training chunks, these settings and the gensim and numpy versions.
2. **Contexts.** M (``--n-contexts``) non-overlapping spans of C + 30 tokens (C =
   ``--context-tokens``, default: model A's window T, i.e. one window as in the paper) drawn with
   the seed from the HELD-OUT part (the last 10% of every document): C context tokens, then the 30
   real next tokens (the reference continuation).
3. **Continuations.** 30 greedy (argmax) tokens from model A (recurrent) and model B (baseline),
   each run in its own window setting (T, o) on context + generated tokens exactly as
   ``analyses.perplexity`` runs a document: windows start every T - o tokens and a token is
   predicted by the window that would score it. With C = T and o = 0 the first token is predicted
   from the full context and the rest from a new window that holds only generated tokens; the
   recurrent model also gets h_prev of the context window, the baseline nothing more (the paper's
   footnote 6: "the baseline receives one token of context to begin generating from").
4. **Topic distributions** of context and continuation: the full K-vector (LDA variational
   posterior gamma normalised, i.e. ``get_document_topics`` with ``minimum_probability=0`` and
   without gensim's 1e-8 floor); the inference RNG is reset to the seed for every text, so a
   text's distribution does not depend on the order. A text with no dictionary word gets the
   prior (uniform).
5. **JSD** of context vs continuation: :func:`js_divergence` (base 2, the divergence, not its
   square root; in [0, 1]). Reported: mean JSD of A, of B and of the real continuation; the share
   of contexts where A's JSD < B's (ties count as not less and are reported); the sign test
   (``scipy.stats.binomtest`` on the non-tied pairs) and the Wilcoxon signed-rank test
   (``scipy.stats.wilcoxon``), two-sided, plus one-sided "A < B" p-values.

The topic model (steps 1 and 4) and the JSD are :mod:`analyses.topic_model`.

    $ python -m analyses.topics --model-a gpt2-small-recurrent --model-b gpt2-small-base
          [--corpus PATH] [--n-contexts 500] [--seed 0] [--out out]

Writes out/results/topics/<A>-vs-<B>.json (numbers, per-context JSDs, the topics' top words;
.csv: one row per context), out/results/topics/<A>-vs-<B>.continuations.jsonl (every context
with both continuations and the real one, their JSDs and top topics), and
out/figures/topics.{png,pdf} (paired JSDs, A against B) and topics-differences.{png,pdf}.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from analyses import common, records, style
from analyses import stats as bootstrap_stats
from analyses.analysis import Analysis, Figure
from analyses.common import CALLER_TEXTS, Identity, settings_used
from analyses.inputs import LMPair, LMPairConfig, cli_cache
from analyses.model_info import ModelInfo, ModelPair
from analyses.pairs import VS, PairInfo
from analyses.topic_model import (  # noqa: F401 - js_divergence and the LDA steps: the module's API too
    fit_lda,
    js_divergence,
    preprocess,
    top_words,
    topic_distributions,
    training_chunks,
)
from analyses.topic_rows import Continuation, TopicStatistics, TopTopics
from probes.capture.store import USER_CACHE, UserCache
from probes.capture.windows import check_fits, check_window, greedy_windowed
from probes.config import arg, tqdm_class
from probes.corpus import Corpus, corpus_split, load_corpus
from probes.errors import ProbeError


@dataclass
class Config(LMPairConfig):
    """Topic JSD between contexts and greedy continuations of a recurrent model (A) and a baseline (B)."""

    model_a: str = arg("gpt2-small-recurrent", "model A (the recurrent model), a causal LM from checkpoints.yaml")
    model_b: str = arg("gpt2-small-base", "model B (the baseline), a causal LM from checkpoints.yaml")
    n_contexts: int = arg(500, "contexts M drawn from the held-out part (non-overlapping)", min=1)
    context_tokens: int = arg(0, "context length C in tokens (0: model A's window T)", min=0)
    continuation_tokens: int = arg(30, "greedy tokens generated after each context", min=1)
    window_a: int = arg(0, "model A's window T (0: its own: recurrence training window, else longest input)", min=0)
    overlap_a: int = arg(0, "model A's overlap o", min=0)
    window_b: int = arg(0, "model B's window (0: the same as model A's)", min=0)
    overlap_b: int = arg(0, "model B's overlap", min=0)
    topics: int = arg(20, "LDA topics K", min=1)
    lda_passes: int = arg(5, "LDA passes over the training chunks", min=1)
    lda_iterations: int = arg(100, "LDA inference iterations per document", min=1)
    lda_chunk_words: int = arg(200, "training chunks: consecutive paragraphs of at least this many words", min=1)
    no_below: int = arg(5, "dictionary: keep words in at least this many training chunks", min=1)
    no_above: float = arg(0.5, "dictionary: keep words in at most this fraction of training chunks", min=0.0, max=1.0)
    batch_size: int = arg(32, "contexts per forward pass", min=1)


# ----------------------------------------------------------------------------- contexts


def sample_spans(doc_ids: list[list[int]], length: int, n: int, seed: int) -> list[tuple[int, int]]:
    """``n`` non-overlapping (document, start) spans of ``length`` tokens, seeded; the placement
    rule of probes.corpus.token_windows (slots per document, then random non-overlapping starts)."""
    capacity = np.array([len(ids) // length for ids in doc_ids], dtype=np.int64)
    if n > capacity.sum():
        raise ProbeError(f"the held-out text holds only {int(capacity.sum())} non-overlapping spans of {length} "
                         f"tokens; asked for {n} contexts (lower --n-contexts or --context-tokens)")
    rng = np.random.default_rng(seed)
    slots = rng.choice(int(capacity.sum()), size=n, replace=False)
    per_doc = np.bincount(np.searchsorted(np.cumsum(capacity), slots, side="right"), minlength=len(doc_ids))
    spans = []
    for d, (ids, k) in enumerate(zip(doc_ids, per_doc)):
        if k:
            free = len(ids) - k * length
            values = np.sort(rng.choice(free + k, size=k, replace=False))
            spans += [(d, int(s)) for s in values + np.arange(k) * (length - 1)]
    return spans


# ----------------------------------------------------------------------------- statistics


def jsd_intervals(jsd_a, jsd_b, seed: int = 0) -> dict:
    """Percentile intervals over contexts of mean JSD A, mean JSD B and (paired: both
    continuations share the context) of their difference A - B: mean_jsd_a_ci, mean_jsd_b_ci,
    mean_difference, mean_difference_ci and the bootstrap block."""
    a, b = np.asarray(jsd_a, dtype=np.float64), np.asarray(jsd_b, dtype=np.float64)
    boot = bootstrap_stats.bootstrap_block("context", len(a), seed=seed)
    W = bootstrap_stats.resample_weights(len(a), boot.resamples, seed)
    ci = bootstrap_stats.interval(bootstrap_stats.mean_replicates(np.stack([a, b, a - b], 1), W), boot.level)
    return {"mean_jsd_a_ci": ci[:, 0].tolist(), "mean_jsd_b_ci": ci[:, 1].tolist(),
            "mean_difference": float(np.mean(a - b)), "mean_difference_ci": ci[:, 2].tolist(), "bootstrap": boot}


def paired_statistics(jsd_a: np.ndarray, jsd_b: np.ndarray) -> TopicStatistics:
    """Mean JSDs, share A < B, sign test and Wilcoxon signed-rank p-values (two-sided and A < B); the intervals
    (:func:`jsd_intervals`) and the real continuation's mean are added by :func:`compute`."""
    from scipy.stats import binomtest, wilcoxon

    diff = np.asarray(jsd_a) - np.asarray(jsd_b)
    less, greater = int((diff < 0).sum()), int((diff > 0).sum())
    n = len(diff)
    counts: dict[str, Any] = dict(n_contexts=n, mean_jsd_a=float(np.mean(jsd_a)), mean_jsd_b=float(np.mean(jsd_b)),
                                  median_difference=float(np.median(diff)), n_a_less=less, n_a_greater=greater,
                                  n_ties=n - less - greater, share_a_less=less / n if n else float("nan"))
    if less + greater == 0:
        return TopicStatistics(**counts, sign_test_p=1.0, sign_test_p_a_less=1.0, wilcoxon_p=1.0,
                               wilcoxon_p_a_less=1.0, note="no pair differs: both tests are void (p = 1)")
    return TopicStatistics(
        **counts, sign_test_p=binomtest(less, less + greater, 0.5, alternative="two-sided").pvalue,
        sign_test_p_a_less=binomtest(less, less + greater, 0.5, alternative="greater").pvalue,
        wilcoxon_p=float(wilcoxon(jsd_a, jsd_b, alternative="two-sided").pvalue),
        wilcoxon_p_a_less=float(wilcoxon(jsd_a, jsd_b, alternative="less").pvalue))


# ----------------------------------------------------------------------------- compute


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One A-vs-B comparison: the saved document's keys, in order (prose only in ``definitions``). The
    identity's model_name is "<A>-vs-<B>"; its model the pair, saved as model_a / model_b (each LM's
    identity + the window and overlap it ran with); its corpus the corpus, the LDA training part, the
    contexts' part and same_tokenizer. ``continuations`` (per context: the texts and JSDs) is saved
    beside the JSON as <A>-vs-<B>.continuations.jsonl."""

    IDENTITY_KEYS = {"model": ("model_a", "model_b")}
    PAIR_JOIN = VS  # <A>-vs-<B> (analyses.pairs.PairInfo)
    SIDE_FILES = {"continuations": ".continuations.jsonl"}

    @property
    def model_a(self) -> ModelInfo:
        """A's description as saved: the LM's identity, window, overlap."""
        return self._pair().a

    @property
    def model_b(self) -> ModelInfo:
        return self._pair().b

    def _pair(self) -> ModelPair:
        pair = self.identity.pair
        if pair is None:
            raise TypeError(f"{self.model_name}: a topics result's identity holds two models (A and B)")
        return pair


    definitions: records.Definitions  # prose: what every number means (nothing reads numbers from it)
    statistics: TopicStatistics  # paired statistics, intervals (whether a claim holds: analyses.summary.claims)
    topics_top_words: list[list[str]]  # per topic its top words
    jsd_a: list[float]  # (M,) JSD(context, A's continuation) per context
    jsd_b: list[float]  # (M,) the same for B
    jsd_reference: list[float]  # (M,) the same for the real continuation
    continuations: list[Continuation] | None = None  # per context; None when read back from the JSON

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: A's JSD
        against B's per context (below the diagonal: A stays closer to the topic). ``kwargs`` (``color=``,
        ``label=``, ``marker=``, ``s=``, ``alpha=`` ...) go to ``ax.scatter``; without ``color=`` the next
        colour of the Axes' cycle; the label (default: the comparison and its means) enters the legend, so
        comparisons drawn on one Axes overlay. Fonts and colours follow the caller's rcParams. Returns the
        Axes."""
        from matplotlib.collections import Collection

        ax = style.one_axes(ax, (3.4, 3.3))
        s = self.statistics
        label = (f"{style.display_name(self.model_name)}: mean A {s.mean_jsd_a:.3f}, B {s.mean_jsd_b:.3f}, "
                 f"A<B {100 * s.share_a_less:.0f}%")
        drawn = style.on_axes(ax, self, kwargs, label, Collection, ("color", "c", "facecolor"))
        ax.scatter(self.jsd_b, self.jsd_a, **drawn.line(Collection, s=6, alpha=0.5, lw=0))
        _diagonal(ax, titled=False)
        ax.set_xlabel("JSD (bits), B's continuation")
        ax.set_ylabel("JSD (bits), A's continuation")
        return style.finish(ax, title="below the diagonal: A closer to the topic", markerscale=2)

    def headline_numbers(self) -> dict[str, bootstrap_stats.Sample]:
        return {"mean JSD(A) - JSD(B)": self.mean_jsd_difference()}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: each context's (JSD of B, JSD of A), one point per context."""
        return np.column_stack([self.jsd_b, self.jsd_a])

    def headline(self) -> dict[str, str]:
        s = self.statistics
        reference = float("nan") if s.mean_jsd_reference is None else s.mean_jsd_reference
        return {"mean topic JSD": f"A {s.mean_jsd_a:.4f}, B {s.mean_jsd_b:.4f}, real continuation {reference:.4f}",
                "A < B": f"in {100 * s.share_a_less:.1f}% of {s.n_contexts} contexts"}

    def mean_jsd_difference(self) -> bootstrap_stats.Sample:
        """The mean over contexts of JSD(A) - JSD(B), paired (both continuations share the context), with its
        bootstrap replicates over contexts (the weights the analysis drew; the point value alone without them)."""
        d = np.asarray(self.jsd_a, dtype=np.float64) - np.asarray(self.jsd_b, dtype=np.float64)
        block = self.statistics.bootstrap
        if block is None:
            return bootstrap_stats.Sample(float(np.mean(d)))
        return bootstrap_stats.Sample.of_mean(float(np.mean(d)), d, block)


@dataclass(frozen=True)
class TopicsInputs(LMPair):
    """The pair and corpus of :class:`analyses.inputs.LMPair`, and the activation cache of the run, where the
    fitted LDA is kept (``cache_dir``): ``<out>/cache`` on the command line, from Python the ``cache_dir`` given
    (the per-user cache by default; None: the LDA is kept in memory only)."""

    def load(self, unit: tuple, cfg) -> dict:
        return {**super().load(unit, cfg), **cli_cache(cfg)}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        got = super().from_python(model, texts, cfg, tokenizer=tokenizer, name=name, cache_dir=cache_dir)
        return {**got, "cache_dir": cache_dir}


def _window(lm, window: int) -> int:
    return window if window > 0 else lm.window


def compute(cfg: Config | None = None, *, lm_a, lm_b, corpus: Corpus | None = None,
            cache_dir: str | Path | UserCache | None = USER_CACHE) -> Result:
    """The comparison, with the per-context records (``continuations``, saved as JSON lines); ``corpus``: the
    documents (default: ``cfg.corpus``), the LDA fitted on their train part, the contexts drawn from the rest;
    ``cache_dir``: the activation cache whose ``.lda/`` keeps the fitted LDA (default: the per-user cache; None:
    memory only)."""
    cfg = cfg or Config()
    Ta = _window(lm_a, cfg.window_a)
    Tb = cfg.window_b if cfg.window_b > 0 else Ta
    C = cfg.context_tokens if cfg.context_tokens > 0 else Ta
    N = cfg.continuation_tokens
    if N < 1:
        raise ProbeError(f"--continuation-tokens must be at least 1, got {N}")
    for lm, T, o in ((lm_a, Ta, cfg.overlap_a), (lm_b, Tb, cfg.overlap_b)):
        check_window(T, o)
        check_fits(lm, T)
    full = load_corpus(cfg.corpus) if corpus is None else corpus
    if full.name == CALLER_TEXTS:  # the caller's texts (from Python): the config's corpus did not apply
        cfg = dataclasses.replace(cfg, corpus=CALLER_TEXTS)
    train, held = corpus_split(full, "train"), corpus_split(full, "heldout")

    lda, dictionary = fit_lda(training_chunks([d.text for d in train.documents], cfg.lda_chunk_words), cfg,
                              cache_dir=cache_dir)

    doc_ids = [lm_a.encode(d.text) for d in held.documents]
    spans = sample_spans(doc_ids, C + N, cfg.n_contexts, cfg.seed)
    same_tok = lm_a.tokenizer.get_vocab() == lm_b.tokenizer.get_vocab()
    contexts = torch.tensor([doc_ids[d][s:s + C] for d, s in spans], dtype=torch.long)
    reference = [doc_ids[d][s + C:s + C + N] for d, s in spans]
    cont_a, cont_b = [], []
    for b in tqdm_class()(range(0, len(spans), cfg.batch_size), desc="continuations", unit="batch"):
        ctx = contexts[b:b + cfg.batch_size]
        cont_a += greedy_windowed(lm_a, ctx, N, Ta, cfg.overlap_a).tolist()
        if same_tok:
            cont_b += greedy_windowed(lm_b, ctx, N, Tb, cfg.overlap_b).tolist()
        else:  # another tokenizer: the same context text, re-encoded, its last C tokens
            for row in ctx.tolist():
                ids_b = lm_b.encode(lm_a.decode(row))[-C:]
                cont_b += greedy_windowed(lm_b, torch.tensor([ids_b]), N, Tb, cfg.overlap_b).tolist()
    dec = lambda lm, ids: lm.tokenizer.decode(ids, skip_special_tokens=True)
    text_ctx = [dec(lm_a, c) for c in contexts.tolist()]
    text_a = [dec(lm_a, c) for c in cont_a]
    text_b = [dec(lm_b, c) for c in cont_b]
    text_ref = [dec(lm_a, c) for c in reference]
    theta = {k: topic_distributions(lda, dictionary, v, cfg.seed)
             for k, v in (("context", text_ctx), ("a", text_a), ("b", text_b), ("reference", text_ref))}
    jsd_a = js_divergence(theta["context"], theta["a"])
    jsd_b = js_divergence(theta["context"], theta["b"])
    jsd_ref = js_divergence(theta["context"], theta["reference"])
    stats = dataclasses.replace(paired_statistics(jsd_a, jsd_b), mean_jsd_reference=float(np.mean(jsd_ref)),
                                **jsd_intervals(jsd_a, jsd_b))
    rows = [Continuation(index=i, document=held.documents[d].name, start_token=s, context=text_ctx[i],
                         continuation_a=text_a[i], continuation_b=text_b[i], continuation_reference=text_ref[i],
                         jsd_a=float(jsd_a[i]), jsd_b=float(jsd_b[i]), jsd_reference=float(jsd_ref[i]),
                         top_topics=TopTopics(**{k: [int(t) for t in np.argsort(-theta[k][i])[:3]] for k in theta}))
            for i, (d, s) in enumerate(spans)]
    corpus_block = {**full.identity(), "lda_training": train.identity(), "contexts_from": held.identity(),
                    "same_tokenizer": same_tok}
    identity = Identity(
        model_name=PairInfo(lm_a.name, lm_b.name, join=VS).name(),
        config={**settings_used(cfg, corpus=corpus_block), "model_a": lm_a.name, "model_b": lm_b.name},
        model=ModelPair.from_json({"a": {**lm_a.describe(), "window": Ta, "overlap": cfg.overlap_a},
                                   "b": {**lm_b.describe(), "window": Tb, "overlap": cfg.overlap_b}}),
        corpus=corpus_block)
    return Result(
        identity=identity,
        definitions=records.Definitions({
            "lda": f"gensim LdaModel, K={cfg.topics}, passes={cfg.lda_passes}, iterations={cfg.lda_iterations}, "
                   f"random_state={cfg.seed}, alpha=symmetric, minimum_probability=0; fitted on "
                   f"{lda.num_terms}-word dictionary (no_below={cfg.no_below}, no_above={cfg.no_above}) over "
                   f"training chunks of >= {cfg.lda_chunk_words} words",
            "preprocessing": "gensim simple_preprocess(deacc=True, min_len=3, max_len=15) (lowercase alphabetic "
                             "tokens), gensim STOPWORDS removed",
            "topic_distribution": "normalised variational gamma (get_document_topics with minimum_probability=0 "
                                  "and no 1e-8 floor); inference RNG reset to the seed per text",
            "contexts": f"{len(spans)} non-overlapping spans of {C} + {N} tokens (model A's tokenizer) from the "
                        "held-out part, seeded; the last N tokens are the reference continuation",
            "continuations": f"{N} greedy tokens; each model in windows of T tokens every T - o tokens, a token "
                             "predicted by the window that would score it in analyses.perplexity",
            "jsd": "Jensen-Shannon divergence, base 2, the divergence (not its square root), in [0, 1]",
            "share_a_less": "contexts with JSD_A < JSD_B over all contexts (ties count as not less)",
            "tests": "sign test: scipy.stats.binomtest on non-tied pairs; Wilcoxon: scipy.stats.wilcoxon "
                     "(zero differences dropped); two-sided, and one-sided for A < B (*_a_less)",
        }),
        statistics=stats,
        topics_top_words=top_words(lda),
        jsd_a=jsd_a, jsd_b=jsd_b, jsd_reference=jsd_ref,
        continuations=rows,
    )


def table_rows(result: Result) -> list[dict]:
    return [{"index": i, "jsd_a": a, "jsd_b": b, "jsd_reference": r}
            for i, (a, b, r) in enumerate(zip(result.jsd_a, result.jsd_b, result.jsd_reference))]


def summary_line(result: Result) -> str:
    """The comparison's numbers in one line (the verdict on the paper's claim is analyses.summary.claims')."""
    s = result.statistics
    ci = s.mean_difference_ci or []
    defined = len(ci) == 2 and all(x is not None and np.isfinite(x) for x in ci) and s.mean_difference is not None
    diff = f"; A - B {s.mean_difference:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}] (95%, over contexts)" if defined else ""
    reference = float("nan") if s.mean_jsd_reference is None else s.mean_jsd_reference
    return (f"{result.model_name}: mean topic JSD A {s.mean_jsd_a:.4f} vs B {s.mean_jsd_b:.4f} "
            f"(real continuation {reference:.4f}){diff}; A < B in {100 * s.share_a_less:.1f}% of "
            f"{s.n_contexts} contexts ({s.n_ties} ties); sign test p = {s.sign_test_p:.3g}, Wilcoxon "
            f"p = {s.wilcoxon_p:.3g} (two-sided)")


# ----------------------------------------------------------------------------- plots


@style.drawing
def plot(results: list[Result], fig=None):
    """Paired JSDs: A's against B's per context (below the diagonal: A stays closer to the topic);
    points in A's colour, each axis label in its model's colour. ``fig``: a Figure or SubFigure to
    draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (3.4 * len(results) + 0.4, 3.3))
    colors = style.figure_colors([m.name for r in results for m in (r.model_a, r.model_b)])
    for ax, res in zip(np.ravel(fig.subplots(1, len(results), squeeze=False)), results):
        _paired_panel(ax, res, colors)
    return fig


def _diagonal(ax, titled: bool = True) -> None:
    """The line JSD_A = JSD_B on the unit square; the panel's title where ``titled`` (the module's figures; a
    ``Result.plot`` sets none)."""
    ax.plot([0, 1], [0, 1], color="0.4", lw=0.7, ls=":", label="_nolegend_")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    if titled:
        ax.set_title("topic JSD context vs continuation")


def _paired_panel(ax, res: Result, colors: dict) -> None:
    """One comparison's paired JSDs on ``ax``, in the colours ``colors`` (model name -> colour)."""
    a, b = np.asarray(res.jsd_a), np.asarray(res.jsd_b)
    name_a, name_b = res.model_a.name, res.model_b.name
    ax.scatter(b, a, s=6, alpha=0.5, lw=0, color=colors[name_a])
    _diagonal(ax)
    s = res.statistics
    ax.text(0.03, 0.97, f"mean A {s.mean_jsd_a:.3f}\nmean B {s.mean_jsd_b:.3f}\n"
                        f"A<B {100 * s.share_a_less:.0f}%, p={s.sign_test_p:.2g}",
            transform=ax.transAxes, va="top", fontsize="small")
    ax.set_xlabel(f"JSD (bits), B = {name_b}", color=colors[name_b])
    ax.set_ylabel(f"JSD (bits), A = {name_a}", color=colors[name_a])


@style.drawing
def plot_differences(results: list[Result], fig=None):
    """Histogram of JSD_A - JSD_B (left of 0: A closer to the context's topics), in A's colour (a colour per
    comparison when two share their A).
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (4.2, 2.9))
    ax = fig.subplots()
    bins = np.linspace(-1, 1, 41)
    names = [r.model_a.name for r in results]
    if len(set(names)) < len(names):  # comparisons that share their A: a colour each
        names = [r.model_name for r in results]
    colors = style.figure_colors(names)
    for res, name in zip(results, names):
        diff = np.asarray(res.jsd_a) - np.asarray(res.jsd_b)
        ax.hist(diff, bins=bins, alpha=0.6, color=colors[name], label=res.model_name)
    ax.axvline(0, color="k", lw=0.7)
    ax.set_xlabel("JSD_A - JSD_B (bits)")
    ax.set_ylabel("contexts (count)")
    ax.legend()
    return fig


def summarise(results: list[Result]) -> str:
    """One line per comparison, printed by the command line."""
    return "".join(summary_line(r) + "\n" for r in results)


def check(cfg: Config) -> None:
    """Before any model loads: A and B are two models (a model compared with itself ties on every context)."""
    if cfg.model_a == cfg.model_b:
        raise ProbeError(f"--model-a and --model-b are both {cfg.model_a!r}: topics compares two different models")
    if isinstance(cfg.model_a, str) and isinstance(cfg.model_b, str):
        from probes.checkpoints.names import get_spec

        a, b = get_spec(cfg.model_a), get_spec(cfg.model_b)  # no weights are read
        # the same weights, config and tokenizer under two spellings (a ?sentence= suffix changes no LM output)
        if a.family == b.family and a.fingerprint() == b.fingerprint():
            raise ProbeError(f"--model-a {cfg.model_a!r} and --model-b {cfg.model_b!r} are the same model (the same "
                             "weights, config and tokenizer): topics compares two different models")


ANALYSIS = Analysis(
    name="topics",
    inputs=TopicsInputs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, summary=summarise, check=check,
    figures=(
        Figure("topics", plot, "Jensen-Shannon divergence (base 2) between the LDA topics of a context and of its "
               "greedy continuation (recurrence paper §5.3.1): lower = the continuation stays on topic."),
        Figure("topics-differences", plot_differences, "Per context, JSD(A) - JSD(B): below zero, A (recurrent) "
               "stayed closer to the topic."),
    ),
    example=("--model-a", "tiny-gpt2-recurrent", "--model-b", "tiny-gpt2", "--n-contexts", "4",
             "--continuation-tokens", "3", "--topics", "3", "--lda-passes", "1", "--lda-iterations", "5"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
