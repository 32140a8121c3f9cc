"""A finding of ours (not a paper's claim): how much of each layer's token states a sparse dictionary explains, and
how much of the model's loss it recovers spliced in, for the S-LSTM against its BERT- and ALBERT-style baselines,
paired by seed, at equal L0 (TopK SAEs of the same k and width for every model).

From the SAE results of the models (``<out>/results/sae/<model>.json``, one per model and seed, e.g. from
``scripts/sae_finding.py``), for each baseline, statistic (explained variance, loss recovered) and layer:

* per seed s, the difference d_s = statistic(S-LSTM seed s) - statistic(baseline seed s) of the first-seed SAEs
  (seed 0 = the plain names, seed s = ``<model>-seed<s>``; only seeds both models have are paired);
* the verdict by the suite's one rule (:func:`analyses.stats.decide`) on the claim "d > 0" (the S-LSTM's layer is
  the more sparsely explained / its dictionary recovers more loss): "holds" when every seed's d and the Student t
  interval over seeds lie above 0, "does not hold" when all lie below it, else "inconclusive" with the reason. The
  per-seed evidence is the point difference (the results keep no per-sentence values, so no paired bootstrap over
  sentences is made); the interval over seeds carries the spread of seeds and sentences both;
* over layers: every layer's verdict combined (:func:`analyses.stats.combine`), and the mean of all seeds' and
  layers' differences with a t interval over the n_seeds x n_layers values (the layers of one model are not
  independent draws, so this interval is narrower than it should be: a summary, not a test).

A statistic a model's results do not hold (loss recovered of a model with no head: not spliced) makes that
comparison "not testable" with the reason; the result says which models were spliced.

    $ python scripts/sae_finding.py --out out/sae-finding   # trains the SAEs, then this module's compute and plot
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from analyses import records, stats, style

STATISTICS = {"explained_variance": "explained variance", "loss_recovered": "loss recovered"}
CLAIM = ("{stat} of the S-LSTM's layer exceeds that of its {baseline} baseline of the same seed, with TopK SAEs of "
         "the same k and width (equal L0)")


@dataclass
class ModelLayer:
    """One model's first-seed SAE at one layer: L0, explained variance, loss recovered (None: not spliced)."""

    model: str
    seed: int
    layer: int
    l0: float | None
    explained_variance: float | None
    explained_variance_ci: list[float] | None
    loss_recovered: float | None
    loss_recovered_ci: list[float] | None


@dataclass
class Comparison:
    """The S-LSTM against one baseline on one statistic at one layer (``layer`` None: over every layer)."""

    baseline: str
    statistic: str
    layer: int | None
    seeds: list[int]
    differences: list[float]  # S-LSTM - baseline, per seed (over layers: per seed and layer)
    mean: float | None
    interval: list[float] | None  # t interval over seeds (over layers: over seeds x layers)
    verdict: str
    reason: str


@dataclass
class Finding:
    """The finding's document: its claim, the settings the SAEs were trained with, every model's numbers and the
    comparisons (per layer, then over layers)."""

    label: str
    claim: str
    target: str
    settings: dict[str, float | int | str | None]
    models: list[ModelLayer]
    comparisons: list[Comparison]
    not_spliced: list[str] = field(default_factory=list)  # models whose SAEs were not spliced (no loss recovered)

    def overall(self) -> list[Comparison]:
        """The comparisons over every layer, one per baseline and statistic."""
        return [c for c in self.comparisons if c.layer is None]


def model_layers(results: Sequence) -> list[ModelLayer]:
    """Each result's first-seed SAE per layer, as :class:`ModelLayer` rows."""
    return [ModelLayer(model=res.model_name, seed=stats.seed_of(res.model_name)[1], layer=r.layer, l0=r.l0,
                       explained_variance=r.explained_variance, explained_variance_ci=r.explained_variance_ci,
                       loss_recovered=r.loss_recovered, loss_recovered_ci=r.loss_recovered_ci)
            for res in results for r in res.first_seed()]


def _settings(results: Sequence) -> dict[str, float | int | str | None]:
    """The SAEs' kind, k and width of every result; one error if they differ (then L0 is not equal)."""
    shapes = {(r.kind, r.k, r.width) for res in results for r in res.saes}
    if len(shapes) != 1:
        from probes.errors import ProbeError

        raise ProbeError(f"the results' SAEs differ in kind, k or width ({sorted(shapes, key=str)}): the comparison "
                         "needs the same SAEs for every model")
    kind, k, width = shapes.pop()
    return {"kind": kind, "k": k, "width": width}


