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

A recurrent model (family ``recurrent``, :mod:`probes.recurrent`) runs the same windows in order;
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
paragraph break; :func:`probes.lm.split_text`), never seen by ``probes.train_lm``. Writes
out/results/perplexity/<model>.json (+ .csv, one row per (T, o)), out/results/perplexity/table.md
(Tables 1-2: models x overlaps), out/figures/perplexity.{png,pdf} (perplexity vs overlap) and
out/figures/perplexity-flops.{png,pdf} (perplexity vs FLOPs/token, the paper's Fig. 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from analyses.common import (
    arg,
    atomic_write,
    config_dict,
    parse_config,
    read_results,
    run_main,
    save_drawings,
    write_result,
)
from probes.errors import ProbeError


@dataclass
class Config:
    """Token- and word-level perplexity and FLOPs/token of windowed (overlapped) execution."""

    model: list[str] = arg(["gpt2-small-base", "gpt2-small-recurrent"], "causal LMs from checkpoints.yaml")
    window: int = arg(0, "window T in tokens (0: each model's own: its recurrence training window, else its "
                         "longest input)")
    overlap: list[int] = arg([0, 30], "overlap o between consecutive windows (windows start every T - o tokens)")
    corpus: str = arg("default", "corpus: 'default' (embedded), a folder of .txt, a .txt or a .jsonl")
    split: str = arg("heldout", "part of every document: heldout (last 10%), train (first 90%) or all")
    n_documents: int = arg(0, "evaluate this many documents, drawn with the seed (0: all)")
    max_tokens: int = arg(0, "evaluate at most this many tokens of each document (0: all)")
    seed: int = arg(0, "seed for the document draw")
    batch_size: int = arg(16, "windows per forward pass (plain models)")
    device: str = arg("cpu", "torch device")
    out: str = arg("out", "output root: results/ and figures/ go below it")


# ----------------------------------------------------------------------------- windows


def window_starts(n: int, T: int, o: int) -> list[int]:
    """Start of every window over a document of n tokens: 0, T-o, 2(T-o), ... until the window
    that predicts the last token (t_{n-1}) is included."""
    check_window(T, o)
    if n < 2:
        return []
    stride = T - o
    k_last = 0 if n - 1 <= T else math.ceil((n - 1 - T) / stride)
    return [k * stride for k in range(k_last + 1)]


def check_window(T: int, o: int) -> None:
    if T < 1:
        raise ProbeError(f"window must be a positive number of tokens, got {T}")
    if not 0 <= o < T:
        raise ProbeError(f"overlap {o} must be in [0, window) = [0, {T})")


def scoring_context_start(p: int, T: int, o: int) -> int:
    """Where the context of target t_p starts (the window that scores it): k (T - o) with
    k = 0 if p <= T else ceil((p - T) / (T - o))."""
    return 0 if p <= T else math.ceil((p - T) / (T - o)) * (T - o)


def _plan(n: int, T: int, o: int) -> list[tuple[int, int, int]]:
    """(start, n_inputs, first scored position) of every window; position j predicts t_{start+j+1}."""
    plan = []
    for k, s in enumerate(window_starts(n, T, o)):
        n_in = min(T, n - 1 - s)  # inputs whose target exists
        plan.append((s, n_in, 0 if k == 0 else o))
    return plan


def _target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.inference_mode()
def windowed_nll(lm, ids: list[int], T: int, o: int, batch_size: int = 16) -> dict:
    """Per-target negative log-likelihoods (n - 1,) of one document under windowed execution.

    Returns {"nll": float64 array for targets t_1..t_{n-1}, "n_windows", "tokens_processed",
    "window_lengths"}."""
    device = lm.device
    x = torch.tensor(ids, dtype=torch.long, device=device)
    plan = _plan(len(ids), T, o)
    nll = np.full(max(len(ids) - 1, 0), np.nan)

    def put(s, first, n_in, logp):
        nll[s + first:s + n_in] = -logp[first:n_in].double().cpu().numpy()

    if lm.recurrent:
        h_prev = None
        for k, (s, n_in, first) in enumerate(plan):
            out = lm.model(x[s:s + n_in].unsqueeze(0), h_prev=h_prev, pool_len=T - o,
                           need_state=k + 1 < len(plan))
            put(s, first, n_in, _target_logprobs(out.logits[0], x[s + 1:s + n_in + 1]))
            h_prev = out.h_next
    else:
        full = [w for w in plan if w[1] == T]
        rest = [w for w in plan if w[1] != T]
        for b in range(0, len(full), batch_size):
            chunk = full[b:b + batch_size]
            inp = torch.stack([x[s:s + T] for s, _, _ in chunk])
            tgt = torch.stack([x[s + 1:s + T + 1] for s, _, _ in chunk])
            logp = _target_logprobs(lm.model(input_ids=inp).logits, tgt)
            for (s, n_in, first), lp in zip(chunk, logp):
                put(s, first, n_in, lp)
        for s, n_in, first in rest:
            logits = lm.model(input_ids=x[s:s + n_in].unsqueeze(0)).logits[0]
            put(s, first, n_in, _target_logprobs(logits, x[s + 1:s + n_in + 1]))
    if np.isnan(nll).any():
        raise AssertionError("windowed_nll left a target unscored")  # a bug, not a user error
    return {"nll": nll, "n_windows": len(plan), "tokens_processed": int(sum(w[1] for w in plan)),
            "window_lengths": [w[1] for w in plan], "pool_lengths": [min(T - o, w[1]) for w in plan[:-1]]}


