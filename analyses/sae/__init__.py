"""Sparse autoencoders: how many sparse directions reconstruct a layer's token states, and how well?

For each chosen layer (``--layers``, 0 = embeddings, -1 = last) and each of ``--seeds`` seeds, an SAE is trained
on the token states of the training sentences (special tokens excluded unless --keep-special) and evaluated on
the held-out sentences (``--held-out``, a seeded share of the sentence sample):

* the SAE (:mod:`analyses.sae.model`): ``topk`` (k latents per token, AuxK revives dead latents), ``batchtopk``
  (k B latents over a batch of B tokens in training, AuxK; a JumpReLU at the running threshold at inference and
  as saved), ``relu`` (L1 penalty) or ``jumprelu`` (learned per-latent thresholds, L0 penalty ``--l0-coef``,
  straight-through estimator of bandwidth 0.05, thresholds starting at 0.01, in scaled units), ``--width``
  latents (0: 8 x d), unit-norm decoder rows, b_dec initialised at the data mean, trained on states scaled to
  E||x|| = sqrt(d) and saved with the scale folded back;
* training (:mod:`analyses.sae.train`): Adam with linear warm-up and decay, seeded shuffled minibatches, on
  ``--device``; with ``--buffer-tokens N`` the training states are streamed from the cache through a shuffling
  buffer of N states (:mod:`analyses.sae.stream`), so memory does not grow with the number of training tokens;
* evaluation (:mod:`analyses.sae.metrics`): L0, MSE, explained variance
  1 - E||x - x_hat||^2 / (E||x||^2 - ||E x||^2) (and the legacy per-token ratio beside it), cosine, l2 ratio,
  relative reconstruction bias, firing density, dead and dense latents, each with a percentile bootstrap
  interval over the held-out sentences;
* across seeds: the mean correlation coefficient (MCC) of two seeds' decoders, the mean |cos| of their rows
  paired one to one by the Hungarian assignment, averaged over pairs of seeds;
* spliced into the model (``--splice``, on by default; a model with no head to score its objective is left out,
  the result says why): the model's own loss on the held-out sentences (next-token for a causal LM, masked-LM for
  an encoder: a seeded ``--mask-prob`` share of each sentence's tokens masked) with the layer's states replaced by
  the SAE's reconstruction (special tokens left as they are unless --keep-special), against the clean model and the
  layer zero-ablated: loss recovered (L_zero - L_spliced) / (L_zero - L_clean) and the mean KL(clean || spliced)
  over scored positions, with intervals (:mod:`analyses.sae.splice`);
* each SAE saved (``--save``) under ``<out>/sae/<model>/layer<l>-seed<s>/`` in sae-lens's layout with checksums
  (:mod:`analyses.sae.io`); a run that finds the folder resumes from it (:mod:`analyses.sae.resume`): the saved SAE
  is loaded, not trained again, where it was trained as the run would train it (else trained again, said in one
  line); a folder of another model or layer, edited, truncated or whose cfg.json does not match its weights is
  refused (one ``error:`` line).

Without ``--buffer-tokens`` the states are one layer's training tokens read into memory (float32) at a time;
the held-out tokens are streamed (blocks of 4096 tokens: checked finite before training, then the statistics'
two passes). From Python, ``layer=l`` is ``layers=[l]``. Every formula is in docs/definitions.md (Sparse
autoencoders).

    $ python -m analyses.sae --model minilm-l6 --layers 3 --layers -1 [--kind topk --k 32 --width 0 --steps 2000]
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from analyses import common, records, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity
from analyses.sae import figures
from analyses.sae.figures import layer_line, log10_histogram
from analyses.sae.glossary import Glossary, definitions
from analyses.sae.inputs import SaeInputs
from analyses.sae.io import SaeRecord
from analyses.sae.metrics import STATISTICS, Estimate, estimates, held_out_sums, mcc
from analyses.sae.model import KINDS, SaeShape
from analyses.sae.resume import trained_or_resumed, weights_sha256  # noqa: F401 (weights_sha256: analyses.sae's)
from analyses.sae.splice import Reconstruct, SpliceStats, splice_stats, splice_sums, zero_sums
from analyses.sae.stream import TokenSource
from analyses.sae.train import TrainSettings, train_sae, train_sae_streamed
from probes.capture.activations import Activations, layer_index
from probes.config import arg
from probes.errors import ProbeError

HELD_OUT_BLOCK = 4096  # held-out tokens read at a time


@dataclass
class Config(SentenceConfig):
    """Sparse autoencoders (TopK, BatchTopK, ReLU + L1 or JumpReLU) on the token states of chosen layers, evaluated on
    held-out sentences. JumpReLU trains with --l0-coef (default 1.0, on states scaled to E||x|| = sqrt(d)), a
    straight-through estimator of bandwidth 0.05 and thresholds starting at 0.01 (scaled units)."""

    layers: list[int] = arg([-1], "a layer to train an SAE on (0 = embeddings, -1 = last); repeat for several")
    kind: str = arg("topk", "SAE architecture: topk (k latents per token), batchtopk (k per token on average over a "
                            "batch; saved as a jumprelu), relu (L1 penalty) or jumprelu (learned thresholds, L0 "
                            "penalty)", choices=KINDS)
    width: int = arg(0, "latents of the SAE (0: 8 x the layer's width)", min=0)
    k: int = arg(32, "topk, batchtopk: latents firing per token", min=1)
    l1: float = arg(1.0, "relu: L1 coefficient (on states scaled to E||x|| = sqrt(d))", min=0.0)
    l0_coef: float = arg(1.0, "jumprelu: L0 coefficient (on states scaled to E||x|| = sqrt(d)); straight-through "
                              "bandwidth 0.05, thresholds start at 0.01", min=0.0)
    buffer_tokens: int = arg(0, "stream the training states from the cache through a shuffling buffer of this many "
                                "token states (0: read them all into memory)", min=0)
    steps: int = arg(2000, "optimiser steps per SAE", min=1)
    lr: float = arg(1e-3, "Adam's peak learning rate", min=1e-12)
    tokens_per_step: int = arg(1024, "token states per minibatch", min=1)
    dead_window: int = arg(10000, "a latent that fires on none of this many training tokens is dead", min=1)
    seeds: int = arg(1, "SAEs per layer, seeds --seed .. --seed + N - 1 (N >= 2: their decoders' MCC)", min=1)
    held_out: float = arg(0.2, "share of the sentences held out for evaluation", min=0.01, max=0.9)
    keep_special: bool = arg(False, "include special tokens ([CLS], [SEP], <s>, ...) in training and evaluation")
    resamples: int = arg(1000, "bootstrap resamples of the held-out sentences", min=1)
    save: bool = arg(True, "save each SAE under <out>/sae/<model>/layer<l>-seed<s>/ (sae-lens's layout)")
    splice: bool = arg(True, "splice each SAE into the model and score its own loss on the held-out sentences (loss "
                             "recovered, KL); a model with no head is left out (--no-splice: never)")
    mask_prob: float = arg(0.15, "--splice on a masked LM: share of each sentence's tokens masked", min=0.01, max=0.9)


@dataclass
class SaeRow:
    """One SAE (a layer and a seed) and its held-out statistics; each ``*_ci`` is its bootstrap interval."""

    layer: int
    seed: int
    kind: str
    width: int
    k: int | None
    d: int
    n_train_tokens: int
    n_held_out_tokens: int
    scale: float  # c: trained on c x, E||c x|| = sqrt(d)
    final_loss: float  # training loss over the last 10% of steps (scaled units)
    dead_in_training: int  # latents silent over the last dead_window training tokens
    weights_sha256: str  # sha256 of the saved sae_weights.safetensors
    l0: float | None
    l0_ci: list[float] | None
    mse: float | None
    mse_ci: list[float] | None
    explained_variance: float | None
    explained_variance_ci: list[float] | None
    explained_variance_legacy: float | None
    explained_variance_legacy_ci: list[float] | None
    cosine: float | None
    cosine_ci: list[float] | None
    l2_ratio: float | None
    l2_ratio_ci: list[float] | None
    shrinkage: float | None
    shrinkage_ci: list[float] | None
    density: float | None
    density_ci: list[float] | None
    dead: float | None
    dead_ci: list[float] | None
    dense: float | None
    dense_ci: list[float] | None
    # the SAE spliced into the model (None: not spliced; see Result.splice), nats per scored token
    loss_clean: float | None = None
    loss_spliced: float | None = None
    loss_spliced_ci: list[float] | None = None
    loss_zero: float | None = None
    loss_recovered: float | None = None
    loss_recovered_ci: list[float] | None = None
    kl: float | None = None
    kl_ci: list[float] | None = None
    # latents per log10 firing-density bin (analyses.sae.figures.DENSITY_EDGES) over the held-out tokens, dead
    # latents (``dead``) not among them (None: a result of before the histogram)
    density_log10_counts: list[int] | None = None


SPLICED = ("loss_spliced", "loss_recovered", "kl")  # the spliced statistics with intervals


@dataclass
class Splice:
    """How the SAEs were spliced in: the objective scored (``objective``: what Objective.describe records), on how
    many held-out sentences and scored tokens; or ``skipped``, why not."""

    skipped: str | None = None
    objective: dict | None = None
    n_texts: int | None = None
    scored_tokens: int | None = None
    special_tokens: str | None = None  # "edited" or "left as the model made them"


@dataclass
class Agreement:
    """The seeds' SAEs of one layer: the mean over pairs of seeds of their decoders' MCC (None: one seed)."""

    layer: int
    seeds: int
    mcc: float | None
    pairs: list[float] | None = None  # each pair of seeds' MCC, in itertools.combinations order


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's SAEs: the saved document's keys, in order."""

    definitions: Glossary  # prose only: nothing reads numbers from it
    saes: list[SaeRow]  # per layer, then per seed
    agreement: list[Agreement]  # per layer
    bootstrap: stats.Bootstrap  # of the intervals (unit: held-out sentence)
    splice: Splice | None = None  # the SAEs spliced into the model (None: a result of before --splice)

    def __post_init__(self):  # a reader that hands the record fields over as JSON: decode them by their types
        for name, tp in (("definitions", Glossary), ("saes", list[SaeRow]), ("agreement", list[Agreement]),
                         ("bootstrap", stats.Bootstrap), ("splice", Splice)):
            value = getattr(self, name)
            if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
                setattr(self, name, records.from_json(tp, value, name))

    def first_seed(self) -> list[SaeRow]:
        """The first seed's SAE of each layer, in layer order."""
        seed = min(r.seed for r in self.saes)
        return [r for r in self.saes if r.seed == seed]

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """Explained variance of the first seed's SAE by layer, band: its bootstrap interval. ``kwargs`` go to the
        line (without ``color=``, the Axes' next colour); results drawn on one Axes overlay. Returns the Axes."""
        ax = style.one_axes(ax)
        layer_line(ax, style.on_axes(ax, self, kwargs), "explained_variance")
        ax.set_ylabel("explained variance (held out)")
        return style.finish(ax)

    def plotted_values(self) -> np.ndarray:
        return common.as_floats(r.explained_variance for r in self.first_seed())

    def headline(self) -> dict[str, str]:
        last = self.first_seed()[-1]
        ev = "n/a" if last.explained_variance is None else f"{last.explained_variance:.3f}"
        return {f"layer {last.layer}: explained variance / L0": f"{ev} / {last.l0:.1f}" if last.l0 is not None
                else ev}

    def headline_numbers(self) -> dict[str, stats.Sample]:
        last = self.first_seed()[-1]
        return {f"SAE explained variance, layer {last.layer}": stats.Sample(last.explained_variance)}