def compare(rows: list[ModelLayer], target: str, baseline: str, statistic: str,
            layer: int | None) -> Comparison:
    """The S-LSTM (``target``) against ``baseline`` on ``statistic`` at ``layer`` (None: every layer)."""
    def values(model: str) -> dict[tuple[int, int], float | None]:
        return {(r.seed, r.layer): getattr(r, statistic) for r in rows
                if stats.seed_of(r.model)[0] == model and (layer is None or r.layer == layer)}

    a, b = values(target), values(baseline)
    keys = sorted(set(a) & set(b))
    seeds = sorted({s for s, _ in keys})
    missing = [k for k in keys if a[k] is None or b[k] is None]
    if not keys or missing:
        why = "no seed of both models" if not keys else f"{STATISTICS[statistic]} is missing (not spliced)"
        return Comparison(baseline, statistic, layer, seeds, [], None, None, str(stats.UNTESTED), why)
    diffs = [float(a[k]) - float(b[k]) for k in keys]  # type: ignore[arg-type]
    if layer is None:
        per_layer = [compare(rows, target, baseline, statistic, lyr) for lyr in sorted({lyr for _, lyr in keys})]
        verdict, i = stats.combine([stats.Verdict(c.verdict) for c in per_layer])
        across = stats.seed_interval(diffs)
        return Comparison(baseline, statistic, None, seeds, diffs, float(np.mean(diffs)),
                          list(across) if across else None, str(verdict),
                          f"layer {per_layer[i].layer}: {per_layer[i].reason}")
    decision = stats.decide(diffs, [None] * len(diffs), claimed_sign=1)
    return Comparison(baseline, statistic, layer, seeds, diffs, decision.mean,
                      list(decision.across) if decision.across else None, str(decision.verdict), decision.reason)


def compute(results: Sequence, target: str = "slstm-small",
            baselines: Sequence[str] = ("bert-small", "albert-small"), settings: dict | None = None) -> Finding:
    """The finding from SAE results (:class:`analyses.sae.Result`) of ``target`` and ``baselines``, every seed."""
    kept = [r for r in results if stats.seed_of(r.model_name)[0] in (target, *baselines)]
    rows = model_layers(kept)
    layers = sorted({r.layer for r in rows})
    comparisons = [compare(rows, target, b, s, lyr) for b in baselines for s in STATISTICS for lyr in (*layers, None)]
    not_spliced = sorted({r.model for r in rows if r.loss_recovered is None})
    return Finding(label="a finding of ours (not a paper's claim)", claim=CLAIM, target=target,
                   settings={**_settings(kept), **(settings or {})}, models=rows, comparisons=comparisons,
                   not_spliced=not_spliced)


def write(finding: Finding, path) -> None:
    """The finding's JSON at ``path``, written atomically."""
    from probes.io import atomic_write

    atomic_write(path, (json.dumps(records.to_json(finding), indent=1, allow_nan=False) + "\n").encode())


def read(path) -> Finding:
    """The finding written at ``path`` (the records' codec: a missing key is one Malformed naming it)."""
    with open(path) as f:
        out: Finding = records.from_json(Finding, json.load(f), "finding")
    return out


# ----------------------------------------------------------------------------- drawing


@style.drawing
def plot(finding: Finding, fig=None):
    """Top: explained variance and loss recovered by layer, a line per model and seed (seed 0 solid, 1 dashed,
    2 dotted) with the seed-0 bootstrap band; bottom: the S-LSTM minus each baseline, the mean over seeds with its
    t interval over seeds (error bars) and each seed's difference (dots). Returns the figure."""
    fig = style.new_figure(fig, (7.2, 5.2))
    axes = fig.subplots(2, 2, sharex=True)
    models = list(dict.fromkeys(r.model for r in finding.models))
    colors = style.figure_colors(models)
    for col, stat in enumerate(STATISTICS):
        ax = axes[0, col]
        for model in models:
            rows = sorted((r for r in finding.models if r.model == model), key=lambda r: r.layer)
            y = [math.nan if getattr(r, stat) is None else getattr(r, stat) for r in rows]
            x = [r.layer for r in rows]
            ax.plot(x, y, marker="o", ms=2.5, lw=1, color=colors[model], label=style.display_name(model),
                    **style.seed_style(model))
            ci = np.array([getattr(r, f"{stat}_ci") or (math.nan, math.nan) for r in rows], float)
            if not stats.seed_of(model)[1]:
                ax.fill_between(x, ci[:, 0], ci[:, 1], color=colors[model], alpha=0.15, lw=0)
        ax.set_ylabel(STATISTICS[stat])
        ax = axes[1, col]
        ax.axhline(0, color="0.5", lw=0.6)
        per_layer = [c for c in finding.comparisons
                     if c.statistic == stat and c.layer is not None and c.mean is not None]
        baselines = list(dict.fromkeys(c.baseline for c in per_layer))
        for j, base in enumerate(baselines):
            cs = [c for c in per_layer if c.baseline == base]
            xs = np.array([c.layer for c in cs], float) + (j - (len(baselines) - 1) / 2) * 0.12
            mean = np.array([c.mean for c in cs], float)
            iv = np.array([c.interval or (math.nan, math.nan) for c in cs], float)
            ax.errorbar(xs, mean, yerr=np.abs(np.stack([mean - iv[:, 0], iv[:, 1] - mean])), fmt="s", ms=3,
                        capsize=2, color=colors.get(base, style.model_color(base)),
                        label=f"S-LSTM - {style.display_name(base)}")
            for xi, c in zip(xs, cs):
                ax.plot([xi] * len(c.differences), c.differences, ".", ms=2, color=colors.get(base, "0.3"))
        ax.set_ylabel(f"difference in {STATISTICS[stat]}")
        ax.set_xlabel("layer l (0 = embeddings)")
        ax.set_xticks(sorted({r.layer for r in finding.models}))
    style.legend(axes[0])
    style.legend(axes[1])
    return fig
