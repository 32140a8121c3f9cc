"""analyses.effect: the paired effect of an edit on a headline number, its interval, its control, its cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analyses import anisotropy, effect, perplexity
from probes.errors import ProbeError
from probes.intervention import AddVector, Erase, Function, Intervention, ProjectOut

TEXTS = [f"Sentence number {i} says something about the {w} today." for i, w in
         enumerate(["weather", "sea", "cat", "market", "river", "city", "garden", "train", "book", "song", "road",
                    "house", "lamp", "chair", "door", "wall", "pen", "cup", "boat", "cloud"])]
COSINE: dict[str, Any] = {"n_tokens": 40, "cache_dir": None}
WIDTH = 32  # tiny-bert's and tiny-gpt2's states


# ----------------------------------------------------------------------------- the paired bootstrap (numpy only)


def test_the_paired_interval_covers_the_true_difference_in_at_least_93_percent_of_200_draws():
    # 200 seeded draws of 30 units (here the interval covers 95%; the plain percentile interval, not expanded, 94%).
    # Over 1,500 draws it covered 94.8%: a share of 200 draws has a standard error of about 1.5 points
    rng = np.random.default_rng(0)
    delta, n, covered, widths = 0.3, 30, 0, []
    for draw in range(200):
        level = rng.gamma(2.0, 1.0, n) * 3  # each unit's own level: shared by both runs, far larger than the effect
        clean = level + rng.normal(0, 0.5, n)
        edited = level + delta + rng.normal(0, 0.5, n)
        e = effect.paired_difference(clean, edited, seed=draw)
        covered += e.covers(delta)
        widths.append(e.high - e.low)
        assert e.value == pytest.approx(np.mean(edited - clean))
    assert covered / 200 >= 0.93
    # paired: the units' levels cancel, so the interval is far narrower than the spread of the levels allows
    assert np.median(widths) < 0.3 * 2 * 1.96 * (3 * np.sqrt(2.0)) / np.sqrt(n)


def test_an_unchanged_run_has_a_difference_of_exactly_zero_and_a_zero_interval():
    x = np.random.default_rng(0).normal(size=25)
    e = effect.paired_difference(x, x.copy())
    assert (e.value, e.low, e.high) == (0.0, 0.0, 0.0)


def test_paired_values_must_be_one_per_unit_in_both_runs():
    with pytest.raises(ProbeError, match="one per unit"):
        effect.paired_difference(np.ones(4), np.ones(5))


# ----------------------------------------------------------------------------- the control


def test_the_random_control_matches_the_edits_rank_or_norm_and_is_seeded():
    basis = np.random.default_rng(0).normal(size=(3, WIDTH))
    iv = Intervention(1, ProjectOut(basis))
    c, kind = effect.random_control(iv, seed=5)
    assert c.layer == 1 and isinstance(c.edit, Erase) and c.edit.rank == 3 and "rank" in kind
    again, _ = effect.random_control(iv, seed=5)
    assert again.identity() == c.identity() and effect.random_control(iv, seed=6)[0].identity() != c.identity()
    add = Intervention(-1, AddVector(np.arange(WIDTH, dtype=float), scale=-2.0))
    c, kind = effect.random_control(add, seed=0)
    assert np.linalg.norm(c.edit.scale * c.edit.vector) == pytest.approx(2 * np.linalg.norm(np.arange(WIDTH)))
    assert "norm" in kind and c.layer == -1
    with pytest.raises(ProbeError, match="has neither"):
        effect.random_control(Intervention(1, Function(lambda h: h)))


# ----------------------------------------------------------------------------- the call on tiny models


def counted(monkeypatch, module, name: str, calls: dict[str, int]) -> None:
    """``module.name`` replaced by itself, counting its calls into ``calls[name]``."""
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls[name] = calls.get(name, 0) + 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def test_an_edit_that_changes_nothing_has_a_difference_of_exactly_zero():
    e = effect.run("anisotropy", "tiny-bert", TEXTS, intervention=Intervention(-1, AddVector(np.zeros(WIDTH))),
                   control="random", **COSINE)
    assert (e.difference.value, e.difference.low, e.difference.high) == (0.0, 0.0, 0.0)
    assert e.edited.value == e.clean.value and e.control_difference.value == 0.0  # a vector of norm 0: no edit
    assert e.edit.startswith("+add@-1_") and e.n_units == len(TEXTS) and e.unit == "sentence"


def test_a_planted_effect_lies_in_its_interval_and_is_what_separate_runs_give():
    # a vector of norm 1e4 added to every last-layer state makes them all point along it: the edited mean token
    # cosine is 1, so the planted difference is 1 - the clean value
    v = np.random.default_rng(0).normal(size=WIDTH)
    iv = Intervention(-1, AddVector(1e4 * v / np.linalg.norm(v)))
    e = effect.run("anisotropy", "tiny-bert", TEXTS, intervention=iv, **COSINE)
    assert e.edited.value == pytest.approx(1.0, abs=1e-6)
    assert e.difference.covers(1.0 - e.clean.value) and e.difference.low > 0
    assert e.control is None and e.beyond_control is None
    alone = anisotropy.run("tiny-bert", TEXTS, intervention=iv, **COSINE)
    assert e.edited.value == alone.last_layer_mean("token").point
    assert e.runs[1].model_name == alone.model_name == "tiny-bert" + e.edit


def test_perplexity_effect_against_a_random_control_pairs_blocks(monkeypatch):
    import probes.models.lm as lm_module

    calls: dict[str, int] = {}
    counted(monkeypatch, perplexity, "windowed_nll", calls)  # one call per document: one forward run of each
    counted(monkeypatch, lm_module, "load_lm", calls)
    v = np.random.default_rng(1).normal(size=WIDTH)
    iv = Intervention(-1, AddVector(3 * v / np.linalg.norm(v)))
    e = effect.run("perplexity", "tiny-gpt2", TEXTS, intervention=iv, control="random", overlap=[0], cache_dir=None)
    assert calls == {"windowed_nll": 3 * len(TEXTS), "load_lm": 1}  # three runs (clean, edited, control), one model
    assert e.unit == "block" and e.n_units >= 20 and e.control_kind == "random vector of the same norm"
    clean = e.runs[0].token_perplexity(*e.runs[0].measured()[0])
    edited = e.runs[1].token_perplexity(*e.runs[1].measured()[0])
    assert (e.clean.value, e.edited.value) == (clean.point, edited.point)
    assert e.difference.value == pytest.approx(edited.point - clean.point)
    assert e.beyond_control.value == pytest.approx(e.edited.value - e.control.value)
    for est in (e.clean, e.edited, e.control, e.difference, e.control_difference, e.beyond_control):
        assert est.covers(est.value)
    frame = e.to_frame()
    assert list(frame["run"]) == ["clean", "edited", "edited - clean", "control", "control - clean",
                                  "edited - control"]
    assert frame["value"].tolist()[2] == e.difference.value and "+add@-1_" in repr(e)


def test_the_effect_costs_two_extractions_and_three_with_a_control(monkeypatch):
    import probes.capture.extract as extract_module

    calls: dict[str, int] = {}
    counted(monkeypatch, extract_module, "extract", calls)
    iv = Intervention(1, ProjectOut(np.eye(WIDTH)[:2]))
    effect.run("anisotropy", "tiny-bert", TEXTS, intervention=iv, **COSINE)
    assert calls == {"extract": 2}
    calls.clear()
    e = effect.run("anisotropy", "tiny-bert", TEXTS, intervention=iv, control="random",
                   statistic="sentence cosine, last layer", **COSINE)
    assert calls == {"extract": 3} and e.statistic == "sentence cosine, last layer"
    assert e.control_edit.startswith("+erase@1_")


def test_the_figure_draws_each_run_at_its_value():
    from matplotlib.collections import LineCollection

    e = effect.EffectResult("anisotropy", "token cosine, last layer", "m", "+add@1_00000000", "add at layer 1",
                            "+add@1_11111111", "random vector of the same norm", "sentence", 20, 100, 0, 0.95, 0.96,
                            effect.Estimate(0.4, 0.35, 0.45), effect.Estimate(0.6, 0.55, 0.65),
                            effect.Estimate(0.2, 0.15, 0.25), effect.Estimate(0.41, 0.36, 0.46),
                            effect.Estimate(0.01, -0.02, 0.04), effect.Estimate(0.19, 0.14, 0.24))
    ax = e.plot()
    ys = [line.get_ydata()[0] for line in ax.lines if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
    assert ys == [0.4, 0.6, 0.41]
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert [seg[0][:, 1].tolist() for seg in (b.get_segments() for b in bars)] == [[0.35, 0.45], [0.55, 0.65],
                                                                                   [0.36, 0.46]]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["clean", "edited", "control"]


def test_what_the_call_refuses_is_one_line():
    iv = Intervention(1, AddVector(np.ones(WIDTH)))
    for kwargs, words in [({"analysis": "transitions"}, "effect supports perplexity, anisotropy"),
                          ({"intervention": None}, "needs intervention="),
                          ({"control": "shuffled"}, "control= takes 'random'"),
                          ({"intervention": Intervention(1, Function(lambda h: h)), "control": "random"},
                           "has neither"),
                          ({"statistic": "nothing"}, "no headline number 'nothing'")]:
        call = {"analysis": "anisotropy", "intervention": iv, **kwargs}
        with pytest.raises(ProbeError, match=words) as err:
            effect.run(call.pop("analysis"), "tiny-bert", TEXTS, **call, **COSINE)
        assert "\n" not in str(err.value)