# ----------------------------------------------------------------------------- FLOPs


def non_embedding_parameters(model) -> int:
    """Parameters of a causal LM minus its input/position embeddings and an untied output matrix."""
    skip = set()
    emb = model.get_input_embeddings()
    skip.update(id(p) for p in emb.parameters())
    out = model.get_output_embeddings()
    if out is not None:
        skip.update(id(p) for p in out.parameters())
    for name, mod in model.named_modules():
        if name.endswith(("wpe", "position_embeddings", "embed_positions")):
            skip.update(id(p) for p in mod.parameters())
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in skip and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def kaplan_flops(n_nonembedding: int, n_layer: int, d_model: int, n_ctx: int) -> float:
    """Forward FLOPs per processed token (Kaplan et al. 2020): 2 N + 2 n_layer n_ctx d_model."""
    return 2.0 * n_nonembedding + 2.0 * n_layer * n_ctx * d_model


def flops(lm, T: int, o: int, window_lengths: list[int], pool_lengths: list[int]) -> float:
    """Total forward FLOPs of a windowed pass (see the module docstring)."""
    base = lm.base
    cfg = base.config
    per_token = kaplan_flops(non_embedding_parameters(base), cfg.num_hidden_layers, cfg.hidden_size, T)
    total = per_token * sum(window_lengths)
    if lm.recurrent:
        d, L = cfg.hidden_size, cfg.num_hidden_layers
        ffn = sum(p.numel() for p in lm.model.recurrence.ffn.parameters())
        total += sum(2.0 * ffn + 2.0 * L * n * d for n in pool_lengths)  # h_next of every window but the last
        total += sum(6.0 * d * d + 4.0 * d * n for n in window_lengths[1:])  # the slot in windows 2..
    return total


# ----------------------------------------------------------------------------- compute


def evaluation_documents(lm, cfg: Config) -> tuple[list[tuple[str, list[int], int]], dict]:
    """[(name, ids, n_words)] of the documents to score, and the corpus identity."""
    from probes.corpus import load_corpus, sample_documents
    from probes.lm import corpus_split

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


def compute(lm, cfg: Config | None = None, documents=None) -> dict:
    """Perplexities and FLOPs/token of one model at every overlap of ``cfg``. JSON-ready."""
    cfg = cfg or Config()
    T = resolve_window(lm, cfg)
    docs, corpus_id = documents if documents is not None else evaluation_documents(lm, cfg)
    rows = []
    for o in cfg.overlap:
        nll_sum, n_tok, n_words, n_win, processed, fl = 0.0, 0, 0, 0, 0, 0.0
        for _, ids, words in tqdm(docs, desc=f"perplexity {lm.name} T={T} o={o}", unit="doc"):
            r = windowed_nll(lm, ids, T, o, cfg.batch_size)
            nll_sum += float(r["nll"].sum())
            n_tok += len(r["nll"])
            n_words += words
            n_win += r["n_windows"]
            processed += r["tokens_processed"]
            fl += flops(lm, T, o, r["window_lengths"], r["pool_lengths"])
        rows.append({"model": lm.name, "recurrent": lm.recurrent, "window": T, "overlap": o,
                     "token_perplexity": math.exp(nll_sum / n_tok), "word_perplexity": math.exp(nll_sum / n_words),
                     "nll_per_token": nll_sum / n_tok, "scored_tokens": n_tok, "words": n_words,
                     "windows": n_win, "tokens_processed": processed, "flops_per_token": fl / n_tok})
    notes = {}
    if lm.recurrent:
        trained = lm.model.config.overlap
        notes["recurrence"] = (f"trained with overlap {trained}; h_prev pools each window's first T - o positions, "
                               "so at other overlaps it still summarises the text up to the next window's start "
                               "(the paper re-trains per overlap; its footnote 3 describes this remedy)")
        notes["overlap_matches_training"] = {str(o): o == trained for o in cfg.overlap}
    return {
        "model_name": lm.name,
        "config": config_dict(cfg),
        "model": lm.describe(),
        "corpus": corpus_id,
        "definitions": {
            "windows": "windows of T tokens start every T - o tokens; a window's T inputs predict the T tokens "
                       "that follow each input; each window scores only targets no earlier window scored (the "
                       "first: all; later: the last T - o); every token but a document's first is scored once",
            "token_perplexity": "exp(total NLL / scored tokens)",
            "word_perplexity": "exp(total NLL / whitespace-separated words of the evaluated text)",
            "flops_per_token": "(2 N_nonembedding + 2 n_layer T d_model) x tokens processed / tokens scored "
                               "(Kaplan et al. 2020), + the recurrence module's FFN, pooling and extra key/value",
            "non_embedding_parameters": non_embedding_parameters(lm.base),
            **notes,
        },
        "rows": rows,
    }