# ----------------------------------------------------------------------------- compute


def split_sentences(n_texts: int, share: float, seed: int) -> np.ndarray:
    """(n_texts,) bool, True for the held-out sentences: round(share n) of them (at least 1, at most n - 1),
    a seeded random choice."""
    if n_texts < 2:
        raise ProbeError(f"{n_texts} sentence: an SAE needs training and held-out sentences (2 or more)")
    n_held = min(n_texts - 1, max(1, round(share * n_texts)))
    held = np.zeros(n_texts, bool)
    held[np.random.default_rng([int(seed), n_texts, 7]).permutation(n_texts)[:n_held]] = True
    return held


def finite_states(acts: Activations, layer: int, rows: np.ndarray) -> np.ndarray:
    """(len(rows), d) float32 states of ``rows`` at ``layer``; ProbeError if any is NaN or inf."""
    X = np.asarray(acts.layer_hidden(layer, rows), dtype=np.float32)
    refuse_nonfinite(layer, int((~np.isfinite(X)).any(1).sum()), len(X))
    return X


def refuse_nonfinite(layer: int, bad: int, n: int) -> None:
    if bad:
        raise ProbeError(f"layer {layer}: {bad} of {n} token states hold NaN or inf; an SAE cannot be trained "
                         "or evaluated on them")


