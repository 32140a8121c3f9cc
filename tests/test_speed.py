"""analyses.speed: the slope fit and crossover on synthetic times, and the CLI end to end on tiny models."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from figure_data import line_drawing

from analyses import speed
from analyses.common import run_main
from probes.errors import ProbeError

N = [64, 128, 256, 512, 1024, 2048, 4096, 8192]


@pytest.mark.parametrize("power", [1, 2, 1.5])
def test_slope_of_power_laws(power):
    t = [3e-4 * n**power for n in N]
    b, a = speed.loglog_slope(N, t)
    assert b == pytest.approx(power, abs=1e-9) and a == pytest.approx(math.log(3e-4), abs=1e-9)
    np.testing.assert_allclose(speed.local_slopes(N, t), power, atol=1e-9)


def test_slope_ignores_what_the_fit_range_excludes():
    t = [0.5 + 1e-6 * n for n in N]  # overhead-dominated at the short end, linear at the long end
    assert speed.loglog_slope(N[-2:], t[-2:])[0] > speed.loglog_slope(N[:2], t[:2])[0]


def test_crossover():
    ref = [1e-6 * n**2 for n in N]  # quadratic reference
    model = [1e-3 * n for n in N]  # linear: equal at n = 1000
    c = speed.crossover(N, model, ref)
    assert c.from_length == 1024 and not c.faster_everywhere
    assert c.interpolated == pytest.approx(1000, rel=1e-9)  # exact: log-ratio is linear in log n
    assert speed.crossover(N, [0.5 * t for t in ref], ref).faster_everywhere
    assert speed.crossover(N, [2 * t for t in ref], ref).from_length is None
    # faster in the middle, slower again at the end: no lasting crossover
    assert speed.crossover(N[:3], [1, 0.5, 3], [1.5, 1, 2]).from_length is None
    # must stay faster: a dip below the reference early on does not count
    assert speed.crossover(N[:4], [0.5, 2, 1, 1], [1, 1, 2, 2]).from_length == 256


@pytest.mark.slow
def test_cli_writes_results_and_figures(tmp_path, tiny_slstm_registry, capsys, drawn):
    tiny_slstm_registry(num_layers=1, max_positions=20)
    out = tmp_path / "out"
    argv = ["--model", "slstm", "--model", "tiny-slstm", "--model", "bert", "--lengths", "8", "--lengths", "16",
            "--lengths", "32", "--repeats", "2", "--width", "16", "--layers", "2", "--heads", "2",
            "--intermediate", "32", "--vocab-size", "100", "--min-time", "0.002", "--fit-min-length", "8",
            "--out", str(out)]
    run_main(speed.main, argv)
    printed = capsys.readouterr().out
    assert "slstm: slope" in printed and "figures:" in printed
    for name in ("slstm", "tiny-slstm", "bert"):
        assert (out / "results" / "speed" / f"{name}.json").exists()
        assert (out / "results" / "speed" / f"{name}.csv").read_text().startswith("length,median_s")
    assert all((out / "figures" / f).is_file() for f in ("speed.png", "speed.pdf", "speed-slopes.png",
                                                         "speed-slopes.pdf"))
    # the figures draw the result files' numbers: time (left) and speed-up (right) by length, the local slopes
    times, speedups = drawn["speed"].axes[:2]
    (slopes,) = drawn["speed-slopes"].axes
    for name in ("slstm", "tiny-slstm", "bert"):
        saved = speed.Result.from_json(json.loads((out / "results" / "speed" / f"{name}.json").read_text()))
        timed = saved.timed_rows()
        lengths = [r.length for r in timed]
        line_drawing(times, [r.median_s for r in timed], x=lengths)
        if name != "bert":  # the reference is not compared with itself
            line_drawing(speedups, [r.speedup_vs_reference for r in timed], x=lengths)
        line_drawing(slopes, saved.local_slopes)
    res = json.loads((out / "results" / "speed" / "slstm.json").read_text())
    assert res["reference"] == "bert" and res["model"]["hidden_size"] == 16 and res["model"]["num_layers"] == 2
    assert [r["length"] for r in res["rows"]] == [8, 16, 32]
    assert all(r["median_s"] > 0 and len(r["samples_s"]) == 2 for r in res["rows"])
    assert res["slope"] is not None and res["fit_lengths"] == [8, 16, 32]
    assert set(res["crossover"]) >= {"from_length", "interpolated", "faster_everywhere"}
    ref = json.loads((out / "results" / "speed" / "bert.json").read_text())
    assert ref["crossover"] is None and all(r["speedup_vs_reference"] == 1.0 for r in ref["rows"])
    bert_max = ref["model"]["max_position_embeddings"]
    assert bert_max == 32  # positions sized for the longest length
    reg_res = json.loads((out / "results" / "speed" / "tiny-slstm.json").read_text())
    assert "skipped" in reg_res["rows"][-1] and reg_res["rows"][-1]["length"] == 32  # beyond its 20 positions
    # figures redraw from the saved results alone
    from analyses.summary import figures

    assert any(p.name == "speed.png" for p in figures.redraw(str(out)))


def test_bad_reference_is_an_error():
    with pytest.raises(ProbeError, match="--reference"):
        speed.check_config(speed.Config(model=["slstm", "bert"], reference="gpt2", lengths=[8], width=8, layers=1))
    cfg = speed.Config(model=["slstm", "bert"], reference="gpt2", lengths=[8], width=8, layers=1)
    with pytest.raises(ProbeError, match="--reference"):
        speed.compute(cfg, **speed.ANALYSIS.inputs.load(("slstm", "bert"), cfg))


def fake_timings(monkeypatch):
    """Deterministic timings: model i takes 1e-6 * n^(1 + 0.7 i) s; slstm skips the longest length."""

    def time_models(runners, cfg, progress=True):
        out = {}
        for i, r in enumerate(runners):
            out[r.name] = {n: {"samples": [1e-6 * n ** (1 + 0.7 * i) * (1 + 0.01 * k) for k in range(cfg.repeats)],
                               "loops": 1} for n in cfg.lengths}
            if r.name == "slstm":
                out[r.name][max(cfg.lengths)] = {"skipped": "longer than the model's limit"}
        return out

    monkeypatch.setattr(speed, "time_models", time_models)
    monkeypatch.setattr(speed, "machine", lambda: {"platform": "fake"})
    cfg = speed.Config(model=["slstm", "bert"], lengths=[8, 16, 32, 64], repeats=3, width=8, layers=1, heads=2,
                       intermediate=16, vocab_size=50, fit_min_length=8)
    return speed.compute(cfg, **speed.ANALYSIS.inputs.load(tuple(cfg.model), cfg), progress=False)


def test_result_json_round_trip(tmp_path, monkeypatch):
    from analyses.common import write_result

    results = fake_timings(monkeypatch)
    for name, res in results.items():
        path, _ = write_result(tmp_path / "a", "speed", name, res, speed.table_rows(res))
        doc = json.loads(path.read_text())
        back = speed.Result.from_json(doc)
        assert list(doc) == ["analysis", *back.to_json(), "provenance"]
        assert back.slope == pytest.approx(res.slope, abs=1e-8) and back.fit_lengths == res.fit_lengths
        assert back.crossover == res.crossover
        assert [r.length for r in back.timed_rows()] == [r.length for r in res.timed_rows()]
        again, _ = write_result(tmp_path / "b", "speed", name, back, speed.table_rows(back))
        assert again.read_bytes() == path.read_bytes()
    slstm, bert = results["slstm"], results["bert"]
    assert [r.length for r in slstm.timed_rows()] == [8, 16, 32] and slstm.rows[-1].skipped
    assert slstm.to_json()["rows"][-1] == {"length": 64, "skipped": "longer than the model's limit"}  # as saved
    assert slstm.slope == pytest.approx(1.0) and bert.slope == pytest.approx(1.7)  # the planted powers
    assert slstm.crossover is not None and slstm.crossover.faster_everywhere and bert.crossover is None
    first, *_, skipped = speed.table_rows(slstm)
    assert skipped == {"length": 64, **{k: None for k in first if k != "length"}}


def test_plots_draw_the_timings_in_the_model_colours(monkeypatch):
    import matplotlib
    from matplotlib.colors import to_hex

    from analyses.style import model_color

    matplotlib.use("Agg")
    results = fake_timings(monkeypatch)
    slstm, bert = results["slstm"], results["bert"]
    fig = speed.plot([slstm, speed.Result.from_json(bert.to_json())])  # a saved document, read back, draws too
    time_ax, speedup_ax = fig.axes
    lines = {ln.get_label(): ln for ln in time_ax.get_lines()}
    measured = lines["slstm (slope 1.00)"]
    np.testing.assert_array_equal(measured.get_xdata(), [8, 16, 32])
    np.testing.assert_allclose(measured.get_ydata(), [r.median_s for r in slstm.timed_rows()])
    assert to_hex(measured.get_color()) == model_color("slstm")
    assert to_hex(lines["bert (slope 1.70)"].get_color()) == model_color("bert")
    (ratio,) = [ln for ln in speedup_ax.get_lines() if ln.get_label() == "slstm vs bert"]
    np.testing.assert_allclose(ratio.get_ydata(), [r.speedup_vs_reference for r in slstm.timed_rows()])
    assert any(list(ln.get_xdata()) == [8.0, 8.0] for ln in speedup_ax.get_lines())  # slstm's crossover at 8
    assert time_ax.get_ylabel() == "time per forward pass (s)"
    slopes = speed.plot_slopes([slstm, bert]).axes[0].get_lines()
    np.testing.assert_allclose(slopes[0].get_ydata(), slstm.local_slopes)
    np.testing.assert_allclose(slopes[1].get_ydata(), bert.local_slopes)
    assert [to_hex(ln.get_color()) for ln in slopes[:2]] == [model_color("slstm"), model_color("bert")]
