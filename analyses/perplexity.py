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

    $ python -m analyses.perplexity --model gpt2-small-base --model gpt2-small-recurrent
          [--window T] [--overlap 0 --overlap 30] [--corpus PATH] [--split heldout] [--n-documents N]
          [--out out]

Default data: the held-out part of the default corpus (the last 10% of every book, cut at a
paragraph break; :func:`probes.corpus.split_text`), never seen by ``recipes.train_lm``. Writes
out/results/perplexity/<model>.json (+ .csv, one row per (T, o)), out/results/perplexity/table.md
(Tables 1-2: models x overlaps), out/figures/perplexity.{png,pdf} (perplexity vs overlap) and
out/figures/perplexity-flops.{png,pdf} (perplexity vs FLOPs/token, the paper's Fig. 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from analyses import common
from analyses.common import (
    arg,
    atomic_write,
    check_device,
    check_writable,
    config_dict,
    parse_config,
    read_results,
    run_main,
    save_drawings,
    unique,
    write_result,
)
from analyses.style import model_color, use_theme
from probes.capture.windows import check_window, windowed_nll
from probes.checkpoints.names import get_spec
from probes.corpus import SPLITS, corpus_split, load_corpus, sample_documents
from probes.errors import ProbeError
from probes.models.lm import load_lm, need_causal


@dataclass
class Config:
    """Token- and word-level perplexity and FLOPs/token of windowed (overlapped) execution."""

    model: list[str] = arg(["gpt2-small-base", "gpt2-small-recurrent"], "causal LMs from checkpoints.yaml")
    window: int = arg(0, "window T in tokens (0: each model's own: its recurrence training window, else its "
                         "longest input)", min=0)
    overlap: list[int] = arg([0, 30], "overlap o between consecutive windows (windows start every T - o tokens)",
                             min=0)
    corpus: str = arg("default", "corpus: 'default' (embedded), a folder of .txt, a .txt or a .jsonl")
    split: str = arg("heldout", "part of every document: heldout (last 10%), train (first 90%) or all",
                     choices=SPLITS)
    n_documents: int = arg(0, "evaluate this many documents, drawn with the seed (0: all)", min=0)
    max_tokens: int = arg(0, "evaluate at most this many tokens of each document (0: all)", min=0)
    seed: int = arg(0, "seed for the document draw", min=0, max=2**32 - 1)
    batch_size: int = arg(16, "windows per forward pass (plain models)", min=1)
    device: str = arg("cpu", "torch device")
    out: str = arg("out", "output root: results/ and figures/ go below it")


@dataclass
class Result(common.Result):
    """One model's perplexities: the saved document's keys, in order (prose only in ``definitions``)."""

    model_name: str
    config: dict  # the resolved Config (without out)
    model: dict  # the LM's identity (probes.models.lm describe)
    corpus: dict  # corpus identity, split, documents evaluated
    non_embedding_parameters: int  # N of Kaplan's count
    overlap_matches_training: dict[str, bool] | None  # recurrent models: overlap (as text) -> the trained one?
    definitions: dict  # prose: what every number means (nothing reads numbers from it)
    rows: list[dict]  # per overlap: model, recurrent, window, overlap, token/word perplexity, nll_per_token,
    #                   scored_tokens, words, windows, tokens_processed, flops_per_token


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


def evaluation_documents(lm, cfg: Config) -> tuple[list[tuple[str, list[int], int]], dict]:
    """[(name, ids, n_words)] of the documents to score, and the corpus identity."""
    corpus = corpus_split(load_corpus(None if cfg.corpus == "default" else cfg.corpus), cfg.split)
    docs = list(corpus.documents) if cfg.n_documents <= 0 else sample_documents(corpus, cfg.n_documents, cfg.seed)
    out = []
    for d in docs:
        ids = lm.encode(d.text)
        if cfg.max_tokens > 0 and len(ids) > cfg.max_tokens:
            ids = ids[:cfg.max_tokens]
            n_words = len(lm.decode(ids).split())
        else:
            n_words = len(d.text.split())
        if len(ids) >= 2:
            out.append((d.name, ids, n_words))
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


def compute(lm, cfg: Config | None = None, documents=None) -> Result:
    """Perplexities and FLOPs/token of one model at every overlap of ``cfg``."""
    cfg = cfg or Config()
    T = resolve_window(lm, cfg)
    docs, corpus_id = documents if documents is not None else evaluation_documents(lm, cfg)
    rows = []
    sizes = lm.sizes()
    for o in cfg.overlap:
        nll_sum, n_tok, n_words, n_win, processed, fl = 0.0, 0, 0, 0, 0, 0.0
        for _, ids, words in tqdm(docs, desc=f"perplexity {lm.name} T={T} o={o}", unit="doc"):
            r = windowed_nll(lm, ids, T, o, cfg.batch_size)
            nll_sum += float(r["nll"].sum())
            n_tok += len(r["nll"])
            n_words += words
            n_win += r["n_windows"]
            processed += r["tokens_processed"]
            fl += flops(sizes, lm.recurrent, T, r["window_lengths"], r["pool_lengths"])
        rows.append({"model": lm.name, "recurrent": lm.recurrent, "window": T, "overlap": o,
                     "token_perplexity": math.exp(nll_sum / n_tok), "word_perplexity": math.exp(nll_sum / n_words),
                     "nll_per_token": nll_sum / n_tok, "scored_tokens": n_tok, "words": n_words,
                     "windows": n_win, "tokens_processed": processed, "flops_per_token": fl / n_tok})
    notes, matches = {}, None
    if lm.recurrent:
        trained = lm.describe()["recurrence"]["overlap"]
        notes["recurrence"] = (f"trained with overlap {trained}; h_prev pools each window's first T - o positions, "
                               "so at other overlaps it still summarises the text up to the next window's start "
                               "(the paper re-trains per overlap; its footnote 3 describes this remedy)")
        matches = {str(o): o == trained for o in cfg.overlap}
    return Result(
        model_name=lm.name,
        config=config_dict(cfg),
        model=lm.describe(),
        corpus=corpus_id,
        non_embedding_parameters=sizes["non_embedding_parameters"],
        overlap_matches_training=matches,  # recurrent models: is each overlap the one it was trained with?
        definitions={
            "windows": "windows of T tokens start every T - o tokens; a window's T inputs predict the T tokens "
                       "that follow each input; each window scores only targets no earlier window scored (the "
                       "first: all; later: the last T - o); every token but a document's first is scored once",
            "token_perplexity": "exp(total NLL / scored tokens)",
            "word_perplexity": "exp(total NLL / whitespace-separated words of the evaluated text)",
            "flops_per_token": "(2 N_nonembedding + 2 n_layer T d_model) x tokens processed / tokens scored "
                               "(Kaplan et al. 2020), + the recurrence module's FFN, pooling and extra key/value",
            **notes,
        },
        rows=rows,
    )


def table_rows(result: Result) -> list[dict]:
    return [dict(r) for r in Result.from_json(result).rows]


def markdown_table(results: list[Result]) -> str:
    """Tables 1-2: one row per (model, overlap)."""
    lines = ["| model | window T | overlap o | token ppl | word ppl | FLOPs/token | scored tokens |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for res in map(Result.from_json, results):
        for r in res.rows:
            lines.append(f"| {r['model']} | {r['window']} | {r['overlap']} | {r['token_perplexity']:.2f} | "
                         f"{r['word_perplexity']:.2f} | {r['flops_per_token']:.3g} | {r['scored_tokens']} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- plots


def plot(results: list[Result], ax=None):
    """Token- and word-level perplexity against overlap, one line per model in its colour (dashed:
    a recurrent model)."""
    axes = ax  # None, one Axes, or an array of Axes (one per panel)
    import matplotlib.pyplot as plt

    use_theme()
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(7.4, 2.9), constrained_layout=True)
    axes = np.ravel(axes)
    fig = axes[0].figure
    for res in map(Result.from_json, results):
        rows = sorted(res.rows, key=lambda r: r["overlap"])
        x = [r["overlap"] for r in rows]
        for ax, key in zip(axes, ("token_perplexity", "word_perplexity")):
            ax.plot(x, [r[key] for r in rows], marker="o", ms=4, color=model_color(res.model_name),
                    ls="--" if rows[0]["recurrent"] else "-", label=f"{res.model_name} (T={rows[0]['window']})")
    for ax, title, ylabel in zip(axes, ("token-level perplexity", "word-level perplexity"),
                                 ("token perplexity (per scored token)", "word perplexity (per word)")):
        ax.set_xlabel("overlap o (tokens)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    return fig


def plot_flops(results: list[Result], ax=None):
    """Word-level perplexity against FLOPs/token (the paper's Fig. 5), points labelled by overlap."""
    import matplotlib.pyplot as plt

    use_theme()
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.2, 3.0), constrained_layout=True)
    fig = ax.figure
    for res in map(Result.from_json, results):
        rows = sorted(res.rows, key=lambda r: r["overlap"])
        xs, ys = [r["flops_per_token"] for r in rows], [r["word_perplexity"] for r in rows]
        ax.plot(xs, ys, marker="o", ms=4, color=model_color(res.model_name), ls="--" if rows[0]["recurrent"] else "-",
                label=res.model_name)
        for r, x, y in zip(rows, xs, ys):
            ax.annotate(f"o={r['overlap']}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("FLOPs per scored token (forward)", fontsize=8)
    ax.set_ylabel("word perplexity (per word)", fontsize=8)
    ax.legend(fontsize=7)
    return fig


def figures(results: list[Result], out: str) -> list:
    """Both perplexity figures and the Markdown table (dicts are read with Result.from_json)."""
    results = [Result.from_json(r) for r in results]
    paths = save_drawings(results, out, (("perplexity", plot), ("perplexity-flops", plot_flops)))
    table = Path(out) / "results" / "perplexity" / "table.md"
    atomic_write(table, markdown_table(results).encode("utf-8"))
    return paths + [table]


# ----------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    models = unique(cfg.model)
    if not cfg.overlap:
        raise ProbeError("give at least one --overlap")
    for name in models:  # every name is checked before any work
        need_causal(get_spec(name))
    check_device(cfg.device)
    check_writable(cfg.out)
    for name in models:
        lm = load_lm(name, cfg.device)
        result = compute(lm, cfg)
        json_path, _ = write_result(cfg.out, "perplexity", name, result, table_rows(result))
        print(f"{name}: wrote {json_path}")
    results = [Result.from_json(d) for d in read_results(cfg.out, "perplexity", models)]
    print(markdown_table(results), end="")
    paths = figures(results, cfg.out)
    print("figures: " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    run_main(main)