def check_finite(acts: Activations, layer: int, rows: np.ndarray, block: int = HELD_OUT_BLOCK) -> None:
    """ProbeError if a state of ``rows`` at ``layer`` is NaN or inf, read ``block`` rows at a time."""
    bad = 0
    for s in range(0, len(rows), block):
        bad += int((~np.isfinite(np.asarray(acts.layer_hidden(layer, rows[s:s + block]), np.float32))).any(1).sum())
    refuse_nonfinite(layer, bad, len(rows))


def source(acts: Activations, layer: int, rows: np.ndarray) -> TokenSource:
    """The states of token ``rows`` at ``layer``, read by ranges of ``rows`` (checked finite as they are read)."""
    return TokenSource(n=len(rows), d=int(acts.hidden.shape[-1]),
                       read=lambda start, stop: finite_states(acts, layer, rows[start:stop]))


def compute(cfg: Config | None = None, *, acts: Activations, objective=None,
            objective_skipped: str | None = None, layer: int | None = None) -> Result:
    """Train (or, with ``cfg.save``, resume) and evaluate the SAEs of every chosen layer and seed; with
    ``objective`` (the model with its head, :class:`probes.capture.objective.Objective`) and ``cfg.splice``, splice
    each into the model too (``objective_skipped``: why there is none). ``layer``: one layer, as ``layers=[layer]``
    (what ``run(..., layer=l)`` gives)."""
    cfg = one_layer(cfg or Config(), layer)
    check_config(cfg)
    device = common.check_device(cfg.device)
    layers = sorted({layer_index(x, acts.n_layers, f"--layers {x}") for x in cfg.layers})
    held = split_sentences(acts.n_texts, cfg.held_out, cfg.seed)
    keep = np.ones(len(acts.token_ids), bool) if cfg.keep_special else ~np.asarray(acts.special, bool)
    text_of = acts.text_index()
    train_rows, held_rows = np.flatnonzero(keep & ~held[text_of]), np.flatnonzero(keep & held[text_of])
    if len(train_rows) < 2 or len(held_rows) < 1:
        raise ProbeError(f"{len(train_rows)} training and {len(held_rows)} held-out token states: too few; use more "
                         "sentences")
    held_texts = np.flatnonzero(held)
    unit_of = np.searchsorted(held_texts, text_of[held_rows])  # held-out sentence 0..n_held-1 of each token
    boot = stats.bootstrap_block("held-out sentence", len(held_texts), cfg.resamples, seed=cfg.seed,
                                 units_id=stats.units_id([acts.texts[t] for t in held_texts]))
    identity = activations_identity(acts, cfg)
    name = identity.model_name
    rows, agreement = [], []
    splicer = None
    if objective is not None and cfg.splice:
        skip = () if cfg.keep_special else np.unique(np.asarray(acts.token_ids)[np.asarray(acts.special, bool)])
        splicer = _Splicer(objective, [acts.texts[t] for t in held_texts], skip, cfg, boot.level)
    streamed = 0 < cfg.buffer_tokens < len(train_rows)
    train_sentences = stats.units_id([acts.texts[t] for t in np.flatnonzero(~held)])
    for layer in layers:
        X = None if streamed else finite_states(acts, layer, train_rows)
        check_finite(acts, layer, held_rows, HELD_OUT_BLOCK)  # before training (the statistics read them again)
        d = int(acts.hidden.shape[-1])
        width = cfg.width or 8 * d
        if cfg.kind in ("topk", "batchtopk") and cfg.k > width:
            raise ProbeError(f"--k {cfg.k} is more than the SAE's {width} latents (--width)")
        decoders = []
        for seed in range(cfg.seed, cfg.seed + cfg.seeds):
            shape = SaeShape(cfg.kind, d, width, cfg.k if cfg.kind in ("topk", "batchtopk") else None)
            settings = TrainSettings(steps=cfg.steps, batch=cfg.tokens_per_step, lr=cfg.lr, l1=cfg.l1,
                                     l0=cfg.l0_coef, dead_window=cfg.dead_window, seed=seed)
            desc = f"SAE {name} layer {layer} seed {seed}"

            def train(layer=layer, X=X, shape=shape, settings=settings, desc=desc):
                if streamed:
                    return train_sae_streamed(source(acts, layer, train_rows), shape, settings, cfg.buffer_tokens,
                                              desc=desc, device=device)
                assert X is not None
                return train_sae(X, shape, settings, desc=desc, device=device)

            wanted = SaeRecord(model=name, fingerprint=identity.info.fingerprint or {}, layer=layer, seed=seed,
                               scale=float("nan"), steps=cfg.steps,
                               special_tokens="kept" if cfg.keep_special else "excluded", settings=settings,
                               buffer_tokens=cfg.buffer_tokens if streamed else 0, train_sentences=train_sentences,
                               n_train_tokens=len(train_rows))
            folder = Path(cfg.out) / "sae" / common.result_name(name) / f"layer{layer}-seed{seed}"
            trained, sha, _ = trained_or_resumed(folder if cfg.save else None, wanted, shape, train)
            sums = held_out_sums(trained.sae, source(acts, layer, held_rows), unit_of, len(held_texts),
                                 block=HELD_OUT_BLOCK)
            est = estimates(sums, cfg.resamples, cfg.seed, boot.level)
            hist, _ = log10_histogram(sums.fires.sum(0) / max(sums.tokens.sum(), 1.0))
            rows.append(SaeRow(layer=layer, seed=seed, kind=cfg.kind, width=width, k=shape.k, d=d,
                               n_train_tokens=len(train_rows), n_held_out_tokens=len(held_rows), scale=trained.scale,
                               final_loss=trained.final_loss, dead_in_training=trained.dead_at_end,
                               weights_sha256=sha, **flat(est), density_log10_counts=hist,
                               **(splicer.row(layer, trained.sae) if splicer is not None else {})))
            decoders.append(trained.sae.W_dec.detach().numpy().copy())
        pairs = [mcc(a, b) for a, b in itertools.combinations(decoders, 2)]
        agreement.append(Agreement(layer=layer, seeds=cfg.seeds, mcc=float(np.mean(pairs)) if pairs else None,
                                   pairs=pairs or None))
    return Result(identity=identity, definitions=definitions(cfg), saes=rows,
                  agreement=agreement, bootstrap=boot,
                  splice=splicer.block() if splicer is not None else Splice(
                      skipped=objective_skipped or ("--no-splice" if not cfg.splice else "no objective was given")))


