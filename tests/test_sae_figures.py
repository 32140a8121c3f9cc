"""The SAE figures draw the numbers of the results they are given: the frontier (explained variance and loss
recovered against L0 with intervals), the firing-density histograms, MCC by layer; and the result keeps the
histogram and each pair of seeds' MCC through its JSON codec."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from figure_data import line_drawing, numbers
from test_sae import synthetic_acts

from analyses import sae as sae_analysis
from analyses.sae import figures

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(3, 600, 8)) + 1.0  # (L+1, N, d)
    cfg = sae_analysis.Config(layers=[1, 2], steps=30, width=24, k=3, seeds=3, save=False, resamples=30)
    with pytest.warns(UserWarning, match="held-out sentences"):
        return sae_analysis.compute(cfg, acts=synthetic_acts(hidden, 40))


def test_the_histogram_counts_every_live_latent_once_and_the_dead_apart():
    counts, dead = figures.log10_histogram(np.array([0, 0, 1e-9, 1e-6, 0.003, 0.5, 1.0]))
    assert dead == 2 and sum(counts) == 5 and counts[0] == 2 and counts[-1] == 2
    assert counts[int((np.log10(0.003) + 6) // 0.5)] == 1


def test_each_sae_records_its_histogram_and_each_layer_its_pairs(result):
    for row in result.saes:
        assert row.density_log10_counts is not None and sum(row.density_log10_counts) + row.dead == row.width
    for a in result.agreement:
        assert a.pairs is not None and len(a.pairs) == 3 and np.isclose(np.mean(a.pairs), a.mcc)
    back = sae_analysis.Result.from_json(result.to_json())
    assert back.saes[0].density_log10_counts == result.saes[0].density_log10_counts
    assert back.agreement[1].pairs == result.agreement[1].pairs


def test_the_frontier_draws_each_layers_explained_variance_and_loss_recovered_at_its_l0(result):
    data = figures.frontier([result])
    assert [(p.layer, p.seed) for p in data.points] == [(r.layer, r.seed) for r in result.saes]
    curves = data.curves()
    assert [(m, layer, len(pts)) for m, layer, pts in curves] == [("synthetic", 1, 1), ("synthetic", 2, 1)]
    fig = figures.plot_frontier(data)
    ev, lr = fig.axes[:2]
    for _, _, pts in curves:
        line_drawing(ev, [p.explained_variance for p in pts], x=[p.l0 for p in pts])
        line_drawing(lr, numbers([p.loss_recovered for p in pts]), x=[p.l0 for p in pts])  # not spliced: NaN
    first = result.first_seed()[0]
    bars = [c for c in ev.collections if len(c.get_segments()) and c.get_segments()[0][0][0] == first.l0]
    assert any(np.allclose(sorted(s[:, 1] for s in c.get_segments())[0], first.explained_variance_ci)
               for c in bars for s in [c.get_segments()[0]] if s[0, 0] == s[1, 0])


def test_the_density_plot_draws_each_first_seed_histogram(result):
    data = figures.densities([result])
    assert len(data) == len(result.saes)
    ax = figures.plot_densities(data)
    drawn = [np.asarray(p.get_data().values) for p in ax.patches]
    firsts = [h for h in data if h.seed == 0]
    assert len(drawn) == len(firsts) and all(np.array_equal(d, h.counts) for d, h in zip(drawn, firsts))


def test_mcc_by_layer_draws_the_mean_over_pairs_with_its_interval(result):
    data = figures.mcc_by_layer([result])
    assert [m.layer for m in data] == [1, 2] and all(m.ci is not None and m.ci[0] <= m.mcc <= m.ci[1] for m in data)
    ax = figures.plot_mcc(data)
    line_drawing(ax, [a.mcc for a in result.agreement], x=[1, 2])


def test_the_analysis_draws_its_figures_from_results(result):
    for figure in sae_analysis.ANALYSIS.figures:
        kept = figure.select([result]) if figure.select else [result]
        assert kept, figure.name
        assert figure.render(kept).axes, figure.name
