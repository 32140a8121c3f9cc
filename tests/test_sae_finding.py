"""The SAE finding's comparison: paired by seed, the verdict of the suite's one rule per layer and over layers,
"not testable" where a model was not spliced, its document read back as written, its figure drawing the numbers."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
from figure_data import line_drawing

from analyses.sae import finding
from probes.errors import ProbeError

matplotlib.use("Agg")


def fake(name: str, ev: dict[int, float], lr: dict[int, float | None], k: int = 16, width: int = 1024):
    rows = [SimpleNamespace(layer=layer, seed=0, kind="topk", k=k, width=width, l0=float(k),
                            explained_variance=v, explained_variance_ci=[v - 0.01, v + 0.01],
                            loss_recovered=lr[layer], loss_recovered_ci=None if lr[layer] is None else
                            [lr[layer] - 0.05, lr[layer] + 0.05]) for layer, v in ev.items()]
    return SimpleNamespace(model_name=name, saes=rows, first_seed=lambda: rows)


def planted(gap: float, spliced: bool = True):
    """Three seeds of slstm-small, bert-small, albert-small at layers 1, 2: the S-LSTM's explained variance is
    ``gap`` above bert's (seed noise 0.01), albert's equal to the S-LSTM's but for +-0.02 by seed."""
    rng = np.random.default_rng(0)
    out = []
    for s, suffix in enumerate(("", "-seed1", "-seed2")):
        base = {1: 0.6 + 0.01 * s, 2: 0.7 - 0.01 * s}
        lr = {layer: (0.8 if spliced else None) for layer in base}
        out.append(fake("slstm-small" + suffix, {k: v + gap + rng.normal(0, 0.01) for k, v in base.items()}, lr))
        out.append(fake("bert-small" + suffix, base, {layer: 0.7 for layer in base}))
        out.append(fake("albert-small" + suffix, {k: v + gap + (-0.02, 0.02, 0.0)[s] for k, v in base.items()},
                        {layer: 0.7 for layer in base}))
    return out


def comparison(found, baseline, stat, layer):
    return next(c for c in found.comparisons if (c.baseline, c.statistic, c.layer) == (baseline, stat, layer))


@pytest.mark.parametrize("gap, verdict", [(0.1, "holds"), (-0.1, "does not hold")])
def test_a_planted_gap_gives_its_verdict_paired_by_seed(gap, verdict):
    found = finding.compute(planted(gap))
    for layer in (1, 2, None):
        c = comparison(found, "bert-small", "explained_variance", layer)
        assert c.verdict == verdict and c.seeds == [0, 1, 2], c
        assert c.interval is not None and c.interval[0] <= c.mean <= c.interval[1]
        assert np.isclose(c.mean, gap, atol=0.02)
    assert len(comparison(found, "bert-small", "explained_variance", None).differences) == 6  # 3 seeds x 2 layers
    c = comparison(found, "albert-small", "explained_variance", 1)
    assert c.verdict == "inconclusive" and c.reason == "seeds disagree"
    c = comparison(found, "bert-small", "loss_recovered", None)
    assert c.verdict == "holds" and np.allclose(c.differences, 0.1)  # 0.8 - 0.7 at every seed and layer: t interval 0
    assert found.label.startswith("a finding of ours") and found.settings == {"kind": "topk", "k": 16, "width": 1024}


def test_a_model_not_spliced_makes_loss_recovered_not_testable(tmp_path):
    found = finding.compute(planted(0.1, spliced=False))
    c = comparison(found, "bert-small", "loss_recovered", 2)
    assert c.verdict == "not testable" and "not spliced" in c.reason
    assert comparison(found, "bert-small", "explained_variance", 2).verdict == "holds"
    assert found.not_spliced == ["slstm-small", "slstm-small-seed1", "slstm-small-seed2"]
    finding.write(found, tmp_path / "f.json")
    assert finding.read(tmp_path / "f.json") == found


def test_saes_of_different_sizes_are_refused():
    results = planted(0.1)
    results[1] = fake("bert-small", {1: 0.5, 2: 0.5}, {1: 0.5, 2: 0.5}, k=32)
    with pytest.raises(ProbeError, match="differ in kind, k or width"):
        finding.compute(results)


def test_the_figure_draws_every_model_and_the_mean_differences():
    found = finding.compute(planted(0.1))
    fig = finding.plot(found)
    ev_ax = fig.axes[0]
    for m in ("slstm-small", "bert-small-seed2"):
        rows = sorted((r for r in found.models if r.model == m), key=lambda r: r.layer)
        line_drawing(ev_ax, [r.explained_variance for r in rows], x=[r.layer for r in rows])
    diff_ax = fig.axes[2]
    means = [comparison(found, "bert-small", "explained_variance", layer).mean for layer in (1, 2)]
    assert any(np.allclose(line.get_ydata(), means) for line in diff_ax.get_lines())