class _Splicer:
    """The objective on the held-out sentences, with each SAE spliced in; the zero ablation scored once a layer."""

    def __init__(self, objective, texts: list[str], skip_ids, cfg: Config, level: float):
        self.objective, self.texts, self.skip_ids, self.cfg, self.level = objective, texts, skip_ids, cfg, level
        self.zero: dict[int, np.ndarray] = {}
        self.counts: np.ndarray | None = None

    def row(self, layer: int, sae) -> dict:
        cfg = self.cfg
        if layer not in self.zero:
            self.zero[layer] = zero_sums(self.objective, self.texts, layer, mask_prob=cfg.mask_prob, seed=cfg.seed,
                                         batch_size=cfg.batch_size)
        sums = splice_sums(self.objective, self.texts, layer, Reconstruct(sae, self.skip_ids), zero=self.zero[layer],
                           mask_prob=cfg.mask_prob, seed=cfg.seed, batch_size=cfg.batch_size)
        self.counts = sums.counts
        out: SpliceStats = splice_stats(sums, cfg.resamples, cfg.seed, self.level)
        return {f.name: getattr(out, f.name) for f in fields(out)}

    def block(self) -> Splice:
        return Splice(objective=self.objective.describe(self.cfg.mask_prob, self.cfg.seed), n_texts=len(self.texts),
                      scored_tokens=None if self.counts is None else int(self.counts.sum()),
                      special_tokens="edited" if self.cfg.keep_special else "left as the model made them")