def table_rows(result: dict) -> list[dict]:
    return [dict(r) for r in result["rows"]]


def markdown_table(results: list[dict]) -> str:
    """Tables 1-2: one row per (model, overlap)."""
    lines = ["| model | window T | overlap o | token ppl | word ppl | FLOPs/token | scored tokens |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        for r in res["rows"]:
            lines.append(f"| {r['model']} | {r['window']} | {r['overlap']} | {r['token_perplexity']:.2f} | "
                         f"{r['word_perplexity']:.2f} | {r['flops_per_token']:.3g} | {r['scored_tokens']} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- plots


def plot(results: list[dict], axes=None):
    """Token- and word-level perplexity against overlap, one line per model."""
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(7.4, 2.9), constrained_layout=True)
    axes = np.ravel(axes)
    fig = axes[0].figure
    for res in results:
        rows = sorted(res["rows"], key=lambda r: r["overlap"])
        x = [r["overlap"] for r in rows]
        for ax, key in zip(axes, ("token_perplexity", "word_perplexity")):
            ax.plot(x, [r[key] for r in rows], marker="o", ms=4,
                    label=f"{res['model_name']} (T={rows[0]['window']})")
    for ax, title in zip(axes, ("token-level perplexity", "word-level perplexity")):
        ax.set_xlabel("overlap o (tokens)", fontsize=8)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    return fig


def plot_flops(results: list[dict], ax=None):
    """Word-level perplexity against FLOPs/token (the paper's Fig. 5), points labelled by overlap."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(4.2, 3.0), constrained_layout=True)
    fig = ax.figure
    for res in results:
        rows = sorted(res["rows"], key=lambda r: r["overlap"])
        xs, ys = [r["flops_per_token"] for r in rows], [r["word_perplexity"] for r in rows]
        ax.plot(xs, ys, marker="o", ms=4, label=res["model_name"])
        for r, x, y in zip(rows, xs, ys):
            ax.annotate(f"o={r['overlap']}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("FLOPs / token", fontsize=8)
    ax.set_ylabel("word-level perplexity", fontsize=8)
    ax.legend(fontsize=7)
    return fig


def figures(results: list[dict], out: str) -> list:
    """Both perplexity figures and the Markdown table."""
    paths = save_drawings(results, out, (("perplexity", plot), ("perplexity-flops", plot_flops)))
    table = Path(out) / "results" / "perplexity" / "table.md"
    atomic_write(table, markdown_table(results).encode("utf-8"))
    return paths + [table]


# ----------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> None:
    from probes.lm import load_lm
    from probes.registry import get_spec

    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    if not cfg.overlap:
        raise ProbeError("give at least one --overlap")
    for name in cfg.model:  # every name is checked before any work
        from probes.lm import _need_causal

        _need_causal(get_spec(name))
    for name in cfg.model:
        lm = load_lm(name, cfg.device)
        result = compute(lm, cfg)
        json_path, _ = write_result(cfg.out, "perplexity", name, result, table_rows(result))
        print(f"{name}: wrote {json_path}")
    results = read_results(cfg.out, "perplexity", cfg.model)
    print(markdown_table(results), end="")
    paths = figures(results, cfg.out)
    print("figures: " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    run_main(main)
