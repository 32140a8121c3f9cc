"""Windowed perplexity: what a causal LM scores when run on windows, as in practice (recurrence paper §4.2, Tables 1-2).

A document of n tokens t_0..t_{n-1} is run in windows of T tokens that start every T - o tokens
(overlap o; o = 0 is disjoint execution). As in the paper's §4.2 example (T = 10, o = 3: inputs
t_{1:10}, t_{8:17}, t_{15:24}, ... predict t_{2:11}, t_{12:18}, t_{19:25}, ...), a window's T
inputs make T next-token predictions, including the token just after its last input, and each
window scores only the targets that no earlier window scored: the first window scores all its
predictions (every input token but the first is also a target), every later one its last T - o.
So every token except the document's first is scored exactly once, and at o = 0 the first token
of a window is predicted by the previous window's last position (with a full window of context).
Equivalently, target t_p (p >= 1) is scored with the context t_s..t_{p-1}, s = k (T - o),
k = 0 if p <= T else ceil((p - T) / (T - o)) (the tests check this brute force).

A recurrent model (family ``recurrent``, :mod:`probes.models.recurrent`) runs the same windows in order;
window k gets h_prev from window k-1, pooled over window k-1's first T - o positions (those the next
window does not repeat). A plain model runs them independently (batched).

* token-level perplexity: exp(total NLL / number of scored tokens);
* word-level perplexity: exp(total NLL / number of words), words = whitespace-separated words of
  the evaluated text (``str.split``), as the paper does "for clarity": it does not depend on the
  tokenizer, so models with different tokenizers compare;
* FLOPs/token: Kaplan et al. (2020)'s forward count per processed token, 2 N + 2 n_layer n_ctx
  d_model, with N the non-embedding parameters (token/position embeddings and the tied output
  matrix excluded) and n_ctx = T, times tokens processed / tokens scored (T / (T - o) for long
  documents); recurrent models add, per window, 2 x (FFN parameters) + 2 L (T - o) d for the
  pooling and, at layer l_ins, 6 d^2 for the slot's projections + 4 d per window token for
  attending to it. For GPT-2 small at T = 300 (N = 85,056,000: every non-embedding weight, biases
  and LayerNorms included) this is 1.756e8 per processed token; in the long-document limit
  T / (T - o) that gives 1.756e8 (o = 0) and 1.952e8 (o = 30), 0.4% and 0.6% above the paper's
  1.75e8 and 1.94e8 (its column is consistent with its rounded 1.75e8 times T / (T - o); Kaplan's
  approximation N = 12 n_layer d_model^2 = 84,934,656 would give 1.754e8). The results report the
  ratio of the documents actually evaluated (a 20-window document at o = 30: 6000 / 5429 processed
  per scored token, 1.941e8); the recurrence adds ~3.4e4 per token (0.02%). Its terms count what
  runs: 6 d^2 includes the slot's query, computed by GPT-2's fused qkv projection and dropped (the
  paper's key/value-only slot needs 4 d^2), and 4 d counts q.k and the value sum, where Kaplan's
  2 n_layer n_ctx d counts q.k only; by the paper's slot and Kaplan's convention the overhead would
  be ~2.9e4 instead of ~3.4e4 per token (at o = 0), a 3e-5 relative difference.

Intervals: a block bootstrap over runs of scored tokens (ratio bootstrap: resampled NLL sums over resampled
token or word counts; :mod:`analyses.blocks`). A block is a run of consecutive targets of one document,
starting at its first target (a document's remainder joins its last block; a shorter document is one block),
as long as the text allows while leaving at least 20 blocks (``--block-tokens`` fixes the length instead); the
interval is the percentile interval read at the expanded level. Why long blocks, and not tokens, short blocks
or documents: the NLLs of tokens are dependent far apart (they share context and topic; a recurrent model's
h_prev also carries each window into the next): gpt2-small-base's per-token losses on held-out text are still
correlated a thousand tokens apart, so a token bootstrap, or one over blocks of a few hundred tokens, treats
dependent pieces as independent and its interval is too narrow (256-token blocks covered 83-84% in simulation);
documents as units would be independent, but the default corpus has 7, too few for an interval
(:data:`analyses.stats.MIN_UNITS`). The blocks are cut at fixed target positions, not at window boundaries, so
they are the same at every overlap and for every model with the same tokenizer: two models, or one model at two
overlaps (the recurrence paper's claim 2), are compared paired, block by block (the blocks' ``units_id`` says
so). The bootstrap block records the length used (``block_length``, in tokens) and the rule.

    $ python -m analyses.perplexity --model gpt2-small-base --model gpt2-small-recurrent
          [--window T] [--overlap 0 --overlap 30] [--corpus PATH] [--split heldout] [--n-documents N]
          [--block-tokens 0] [--out out]

Default data: the held-out part of the default corpus (the last 10% of every book, cut at a
paragraph break; :func:`probes.corpus.split_text`), never seen by ``recipes.train_lm``. Writes
out/results/perplexity/<model>.json (+ .csv, one row per (T, o)), out/results/perplexity/table.md
(Tables 1-2: models x overlaps) and, for the recurrence paper's comparison (a recurrent model among the models),
out/figures/perplexity.{png,pdf} (perplexity vs overlap) and out/figures/perplexity-flops.{png,pdf} (perplexity
vs FLOPs/token, the paper's Fig. 5); for any other models out/figures/perplexity-models.{png,pdf} (each model's
token perplexity with its interval).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from analyses import blocks as blocks_mod
from analyses import common, records, stats, style
from analyses.absent import Absent
from analyses.analysis import Analysis, Figure
from analyses.common import CALLER_TEXTS, Identity, settings_used
from analyses.inputs import LM, LMConfig
from analyses.perplexity_rows import BlockSums, Row, TrainedOverlaps
from analyses.records import Definitions
from probes.capture.windows import check_window, windowed_nll
from probes.config import arg, tqdm_class
from probes.corpus import SPLITS, corpus_split, load_corpus, sample_documents
from probes.errors import ProbeError


@dataclass
class Config(LMConfig):
    """Token- and word-level perplexity and FLOPs/token of windowed (overlapped) execution."""

    model: list[str] = arg(["gpt2-small-base", "gpt2-small-recurrent"], "causal LMs from checkpoints.yaml")
    window: int = arg(0, "window T in tokens (0: each model's own: its recurrence training window, else its "
                         "longest input)", min=0)
    overlap: list[int] = arg([0, 30], "overlap o between consecutive windows (windows start every T - o tokens)",
                             min=0)
    split: str = arg("heldout", "part of every document: heldout (last 10%), train (first 90%) or all",
                     choices=SPLITS)
    n_documents: int = arg(0, "evaluate this many documents, drawn with the seed (0: all)", min=0)
    max_tokens: int = arg(0, "evaluate at most this many tokens of each document (0: all)", min=0)
    block_tokens: int = arg(0, "scored tokens per bootstrap block (consecutive targets of one document; 0: the "
                               "longest blocks that leave at least 20, the rule of analyses.blocks)", min=0)
    batch_size: int = arg(16, "windows per forward pass (plain models)", min=1)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's perplexities: the saved document's keys, in order (prose only in ``definitions``). The
    identity's model is the LM's (probes.models.lm describe); its corpus the split and documents evaluated."""

    non_embedding_parameters: int  # N of Kaplan's count
    overlap_matches_training: TrainedOverlaps | None  # recurrent models: is each overlap the trained one?
    definitions: Definitions  # prose: what every number means (nothing reads numbers from it)
    rows: list[Row]  # per overlap (analyses.perplexity_rows), with the intervals over blocks
    bootstrap: BlockSums | None = None  # analyses.blocks.bootstrap (unit "block") + blocks: per block its document,
    #                                first_target, tokens and words; "nll": overlap (as text) -> per-block NLL sums

    @style.drawing
    def plot(self, ax=None, key: str = "token_perplexity", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: ``key``
        ("token_perplexity" or "word_perplexity") against the overlap, each point with its 95% bootstrap interval
        over blocks (dashed: a recurrent model).
        ``kwargs`` (``color=``, ``label=``, ``linestyle=``, ``marker=`` ...) go to the line; without
        ``color=`` the next colour of the Axes' cycle; the label (default: the model and its window) enters
        the legend, so results drawn on one Axes overlay. Fonts and colours follow the caller's rcParams.
        Returns the Axes."""
        if key not in PANELS:
            raise ProbeError(f"key must be one of {', '.join(PANELS)}, got {key!r}")
        ax = style.one_axes(ax, (3.6, 2.9))
        label = f"{style.display_name(self.model_name)} (T={self.rows[0].window})" if self.rows else None
        _perplexity_panel(ax, [style.on_axes(ax, self, kwargs, label)], key, titled=False)
        return style.finish(ax)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"token perplexity, T={t}, o={o}": self.token_perplexity(t, o) for t, o in self.measured()}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the token perplexity at each overlap, in the order of the overlaps."""
        return common.as_floats(row.token_perplexity for row in sorted(self.rows, key=lambda row: row.overlap))

    def headline(self) -> dict[str, str]:
        return {f"T={r.window}, o={r.overlap}": f"token perplexity {r.token_perplexity:.2f}, word "
                                                f"perplexity {r.word_perplexity:.2f}" for r in self.rows}

    def measured(self) -> list[tuple[int, int]]:
        """The (window T, overlap o) of every row."""
        return [row.setting for row in self.rows]

    def block_sums(self, overlap: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Per bootstrap block, its NLL sum at overlap o and its scored tokens, (n_blocks,) each; None for a result
        written before blocks existed."""
        boot = self.bootstrap
        nll = None if boot is None or boot.nll is None or boot.blocks is None else boot.nll.get(str(overlap))
        if boot is None or boot.blocks is None or nll is None:
            return None
        return np.asarray(nll, dtype=np.float64), np.asarray(boot.blocks["tokens"], dtype=np.float64)

    def token_perplexity(self, window: int, overlap: int) -> stats.Sample:
        """The token perplexity at window T and overlap o with its bootstrap replicates over blocks (ratio
        bootstrap of the blocks' NLL sums and token counts; a result written before blocks existed resamples
        its documents; the point value alone when the result saved neither)."""
        row = next((r for r in self.rows if r.setting == (window, overlap)), None)
        if row is None:
            raise Absent(f"token perplexity at T={window}, o={overlap}")
        point, boot = row.token_perplexity, self.bootstrap
        sums = self.block_sums(overlap)
        if boot is not None and sums is not None:
            return stats.Sample.of_ratio(point, *sums, boot, np.exp)
        per_doc = None if boot is None else (boot.documents or {}).get(str(overlap))
        if boot is None or per_doc is None:
            return stats.Sample(point)
        return stats.Sample.of_ratio(point, per_doc["nll"], per_doc["tokens"], boot, np.exp)


# ----------------------------------------------------------------------------- FLOPs


def kaplan_flops(n_nonembedding: int, n_layer: int, d_model: int, n_ctx: int) -> float:
    """Forward FLOPs per processed token (Kaplan et al. 2020): 2 N + 2 n_layer n_ctx d_model."""
    return 2.0 * n_nonembedding + 2.0 * n_layer * n_ctx * d_model


def flops(sizes: dict, recurrent: bool, T: int, window_lengths: list[int], pool_lengths: list[int]) -> float:
    """Total forward FLOPs of a windowed pass (see the module docstring); ``sizes``: ``LM.sizes()``."""
    d, L = sizes["d_model"], sizes["n_layer"]
    total = kaplan_flops(sizes["non_embedding_parameters"], L, d, T) * sum(window_lengths)
    if recurrent:
        ffn = sizes["recurrence_ffn_parameters"]
        total += sum(2.0 * ffn + 2.0 * L * n * d for n in pool_lengths)  # h_next of every window but the last
        total += sum(6.0 * d * d + 4.0 * d * n for n in window_lengths[1:])  # the slot in windows 2..
    return total


# ----------------------------------------------------------------------------- compute


def truncated(lm, name: str, ids: list[int], n_words: int, max_tokens: int) -> tuple[str, list[int], int]:
    """A document cut to its first ``max_tokens`` tokens (0: whole), its words counted in the decoded cut."""
    if max_tokens > 0 and len(ids) > max_tokens:
        ids = ids[:max_tokens]
        n_words = len(lm.decode(ids).split())
    return name, ids, n_words


def evaluation_documents(lm, cfg: Config) -> tuple[list[tuple[str, list[int], int]], dict]:
    """[(name, ids, n_words)] of the documents to score, and the corpus identity."""
    corpus = corpus_split(load_corpus(cfg.corpus), cfg.split)
    docs = list(corpus.documents) if cfg.n_documents <= 0 else sample_documents(corpus, cfg.n_documents, cfg.seed)
    out = [truncated(lm, d.name, lm.encode(d.text), len(d.text.split()), cfg.max_tokens) for d in docs]
    out = [d for d in out if len(d[1]) >= 2]
    if not out:
        raise ProbeError(f"corpus {corpus.name} has no document of at least 2 tokens")
    ident = {**corpus.identity(), "split": cfg.split, "documents": [n for n, _, _ in out],
             "n_documents_drawn": cfg.n_documents, "seed": cfg.seed, "max_tokens": cfg.max_tokens}
    return out, ident


def resolve_window(lm, cfg: Config) -> int:
    T = cfg.window if cfg.window > 0 else lm.window
    if T > lm.max_positions:
        raise ProbeError(f"--window {T} is longer than model '{lm.name}' allows ({lm.max_positions} positions)")
    for o in cfg.overlap:
        check_window(T, o)
    return T


def block_cuts(n_targets: int, block_tokens: int) -> list[int]:
    """Where a document's blocks start and end, as indices into its targets t_1..t_{n-1} (0-based, so index
    i is target t_{i+1}): runs of ``block_tokens`` consecutive targets, the remainder joined to the last
    run; a document of fewer targets is one block. [0, ..., n_targets] (:func:`analyses.blocks.block_cuts`)."""
    return blocks_mod.block_cuts(n_targets, block_tokens)


def block_tokens(docs: list[tuple[str, list[int], int]], cfg: Config) -> int:
    """The block length in scored tokens: ``--block-tokens`` when given, else the rule of :mod:`analyses.blocks`
    on the documents' target counts (the same for every model with the same tokenizer and texts)."""
    return cfg.block_tokens or blocks_mod.block_length([len(ids) - 1 for _, ids, _ in docs])


def document_blocks(lm, docs: list[tuple[str, list[int], int]], block_tokens: int) -> tuple[dict, list]:
    """The bootstrap blocks of ``docs`` (the same for every overlap): per block its document, first target
    (index of t_p, p >= 1), scored tokens and words; and the units that identify them (document, a digest of
    its token ids, first and last target), so two results pair only on the same tokens. A block's words are
    those that start in its text (the first block also holds t_0): the words of the decoded prefix up to its
    end minus those up to its start, the last block ending at the document's word count, so the blocks'
    words sum to it."""
    blocks: dict[str, list] = {"document": [], "first_target": [], "tokens": [], "words": []}
    units = []
    for name, ids, n_words in docs:
        cuts = block_cuts(len(ids) - 1, block_tokens)
        digest = hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest()[:16]
        # words of the text up to (and including) target index c, i.e. tokens t_0..t_c
        upto = [0] + [len(lm.decode(ids[:c + 1]).split()) for c in cuts[1:-1]] + [n_words]
        for a, b, wa, wb in zip(cuts, cuts[1:], upto, upto[1:]):
            blocks["document"].append(name)
            blocks["first_target"].append(a + 1)
            blocks["tokens"].append(b - a)
            blocks["words"].append(wb - wa)
            units.append((name, digest, a + 1, b))
    return blocks, units


def block_intervals(nll: np.ndarray, blocks: dict, boot: stats.Bootstrap) -> dict[str, list[float]]:
    """Percentile intervals of a row's perplexities, resampling blocks (ratio bootstrap: resampled NLL
    sums over resampled token or word counts): the row's token_perplexity_ci, word_perplexity_ci and
    nll_per_token_ci."""
    tok, words = (np.asarray(blocks[k], dtype=np.float64) for k in ("tokens", "words"))
    W = stats.resample_weights(len(nll), boot.resamples, boot.seed)
    per_token = stats.ratio_replicates(nll, tok, W)
    lvl = stats.interval_level(boot)  # the expanded level of a block bootstrap
    return dict(token_perplexity_ci=np.exp(stats.interval(per_token, lvl)).tolist(),
                word_perplexity_ci=np.exp(stats.interval(stats.ratio_replicates(nll, words, W), lvl)).tolist(),
                nll_per_token_ci=stats.interval(per_token, lvl).tolist())


def compute(cfg: Config | None = None, *, lm, documents=None) -> Result:
    """Perplexities and FLOPs/token of one model at every overlap of ``cfg``; ``documents``: ([(name, ids,
    n_words)], corpus identity) to score instead of the config's corpus split (the caller's texts: each cut
    to ``max_tokens`` as the corpus's documents are)."""
    cfg = cfg or Config()
    T = resolve_window(lm, cfg)
    if documents is None:
        docs, corpus_id = evaluation_documents(lm, cfg)
    else:
        docs = [d for d in (truncated(lm, name, ids, words, cfg.max_tokens) for name, ids, words in documents[0])
                if len(d[1]) >= 2]
        corpus_id = documents[1]
    b_tokens = block_tokens(docs, cfg)
    blocks, units = document_blocks(lm, docs, b_tokens)
    boot = blocks_mod.bootstrap("block", len(units), b_tokens, "tokens", seed=cfg.seed, units_id=stats.units_id(units))
    rows, nll_by_overlap = [], {}
    sizes = lm.sizes()
    for o in cfg.overlap:
        n_win, processed, fl = 0, 0, 0.0
        per_target = []  # (n - 1,) NLL of each document's targets
        for _, ids, _ in tqdm_class()(docs, desc=f"perplexity {lm.name} T={T} o={o}", unit="doc"):
            r = windowed_nll(lm, ids, T, o, cfg.batch_size)
            per_target.append(r["nll"])
            n_win += r["n_windows"]
            processed += r["tokens_processed"]
            fl += flops(sizes, lm.recurrent, T, r["window_lengths"], r["pool_lengths"])
        nll = np.concatenate([np.add.reduceat(x, block_cuts(len(x), b_tokens)[:-1]) for x in per_target])
        nll_sum = sum(float(x.sum()) for x in per_target)  # summed per document, as before blocks existed
        n_tok, n_words = sum(blocks["tokens"]), sum(d[2] for d in docs)
        rows.append(Row(model=lm.name, recurrent=lm.recurrent, window=T, overlap=o,
                        token_perplexity=math.exp(nll_sum / n_tok), word_perplexity=math.exp(nll_sum / n_words),
                        nll_per_token=nll_sum / n_tok, scored_tokens=n_tok, words=n_words, windows=n_win,
                        tokens_processed=processed, flops_per_token=fl / n_tok, **block_intervals(nll, blocks, boot)))
        nll_by_overlap[str(o)] = nll.tolist()
    notes, matches = {}, None
    if lm.recurrent:
        trained = lm.describe()["recurrence"]["overlap"]
        notes["recurrence"] = (f"trained with overlap {trained}; h_prev pools each window's first T - o positions, "
                               "so at other overlaps it still summarises the text up to the next window's start "
                               "(the paper re-trains per overlap; its footnote 3 describes this remedy)")
        matches = TrainedOverlaps({o: o == trained for o in cfg.overlap})
    chosen = "--block-tokens" if cfg.block_tokens else "the longest blocks that leave at least 20"
    config = settings_used(cfg, corpus=corpus_id, requested=lm.name)
    if corpus_id.get("source") == CALLER_TEXTS:  # the caller's texts: no corpus split or document draw applied
        for key in ("split", "n_documents"):
            config.pop(key, None)
    return Result(
        identity=Identity(model_name=lm.name, config=config, model=lm.describe(), corpus=corpus_id),
        non_embedding_parameters=sizes["non_embedding_parameters"],
        overlap_matches_training=matches,  # recurrent models: is each overlap the one it was trained with?
        definitions=Definitions({
            "windows": "windows of T tokens start every T - o tokens; a window's T inputs predict the T tokens "
                       "that follow each input; each window scores only targets no earlier window scored (the "
                       "first: all; later: the last T - o); every token but a document's first is scored once",
            "token_perplexity": "exp(total NLL / scored tokens)",
            "word_perplexity": "exp(total NLL / whitespace-separated words of the evaluated text)",
            "flops_per_token": "(2 N_nonembedding + 2 n_layer T d_model) x tokens processed / tokens scored "
                               "(Kaplan et al. 2020), + the recurrence module's FFN, pooling and extra key/value",
            "intervals": f"block bootstrap over blocks of {b_tokens} consecutive scored tokens of one document "
                         f"(a document's remainder joins its last block; {chosen}), the same blocks at every overlap; "
                         "ratio of the resampled NLL sums to the resampled token or word counts; percentile interval "
                         "at the expanded level (analyses.blocks)",
            **notes,
        }),
        rows=rows,
        bootstrap=BlockSums(**vars(boot), blocks=blocks, nll=nll_by_overlap),
    )


def table_rows(result: Result) -> list[dict]:
    return [records.to_json(r) for r in result.rows]


def markdown_table(results: list[Result]) -> str:
    """Tables 1-2: one row per (model, overlap)."""
    lines = ["| model | window T | overlap o | token ppl | word ppl | FLOPs/token | scored tokens |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        for r in res.rows:
            lines.append(f"| {r.model} | {r.window} | {r.overlap} | {r.token_perplexity:.2f} | "
                         f"{r.word_perplexity:.2f} | {r.flops_per_token:.3g} | {r.scored_tokens} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- plots


PANELS = {"token_perplexity": ("token-level perplexity", "token perplexity (per scored token)"),
          "word_perplexity": ("word-level perplexity", "word perplexity (per word)")}


def _perplexity_panel(ax, drawn: list[style.Drawn], key: str, titled: bool = True) -> None:
    """``key`` against overlap on ``ax``, one line per result in its colour (dashed: recurrent, unless the
    result's keywords set a line style), each point with its bootstrap interval over blocks as a vertical bar in
    the line's colour (a file without intervals: the points alone); the panel's title where ``titled`` (a
    ``Result.plot`` sets none)."""
    for d in drawn:
        rows = sorted(d.result.rows, key=lambda r: r.overlap)
        line, = ax.plot([r.overlap for r in rows], [r.perplexity(key) for r in rows],
                        **d.line(marker="o", ms=4, ls="--" if rows[0].recurrent else "-"))
        bars = [(r.overlap, *ci) for r in rows if (ci := r.interval(key)) is not None]
        if bars:
            x, lo, hi = zip(*bars)
            ax.vlines(x, lo, hi, color=line.get_color(), lw=max(1.0, line.get_linewidth() * 0.8))
    title, ylabel = PANELS[key]
    ax.set_xlabel("overlap o (tokens)")
    ax.set_ylabel(ylabel)
    if titled:
        ax.set_title(title)


def _in_figure(results: list[Result]) -> list[style.Drawn]:
    """The figure's results in their models' colours, labelled with the model and its window."""
    return [d._replace(kw={"color": d.color, "label": f"{d.result.model_name} (T={d.result.rows[0].window})"})
            for d in style.in_figure(results)]


@style.drawing
def plot(results: list[Result], fig=None):
    """Token- and word-level perplexity against overlap, one line per model in its colour (dashed:
    a recurrent model), each point with its bootstrap interval over blocks. ``fig``: a Figure or SubFigure to
    draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (7.4, 2.9))
    axes = fig.subplots(1, 2)
    for ax, key in zip(axes, PANELS):
        _perplexity_panel(ax, _in_figure(results), key)
    axes[0].legend()
    return fig


@style.drawing
def plot_flops(results: list[Result], fig=None):
    """Word-level perplexity against FLOPs/token (the paper's Fig. 5), points labelled by overlap.
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (4.2, 3.0))
    ax = fig.subplots()
    colors = style.figure_colors([r.model_name for r in results])
    for res in results:
        rows = sorted(res.rows, key=lambda r: r.overlap)
        xs, ys = [r.flops_per_token for r in rows], [r.word_perplexity for r in rows]
        ax.plot(xs, ys, marker="o", ms=4, color=colors[res.model_name], ls="--" if rows[0].recurrent else "-",
                label=res.model_name)
        for r, x, y in zip(rows, xs, ys):
            ax.annotate(f"o={r.overlap}", (x, y), fontsize="x-small", xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("FLOPs per scored token (forward)")
    ax.set_ylabel("word perplexity (per word)")
    ax.legend()
    return fig


def recurrence_pair(results: list[Result]) -> bool:
    """Whether ``results`` are the recurrence paper's comparison (a recurrent model among them): drawn against
    overlap and FLOPs; any other set model by model with its intervals (:func:`plot_models`)."""
    return any(r.overlap_matches_training is not None for r in results)


def model_points(results: list[Result]) -> dict[tuple[int, int], list[tuple[int, float, list[float] | None]]]:
    """What :func:`plot_models` draws: per (window T, overlap o), [(the model's position, its token perplexity,
    its interval [lo, hi] or None)] for the models measured there."""
    out: dict[tuple[int, int], list[tuple[int, float, list[float] | None]]] = {}
    for i, res in enumerate(results):
        for t, o in sorted(res.measured()):
            ppl = res.token_perplexity(t, o)
            out.setdefault((t, o), []).append((i, float(ppl.point or np.nan), ppl.interval()))
    return dict(sorted(out.items()))


@style.drawing
def plot_models(results: list[Result], fig=None):
    """Each model's token perplexity with its bootstrap interval (error bars over blocks), the models side by
    side, one marker per (window T, overlap o) measured, in the order of the results. ``fig``: a Figure or
    SubFigure to draw into (default: a new figure). Returns the figure."""
    points = model_points(results)
    fig = style.new_figure(fig, (max(3.6, 1.0 + 0.9 * len(results)), 3.0))
    ax, shift = fig.subplots(), 0.12
    ax.set_xlim(-0.6, len(results) - 0.4)
    for k, ((t, o), pts) in enumerate(points.items()):
        x = np.array([i for i, _, _ in pts], float) + shift * (k - (len(points) - 1) / 2)
        y = np.array([v for _, v, _ in pts])
        err = np.array([[v - ci[0], ci[1] - v] if ci is not None else [np.nan, np.nan] for _, v, ci in pts]).T
        ax.errorbar(x, y, yerr=err, fmt="os^Dv"[k % 5], ms=4, capsize=3, ls="none", label=f"T={t}, o={o}")
    many = len(results) > 3
    ax.set_xticks(range(len(results)), [style.display_name(r.model_name) for r in results],
                  rotation=20 if many else 0, ha="right" if many else "center")
    ax.set(ylabel="token perplexity (per scored token)", title="token perplexity, bootstrap interval over blocks")
    if len(points) > 1:
        ax.legend(fontsize="small")
    return fig


def check_config(cfg: Config) -> None:
    if not cfg.overlap:
        raise ProbeError("give at least one --overlap")


ANALYSIS = Analysis(
    name="perplexity",
    inputs=LM(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config,
    figures=(
        Figure("perplexity", plot, "Token perplexity per window T and overlap o (recurrence paper Tables 1-2): lower "
               "is better; compare recurrent and base at equal (T, o).",
               select=lambda rs: rs if recurrence_pair(rs) else []),
        Figure("perplexity-flops", plot_flops, "Perplexity against FLOPs per token: overlap buys context with "
               "compute; recurrence buys it with a small module.", select=lambda rs: rs if recurrence_pair(rs) else []),
        Figure("perplexity-models", plot_models, "Each model's token perplexity with its bootstrap interval over "
               "blocks: lower is better; models whose intervals overlap are not told apart here (a paired "
               "difference is analyses.effect's).", select=lambda rs: [] if recurrence_pair(rs) else rs),
    ),
    tables={"table.md": markdown_table},
    summary=markdown_table,  # Tables 1-2, printed after a run
    example=("--model", "tiny-gpt2", "--n-documents", "2", "--max-tokens", "80", "--overlap", "0"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