def flat(est: dict[str, Estimate]) -> dict:
    """The SaeRow fields of the statistics: ``name`` and ``name_ci`` each."""
    out: dict = {}
    for name in STATISTICS:
        out[name], out[f"{name}_ci"] = est[name].value, est[name].ci
    return out


def table_rows(result: Result | dict) -> list[dict]:
    """One row per SAE (layer, seed): its statistics with their interval ends, and its seeds' MCC."""
    res = Result.from_json(result)
    agree = {a.layer: a.mcc for a in res.agreement}
    out = []
    for r in res.saes:
        row = {f.name: getattr(r, f.name) for f in fields(r) if not f.name.endswith("_ci")}
        for name in STATISTICS + SPLICED:
            ci = getattr(r, f"{name}_ci") or (None, None)
            row[f"{name}_lo"], row[f"{name}_hi"] = ci
        out.append({**row, "mcc": agree.get(r.layer)})
    return out


@style.drawing
def plot(results: list[Result], fig=None):
    """Explained variance (left) and L0 (right) of each model's first-seed SAEs by layer, band: 95% interval."""
    results = [Result.from_json(r) for r in results]
    fig = style.new_figure(fig, (7.2, 2.9))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, key, label in zip(axes, ("explained_variance", "l0"), ("explained variance (held out)", "L0")):
        for drawn in style.in_figure(results):
            layer_line(ax, drawn, key)
        ax.set_ylabel(label)
    style.legend(axes)
    return fig


