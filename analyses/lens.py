"""The logit lens and the tuned lens: what a causal LM would predict if it stopped at layer l
(nostalgebraist 2020; Belrose et al. 2023, the ``tuned-lens`` package)

Every layer's residual stream h_l (l = 0..L, 0 = embeddings) is decoded into a next-token distribution:

* **logit lens**: through the model's own final norm and output matrix (probes.capture.lens.Unembedding);
* **tuned lens**: through a learned affine translator first, h + A_l h + b_l, trained to minimise
  KL(final || lens_l) on the TRAIN split of the corpus (the first 90% of every document), which the
  evaluation (the HELD-OUT split, the last 10%) never sees (probes.capture.tuned_lens). Training them runs the
  model on ``train_steps`` x ``train_tokens`` tokens (250 x 2048 by default): before it starts, one line on stderr
  says so and where they go, and a progress bar follows; ``tuned=False`` (``--no-tuned``) skips the tuned lens.
  They are saved with their sha256 in ``<out>/lens/<model>/<key>/`` on the command line and in the per-user
  cache (``<cache>/.tuned-lens/<model>/<key>/``, :func:`translators_root`) from Python, never in the current
  folder, and reused while the model, the training settings and the split are the same. From Python with the
  caller's own texts (``lens.run(model, texts)``), the translators still come from ``--corpus``'s train split:
  keep the two apart.

Layer L is the model's output itself (Hugging Face's hidden[L] already holds the final norm), so KL is 0 and
top-1 agreement 1 there for both lenses. Per layer and lens, over every scored held-out token:

* cross-entropy on the next token (nats; the last layer's is the model's own, the perplexity analysis's NLL);
* KL(final || layer): how far the layer's distribution is from the model's (nats);
* top-1 agreement: the share of tokens whose most likely next token is the model's.

Documents run in windows of T tokens every T - o tokens, each target scored once (the perplexity analysis's
rule; a recurrent GPT-2 carries h_prev from window to window). Intervals: a block bootstrap over runs of
consecutive windows of one document, as long as the text allows while leaving at least 20 runs, read at the
expanded level (the rule of :mod:`analyses.blocks`: losses are dependent over thousands of tokens, so single
windows would be too short a block). Two models run on the same documents with the same T and o share the
windows and the runs, so their difference is a paired bootstrap (:func:`plot_difference`: where in depth the
recurrent model's extra state changes the predictions).

    $ python -m analyses.lens --model gpt2-small-base --model gpt2-small-recurrent [--no-tuned] [--window T]
          [--overlap o] [--n-documents N] [--max-tokens N] [--train-steps 250] [--out out]

Writes out/results/lens/<model>.json (+ .csv) and out/figures/lens.{png,pdf} and lens-difference.{png,pdf}.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analyses import blocks, common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import Identity, settings_used
from analyses.inputs import LM, LMConfig
from analyses.lens_rows import LayerRow, LensStats, TunedLens
from analyses.records import Definitions, omitted
from probes.capture.lens import STATS, lens_statistics
from probes.capture.store import USER_CACHE, UserCache, cache_subfolder
from probes.capture.tuned_lens import Documents, TrainSettings, tuned_translators
from probes.capture.windows import check_window
from probes.config import arg, tqdm_class
from probes.corpus import corpus_split, load_corpus, sample_documents
from probes.errors import ProbeError

LENSES = ("logit", "tuned")
STAT_LABELS = {"kl": "KL(final || layer), nats", "ce": "cross-entropy on the next token, nats",
               "top1": "top-1 agreement with the final layer"}
MAX_DEFAULT_WINDOW = 1024  # the default window: the model's own, at most this many tokens



@dataclass
class Config(LMConfig):
    """Logit lens and tuned lens of causal LMs: per layer the cross-entropy, KL to the final layer and top-1
    agreement on held-out text."""

    model: list[str] = arg(["gpt2-small-base", "gpt2-small-recurrent"], "causal LMs from checkpoints.yaml")
    tuned: bool = arg(True, "also the tuned lens (translators trained on the train split, saved under <out>/lens)")
    window: int = arg(0, f"window T in tokens (0: each model's own, at most {MAX_DEFAULT_WINDOW})", min=0)
    overlap: int = arg(0, "overlap o between consecutive windows (windows start every T - o tokens)", min=0)
    n_documents: int = arg(0, "evaluate this many held-out documents, drawn with the seed (0: all)", min=0)
    max_tokens: int = arg(0, "evaluate at most this many tokens of each document (0: all)", min=0)
    batch_size: int = arg(8, "windows per forward pass (plain models)", min=1)
    train_steps: int = arg(250, "tuned lens: optimiser steps (the tuned-lens package's default)", min=1)
    train_tokens: int = arg(2048, "tuned lens: scored training tokens per step", min=1)
    train_lr: float = arg(1.0, "tuned lens: learning-rate scale (SGD's rate is this x (1 - momentum 0.9))",
                          min=0.0)
    save_every: int = arg(50, "tuned lens: write the resumable training state every this many steps", min=1)
    resamples: int = arg(stats.RESAMPLES, "bootstrap resamples of windows", min=1)


# ----------------------------------------------------------------------------- inputs


def resolve_window(lm, cfg: Config) -> int:
    T = cfg.window if cfg.window > 0 else min(lm.window, MAX_DEFAULT_WINDOW)
    if T > lm.max_positions:
        raise ProbeError(f"--window {T} is longer than model '{lm.name}' allows ({lm.max_positions} positions)")
    check_window(T, cfg.overlap)
    return T


def evaluation_documents(lm, cfg: Config) -> tuple[list[tuple[str, list[int]]], dict]:
    """[(name, ids)] of the held-out documents to evaluate, and their corpus identity."""
    corpus = corpus_split(load_corpus(cfg.corpus), "heldout")
    docs = list(corpus.documents) if cfg.n_documents <= 0 else sample_documents(corpus, cfg.n_documents, cfg.seed)
    out = []
    for d in docs:
        ids = lm.encode(d.text)
        ids = ids[:cfg.max_tokens] if cfg.max_tokens > 0 else ids
        if len(ids) >= 2:
            out.append((d.name, ids))
    if not out:
        raise ProbeError(f"corpus {corpus.name} has no held-out document of at least 2 tokens")
    ident = {**corpus.identity(), "split": "heldout", "documents": [n for n, _ in out],
             "n_documents_drawn": cfg.n_documents, "seed": cfg.seed, "max_tokens": cfg.max_tokens}
    return out, ident


def train_settings(cfg: Config, T: int) -> TrainSettings:
    return TrainSettings(window=T, overlap=cfg.overlap, steps=cfg.train_steps, tokens_per_step=cfg.train_tokens,
                         lr=cfg.train_lr, seed=cfg.seed)


def translators(lm, cfg: Config, T: int, root: str | os.PathLike, progress: bool = True):
    """The tuned lens's translators of ``lm``, trained on the corpus's train split (or reused from ``root``), and
    their record."""
    train = corpus_split(load_corpus(cfg.corpus), "train")
    docs = Documents([d.text for d in train.documents], lm.encode)  # tokenized as training reaches them
    split = {**train.identity(), "split": "train"}
    return tuned_translators(lm, docs, split, train_settings(cfg, T), Path(root), cfg.save_every, progress)


TRANSLATORS = ".tuned-lens"  # the translators' folder in an activation cache (hidden: no cache entry of its own)


def translators_root(cache_dir=USER_CACHE) -> Path | None:
    """Where a Python call keeps the tuned lens's translators: ``<cache>/.tuned-lens`` of the activation cache it
    uses (the per-user cache by default, :func:`probes.capture.store.user_cache_dir`); None for ``cache_dir=None``
    (no cache: they are trained in a temporary folder and dropped). Never the current folder."""
    return cache_subfolder(cache_dir, TRANSLATORS)


@dataclass(frozen=True)
class LensInputs(LM):
    """A causal LM (:class:`analyses.inputs.LM`) and where its translators are kept: ``<out>/lens`` on the command
    line, :func:`translators_root` of the activation cache from Python."""

    def load(self, unit: tuple, cfg) -> dict:
        return {**super().load(unit, cfg), "translators_dir": Path(cfg.out) / "lens"}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        got = super().from_python(model, texts, cfg, tokenizer=tokenizer, name=name, cache_dir=cache_dir)
        return {**got, "translators_dir": translators_root(cache_dir)}


# ----------------------------------------------------------------------------- compute


@dataclass
class WindowSums(stats.Bootstrap):
    """The block bootstrap of the windows, with what a paired difference of two results resamples: per window its
    scored tokens and, per lens and statistic, its per-layer sums (``units``)."""

    units: dict[str, Any] | None = omitted()


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's lens statistics: the saved document's keys, in order. The identity's model is the LM's
    (probes.models.lm describe); its corpus the held-out documents evaluated."""

    lenses: list[str]  # "logit", and "tuned" when trained
    window: int  # T
    overlap: int  # o
    scored_tokens: int
    definitions: Definitions  # prose only: nothing reads numbers from it
    layers: list[LayerRow]  # per layer 0..L
    tuned_lens: TunedLens | None  # the translators used (None: the logit lens only)
    bootstrap: WindowSums  # analyses.blocks.bootstrap over runs of windows (runs: each run's first window) + units:
    #                  per window its tokens and per-layer sums
    notes: list[str] | None = None  # why a statistic is null (NaN or inf logits), one line per lens

    @style.drawing
    def plot(self, ax=None, stat: str = "kl", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: ``stat``
        ("kl", "ce" or "top1") by layer with its bootstrap band, the logit lens solid and the tuned lens
        dashed. ``kwargs`` (``color=``, ``label=``, ``linewidth=``, ``marker=`` ...) go to both lines;
        without ``color=`` the next colour of the Axes' cycle; the labels (default: the model, then the lens
        in brackets) enter the legend, so results drawn on one Axes overlay. Fonts and colours follow the
        caller's rcParams. Returns the Axes."""
        if stat not in STAT_LABELS:
            raise ProbeError(f"stat must be one of {', '.join(STAT_LABELS)}, got {stat!r}")
        ax = style.one_axes(ax, (3.8, 2.9))
        _stat_panel(ax, [style.on_axes(ax, self, kwargs)], stat, relative=False, own_linestyle=True)
        return style.finish(ax)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        mid = self.layers[(len(self.layers) - 1) // 2]
        return {f"{lens} lens {what}, layer {mid.layer}": stats.Sample(mid.of(lens).of(key)[0])
                for lens in self.lenses for key, what in (("kl", "KL"), ("top1", "top-1"))}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the logit lens's KL per layer."""
        return common.as_floats(row.logit.kl for row in self.layers)

    def headline(self) -> dict[str, str]:
        mid = self.layers[(len(self.layers) - 1) // 2]
        return {f"{lens} lens, layer {mid.layer}": f"KL {_number(mid.of(lens).kl)} nats, top-1 "
                f"{_number(mid.of(lens).top1)}" for lens in self.lenses}


def _number(x) -> str:
    """A statistic as the headline shows it: null (see the result's notes) when it is not a finite number."""
    return f"{x:.3f}" if x is not None and np.isfinite(x) else "null"


def window_sums(per_doc: list[dict], lens: str) -> tuple[dict, np.ndarray]:
    """Per window: {stat: (n_windows, L+1) sums over its scored targets} and (n_windows,) target counts."""
    sums: dict[str, list[np.ndarray]] = {s: [] for s in STATS}
    counts: list[np.ndarray] = []
    for doc in per_doc:
        win = doc["window"]
        n_w = doc["n_windows"]
        counts.append(np.bincount(win, minlength=n_w))
        for s in STATS:
            values = doc["stats"][lens][s]  # (L+1, n)
            sums[s].append(np.stack([np.bincount(win, weights=v, minlength=n_w) for v in values], 1))
    return {s: np.concatenate(v) for s, v in sums.items()}, np.concatenate(counts).astype(float)


def ratio_replicates(sums: np.ndarray, counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(B, L+1) replicates of per-layer sums over resampled windows / their resampled token counts."""
    return (weights @ sums) / (weights @ counts)[:, None]


def compute(cfg: Config | None = None, *, lm, documents=None, translators_dir=USER_CACHE) -> Result:
    """Logit-lens (and tuned-lens) statistics of ``lm`` per layer on the held-out documents; ``documents``:
    ([(name, ids)], corpus identity) to evaluate instead of the config's; ``translators_dir``: where the tuned
    lens's translators are kept (default: the per-user cache's, :func:`translators_root`; None: a temporary
    folder)."""
    cfg = cfg or Config()
    T = resolve_window(lm, cfg)
    docs, corpus_id = documents if documents is not None else evaluation_documents(lm, cfg)
    docs = [(d[0], d[1]) for d in docs]  # (name, ids[, words])
    lenses, tuned_record = {"logit": None}, None
    if cfg.tuned:
        root = translators_root() if isinstance(translators_dir, UserCache) else translators_dir
        with (tempfile.TemporaryDirectory(prefix="tuned-lens-") if root is None
              else contextlib.nullcontext(root)) as where:
            lenses["tuned"], record = translators(lm, cfg, T, where)
        tuned_record = TunedLens(key=record["key"], settings=record["settings"], split=record["split"],
                                 translators_sha256=record["translators_sha256"], loss=record["loss"],
                                 kl_first_step=record["kl_first_step"], kl_last_step=record["kl_last_step"],
                                 nonfinite_values=record["nonfinite_values"])
    per_doc = [lens_statistics(lm, ids, T, cfg.overlap, lenses, cfg.batch_size)
               for _, ids in tqdm_class()(docs, desc=f"lens {lm.name} T={T} o={cfg.overlap}", unit="doc")]
    units = [(name, int(w)) for (name, _), doc in zip(docs, per_doc) for w in range(doc["n_windows"])]
    n_windows = [doc["n_windows"] for doc in per_doc]
    run = blocks.block_length(n_windows)  # windows per block (analyses.blocks)
    runs = blocks.runs(n_windows, run)
    boot = blocks.bootstrap("block", len(runs), run, "windows", cfg.resamples, seed=cfg.seed,
                            units_id=stats.units_id(units), runs=runs)
    W = stats.resample_weights(len(runs), cfg.resamples, cfg.seed)
    L = int(lm.base.config.num_hidden_layers)
    saved, by_lens = {}, {}
    for lens in lenses:
        sums, counts = window_sums(per_doc, lens)
        saved[lens] = {s: stats.rounded(sums[s]) for s in STATS}
        values = {}  # stat -> (L+1,) points, stat_ci -> (2, L+1)
        for s in STATS:
            values[s] = sums[s].sum(0) / counts.sum()  # (L+1,)
            rep = ratio_replicates(stats.grouped(sums[s], boot), stats.grouped(counts, boot), W)
            values[f"{s}_ci"] = stats.interval(rep, stats.interval_level(boot))  # (2, L+1)
        by_lens[lens] = [LensStats(**{k: v[lyr] if v.ndim == 1 else v[:, lyr].tolist() for k, v in values.items()})
                         for lyr in range(L + 1)]
    layers = [LayerRow(layer=lyr, final=lyr == L, **{lens: rows[lyr] for lens, rows in by_lens.items()})
              for lyr in range(L + 1)]
    counts = window_sums(per_doc, "logit")[1]
    model = lm.describe()
    notes = nonfinite_notes(per_doc, lenses, tuned_record)
    return Result(
        identity=Identity(model_name=lm.name, config=settings_used(cfg, corpus=corpus_id, requested=lm.name),
                          model=model, corpus=corpus_id),
        lenses=list(lenses),
        window=T,
        overlap=cfg.overlap,
        scored_tokens=int(counts.sum()),
        definitions=Definitions({
            "layers": "0 = embedding output, l = output of layer l; the last layer (final) is the model's output: "
                      "Hugging Face's hidden[L] already holds the final norm, so it is decoded by the output matrix "
                      "alone and KL is 0 there",
            "logit_lens": "hidden[l] -> final norm -> output matrix (-> the family's logit softcapping)",
            "tuned_lens": "hidden[l] + A_l hidden[l] + b_l -> final norm -> output matrix; A_l, b_l trained to "
                          "minimise KL(final || lens) on the train split (first 90% of every document), evaluated "
                          "on the held-out split (last 10%)",
            "ce": "mean over scored targets of -log p_layer(next token), nats",
            "kl": "mean over scored targets of KL(p_final || p_layer), nats",
            "top1": "share of scored targets where argmax p_layer = argmax p_final",
            "windows": "windows of T tokens every T - o tokens, each target scored once (the perplexity rule); a "
                       "recurrent model carries h_prev",
            "intervals": f"block bootstrap over runs of {run} consecutive windows of one document (the longest "
                         "runs that leave at least 20); ratio of resampled sums over resampled token counts; "
                         "percentile interval at the expanded level (analyses.blocks)",
        }),
        layers=layers,
        tuned_lens=tuned_record,
        notes=notes or None,
        bootstrap=WindowSums(**vars(boot), units={"tokens": counts.tolist(), **saved}),
    )


def nonfinite_notes(per_doc: list[dict], lenses: dict, tuned_record: TunedLens | None) -> list[str]:
    """One line per lens whose decoded distribution is not finite (NaN or inf logits) at some scored token: where
    and why its ce, kl and top1 are null (an argmax over NaN logits is no prediction)."""
    notes = []
    for lens in lenses:
        bad = np.concatenate([np.isnan(doc["stats"][lens]["top1"]) for doc in per_doc], axis=1)  # (L+1, n)
        layers = [int(lyr) for lyr in np.flatnonzero(bad.any(1))]
        if not layers:
            continue
        why = ""
        if lens == "tuned" and tuned_record and tuned_record.nonfinite_values:
            why = f"; its translators hold {tuned_record.nonfinite_values} NaN or inf values"
        notes.append(f"{lens} lens, layers {', '.join(map(str, layers))}: the decoded next-token distribution is NaN "
                     f"or inf at {int(bad.any(0).sum())} of {bad.shape[1]} scored tokens{why}, so ce, kl and top1 "
                     "are null there (a NaN is never counted as a disagreement)")
    return notes


def table_rows(result: Result | dict) -> list[dict]:
    """One row per (layer, lens): the three statistics with their intervals."""
    rows = []
    for r in Result.from_json(result).layers:
        for lens in LENSES:
            got = r.lens(lens)
            if got is None:
                continue
            row: dict = {"layer": r.layer, "final": r.final, "lens": lens}
            for s in STATS:
                value, (lo, hi) = got.of(s)
                row.update({s: value, f"{s}_lo": lo, f"{s}_hi": hi})
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------- plots


def _x(res: Result, relative: bool) -> np.ndarray:
    L = len(res.layers) - 1
    return style.relative_depth(L) if relative else np.arange(L + 1)


def _stat_panel(ax, drawn: list[style.Drawn], stat: str, relative: bool, own_linestyle: bool = False) -> None:
    """``stat`` by layer, one colour per result, the logit lens solid and the tuned lens dashed (unless
    ``own_linestyle``: a line style the caller gave), with bands."""
    for d in drawn:
        res = d.result
        x = _x(res, relative)
        for lens in res.lenses:
            read = [r.of(lens).of(stat) for r in res.layers]
            y = [np.nan if value is None else value for value, _ in read]
            kw = {**d.line(marker="o", ms=3), "label": f"{d.label} ({lens})"}
            if not (own_linestyle and "linestyle" in d.kw):
                kw["linestyle"] = "-" if lens == "logit" else "--"
            ax.plot(x, y, **kw)
            ci = np.array([[np.nan if v is None else v for v in interval] for _, interval in read])
            ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.15, lw=0, **d.quiet)
    ax.set_ylabel(STAT_LABELS[stat])
    ax.set_xlabel("relative depth l / L" if relative else "layer l (0 = embeddings, L = output)")
    if not relative:
        integer_ticks(ax)


def integer_ticks(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def mark_recurrence(ax, res: Result, color, relative: bool = False) -> None:
    """A dotted line where a recurrent model's h_prev enters: before the output of block l_ins (hidden[l_ins])."""
    l_ins = (res.model.recurrence or {}).get("l_ins")
    if l_ins is not None:
        L = len(res.layers) - 1
        x = (l_ins - 0.5) / L if relative else l_ins - 0.5
        ax.axvline(x, color=color, ls=":", lw=1)
        ax.text(x, 0.02, f" h_prev enters\n (block {l_ins})", transform=ax.get_xaxis_transform(), va="bottom",
                fontsize="small", color=color)


@style.drawing
def plot(results: list[Result], fig=None, relative_depth: bool | None = None):
    """KL to the final layer, next-token cross-entropy and top-1 agreement by layer, one colour per model (solid:
    logit lens, dashed: tuned lens; bands: bootstrap interval over windows). ``fig``: a Figure or SubFigure to
    draw into. Returns the figure."""
    results = [Result.from_json(r) for r in results]
    relative = len({len(r.layers) for r in results}) > 1 if relative_depth is None else relative_depth
    fig = style.new_figure(fig, (10.5, 2.9))
    axes = fig.subplots(1, 3, sharex=True)
    drawn = style.in_figure(results)
    for ax, stat in zip(axes, ("kl", "ce", "top1")):
        _stat_panel(ax, drawn, stat, relative)
    for d in drawn:
        mark_recurrence(axes[-1], d.result, d.color, relative)
    style.legend(axes)
    return fig


def paired_difference(a: Result, b: Result, lens: str, stat: str = "ce") -> tuple[np.ndarray, np.ndarray] | None:
    """(b - a per layer (L+1,), its paired interval (2, L+1)) of ``stat`` under ``lens``, resampling the windows
    both ran on; None unless both saw the same windows (units_id) with the same depth and lens."""
    ba, bb = a.bootstrap, b.bootstrap
    if (ba.units_id != bb.units_id or ba.runs != bb.runs or ba.units is None or bb.units is None
            or len(a.layers) != len(b.layers) or lens not in a.lenses or lens not in b.lenses):
        return None
    ua, ub = ba.units, bb.units
    n = np.asarray(ua["tokens"], dtype=np.float64)
    sa, sb = (np.asarray(u[lens][stat], dtype=np.float64) for u in (ua, ub))
    d, runs_n = stats.grouped(sb - sa, ba), stats.grouped(n, ba)  # per run of windows (the block bootstrap's)
    W = stats.resample_weights(len(runs_n), ba.resamples, ba.seed)
    rep = ratio_replicates(d, runs_n, W)
    return (sb - sa).sum(0) / n.sum(), stats.interval(rep, stats.interval_level(ba))


@style.drawing
def plot_difference(results: list[Result], fig=None, stat: str = "ce"):
    """Each model's ``stat`` minus the first model's, per layer, paired over the windows both ran on (solid:
    logit lens, dashed: tuned lens; bands: paired bootstrap intervals). Models on other windows or of another
    depth than the first are left out. Returns the figure."""
    results = [Result.from_json(r) for r in results]
    fig = style.new_figure(fig, (4.6, 3.0))
    ax = fig.subplots()
    ax.axhline(0, color="0.4", lw=0.8)
    first = results[0]
    colors = style.figure_colors([r.model_name for r in results])
    for res in results[1:]:
        for lens in LENSES:
            diff = paired_difference(first, res, lens, stat)
            if diff is None:
                continue
            x = np.arange(len(res.layers))
            color = colors[res.model_name]
            ax.plot(x, diff[0], marker="o", ms=3, color=color, ls="-" if lens == "logit" else "--",
                    label=f"{style.display_name(res.model_name)} - {style.display_name(first.model_name)} ({lens})")
            ax.fill_between(x, diff[1][0], diff[1][1], color=color, alpha=0.2, lw=0)
    for res in results[1:]:
        if paired_difference(first, res, "logit", stat) is not None:
            mark_recurrence(ax, res, colors[res.model_name])
    ax.set_xlabel("layer l (0 = embeddings, L = output)")
    integer_ticks(ax)
    ax.set_ylabel(f"difference in {STAT_LABELS[stat]}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no model shares the first model's windows", ha="center", transform=ax.transAxes)
    return fig


def check_config(cfg: Config) -> None:
    if cfg.window:
        check_window(cfg.window, cfg.overlap)


def several(results: list) -> list:
    """The results the difference figure draws: two or more models (each against the first)."""
    return results if len(results) > 1 else []


ANALYSIS = Analysis(
    name="lens",
    inputs=LensInputs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config,
    figures=(
        Figure("lens", plot, "What each layer would predict if the model stopped there: its residual stream decoded "
               "through the final norm and output matrix (logit lens, solid) or through a translator trained on the "
               "training split (tuned lens, dashed), on held-out text. Left: KL from the model's own next-token "
               "distribution; middle: cross-entropy on the actual next token; right: how often the layer's top "
               "token is the model's. Bands: 95% bootstrap interval over windows. The last layer is the model's "
               "output (KL 0); the earlier a curve reaches it, the earlier the prediction is formed."),
        Figure("lens-difference", plot_difference, "Paired difference in next-token cross-entropy, layer by layer, "
               "of each model minus the first model run on the same windows (logit lens solid, tuned lens dashed; "
               "band: 95% paired bootstrap interval over windows). Below zero: that model's layer predicts the "
               "held-out text better. For the recurrent GPT-2 against its base, the depth where the curve leaves "
               "zero is where its extra state (h_prev, inserted at block l_ins, dotted) changes the predictions.",
               select=several),
    ),
    example=("--model", "tiny-gpt2", "--n-documents", "2", "--max-tokens", "60", "--window", "24", "--train-steps",
             "2", "--train-tokens", "30", "--resamples", "50"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
