"""analyses.speed: the slope fit and crossover on synthetic times, and the CLI end to end on tiny models."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

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
    assert c["from_length"] == 1024 and not c["faster_everywhere"]
    assert c["interpolated"] == pytest.approx(1000, rel=1e-9)  # exact: log-ratio is linear in log n
    assert speed.crossover(N, [0.5 * t for t in ref], ref)["faster_everywhere"]
    assert speed.crossover(N, [2 * t for t in ref], ref)["from_length"] is None
    # faster in the middle, slower again at the end: no lasting crossover
    assert speed.crossover(N[:3], [1, 0.5, 3], [1.5, 1, 2])["from_length"] is None
    # must stay faster: a dip below the reference early on does not count
    assert speed.crossover(N[:4], [0.5, 2, 1, 1], [1, 1, 2, 2])["from_length"] == 256


def test_cli_writes_results_and_figures(tmp_path, tiny_slstm_registry, capsys):
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
    for fig in ("speed.png", "speed.pdf", "speed-slopes.png", "speed-slopes.pdf"):
        assert (out / "figures" / fig).stat().st_size > 0
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
    from analyses import figures

    assert any(p.name == "speed.png" for p in figures.redraw(str(out)))


def test_bad_reference_is_an_error():
    with pytest.raises(ProbeError, match="--reference"):
        speed.compute(speed.Config(model=["slstm", "bert"], reference="gpt2", lengths=[8], width=8, layers=1))