def plot_frontier_of(results: list[Result], fig=None):
    """The frontier figure (:func:`analyses.sae.figures.plot_frontier`) of ``results``."""
    return figures.plot_frontier(figures.frontier([Result.from_json(r) for r in results]), fig)


def _one_panel(draw, data, fig):
    fig = style.new_figure(fig, (4.6, 3.0))
    draw(data, ax=fig.subplots())
    return fig


def plot_densities_of(results: list[Result], fig=None):
    """The firing-density histograms (:func:`analyses.sae.figures.plot_densities`) of ``results``."""
    return _one_panel(figures.plot_densities, figures.densities([Result.from_json(r) for r in results]), fig)


def plot_mcc_of(results: list[Result], fig=None):
    """MCC by layer (:func:`analyses.sae.figures.plot_mcc`) of ``results``."""
    return _one_panel(figures.plot_mcc, figures.mcc_by_layer([Result.from_json(r) for r in results]), fig)


def one_layer(cfg: Config, layer: int | None) -> Config:
    """``cfg`` with ``layers=[layer]`` where ``layer`` is given (its ``layers`` empty, or that one layer already)."""
    if layer is not None:
        if cfg.layers and list(cfg.layers) != [layer]:
            raise ProbeError(f"layer={layer} and layers={list(cfg.layers)}: give one of them (layer=l is layers=[l])")
        cfg = dataclasses.replace(cfg, layers=[layer])
    if not cfg.layers:
        raise ProbeError("no layer to train an SAE on: give layers=[l] (--layers l) or layer=l")
    return cfg


def check_config(cfg: Config) -> None:
    """Before any work: k cannot exceed a width given explicitly; a buffer holds two minibatches at least."""
    if cfg.kind in ("topk", "batchtopk") and cfg.width and cfg.k > cfg.width:
        raise ProbeError(f"--k {cfg.k} is more than --width {cfg.width}: a TopK SAE fires at most all its latents")
    if cfg.buffer_tokens and cfg.buffer_tokens < 2 * cfg.tokens_per_step:
        raise ProbeError(f"--buffer-tokens {cfg.buffer_tokens} holds fewer than two minibatches of "
                         f"{cfg.tokens_per_step} tokens (--tokens-per-step); give at least {2 * cfg.tokens_per_step}")


ANALYSIS = Analysis(
    name="sae",
    inputs=SaeInputs(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config,
    python_inputs={"layer": {"layers": []}},  # run(..., layer=l): the one layer l (layers=[l])
    figures=(Figure("sae", plot, "Sparse autoencoders on each chosen layer's token states: the share of the held-out "
                    "states' variance the SAE reconstructs (left) and the latents firing per token, L0 (right), "
                    "one line per model, band: 95% bootstrap interval over held-out sentences. At equal L0, a "
                    "higher explained variance means the layer is closer to a sparse sum of directions."),
             Figure("sae-frontier", plot_frontier_of, "The SAE frontier: explained variance (left) and loss recovered "
                    "with the SAE spliced in (right) against L0, a line per model and layer through its SAEs, error "
                    "bars: 95% bootstrap intervals over held-out sentences. Up and to the left is better."),
             Figure("sae-density", plot_densities_of, "Latents by log10 firing density on the held-out tokens, a "
                    "step line per SAE (first seed); the label counts the dead latents, which have no log.",
                    select=lambda results: [r for r in results if figures.densities([Result.from_json(r)])]),
             Figure("sae-mcc", plot_mcc_of, "Mean correlation coefficient of the seeds' decoders by layer (Hungarian "
                    "matching of |cos|), band: t interval over pairs of seeds, dots: each pair. Near 1: the layer's "
                    "dictionary is reproducible across seeds.",
                    select=lambda results: [r for r in results if figures.mcc_by_layer([Result.from_json(r)])])),
    example=("--model", "tiny-bert", "--n-sentences", "24", "--layers", "1", "--layers", "-1", "--k", "4",
             "--width", "64", "--steps", "60", "--tokens-per-step", "64", "--resamples", "50", "--seeds", "2"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line (python -m: __main__.py)
