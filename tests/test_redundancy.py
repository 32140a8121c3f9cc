"""analyses.redundancy against planted spectra (known singular values, offsets, ranks) and end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from figure_data import line_drawing

from analyses import redundancy as rd
from analyses.common import write_result
from analyses.inputs import check_window_lengths
from analyses.style import model_color
from probes.capture.activations import Activations
from probes.errors import ProbeError

REPO = Path(__file__).resolve().parent.parent

# sigma^2 sums to 100, so r_k = 0.50, 0.70, 0.80, 0.88, 0.94, 0.98, 1.00: two thresholds hit r_k exactly
SIGMA2 = np.array([50.0, 20.0, 10.0, 8.0, 6.0, 4.0, 2.0])
WANT = [5, 5, 5, 6, 6]  # p = 0.90 0.92 0.94 0.96 0.98



def renamed(res, name: str, **changes):
    """``res`` under another model name (its identity's), with ``changes`` to its other fields."""
    return dataclasses.replace(res, identity=dataclasses.replace(res.identity, model_name=name), **changes)

def orthonormal(n, r, rng, orthogonal_to_ones=False):
    A = rng.normal(size=(n, r))
    if orthogonal_to_ones:
        A -= A.mean(0)  # columns orthogonal to the all-ones vector: zero column means after U diag(s) V^T
    return np.linalg.qr(A)[0]


def planted(n=20, d=12, sigma2=SIGMA2, seed=0, centred=False):
    rng = np.random.default_rng(seed)
    U = orthonormal(n, len(sigma2), rng, orthogonal_to_ones=centred)
    V = orthonormal(d, len(sigma2), rng)
    return U @ np.diag(np.sqrt(sigma2)) @ V.T


def test_known_singular_values_give_known_k_raw_svd():
    H = planted()
    np.testing.assert_allclose(np.linalg.svd(H, compute_uv=False)[:7] ** 2, SIGMA2, rtol=1e-10)
    assert rd.components_needed(H, center=False).tolist() == WANT
    r = rd.cumulative_variance(H, center=False)
    np.testing.assert_allclose(r[:7], np.cumsum(SIGMA2) / 100, atol=1e-12)
    assert rd.components_needed(H, thresholds=(0.5, 0.51, 1.0), center=False).tolist() == [1, 2, 7]


def test_rounding_below_a_threshold_still_reaches_it():
    r = np.array([0.5, 0.9 - 1e-15, 1.0])  # 0.9 up to rounding error
    assert rd.k_from_ratio(r, [0.9]).tolist() == [2]
    assert rd.k_from_ratio(np.array([0.5, 0.9 - 1e-9, 1.0]), [0.9]).tolist() == [3]  # really below


def test_float32_input_is_done_in_float64():
    H = planted().astype(np.float32)
    assert rd.components_needed(H, thresholds=(0.88, 0.9), center=False).tolist() == [4, 5]


def test_centring_removes_a_constant_row_offset_and_raw_svd_does_not():
    H0 = planted(centred=True)
    np.testing.assert_allclose(H0.mean(0), 0, atol=1e-12)
    offset = np.random.default_rng(5).normal(size=H0.shape[1]) * 10  # the same vector added to every row
    H = H0 + offset
    assert rd.components_needed(H0, center=True).tolist() == WANT
    assert rd.components_needed(H, center=True).tolist() == WANT
    raw = rd.components_needed(H, center=False)
    assert raw.tolist() != WANT and raw[0] <= 2  # the offset is one dominant direction


def test_rank_r_needs_at_most_r_components_and_k_is_monotone():
    rng = np.random.default_rng(1)
    for r in (1, 3, 8):
        H = rng.normal(size=(40, r)) @ rng.normal(size=(r, 30))
        for center in (True, False):
            assert rd.components_needed(H, center=center).max() <= r
    H = rng.normal(size=(100, 64)) @ np.diag(np.linspace(3, 0.1, 64))
    p = np.linspace(0.05, 1.0, 40)
    k = rd.components_needed(H, thresholds=p)
    assert (np.diff(k) >= 0).all() and k[0] >= 1 and k[-1] <= 64


def test_degenerate_and_bad_input_are_clear_errors():
    with pytest.raises(ProbeError, match="all zero"):
        rd.components_needed(np.zeros((5, 3)), center=False)
    const = np.tile([0.1, 0.7, -3.3], (6, 1))
    with pytest.raises(ProbeError, match="after centring"):
        rd.components_needed(const, center=True)
    assert rd.components_needed(const, center=False).tolist() == [1] * 5
    with pytest.raises(ProbeError, match=r"\(0, 1\]"):
        rd.components_needed(planted(), thresholds=(0.9, 1.5))
    with pytest.raises(ProbeError, match="NaN"):
        rd.components_needed(np.full((3, 3), np.nan))


def window_activations(n_windows=6, n=10, d=16, rank=2, seed=0, special=(1, 1), L=2) -> Activations:
    """Each window: n non-special tokens of rank <= ``rank`` at every layer, framed by special tokens
    whose states are big random vectors (they would add many components if they were counted)."""
    rng = np.random.default_rng(seed)
    pre, post = special
    width = pre + n + post
    N = n_windows * width
    hidden = rng.normal(size=(L + 1, N, d)) * 50
    is_special = np.zeros(N, bool)
    for t in range(n_windows):
        a = t * width
        is_special[a:a + pre] = True
        is_special[a + pre + n:a + width] = True
        for lyr in range(L + 1):
            hidden[lyr, a + pre:a + pre + n] = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d))
    offsets = np.arange(0, N + 1, width)
    meta = {"model": {"name": "planted", "sentence_vector": "cls", "num_layers": L}, "key": "k",
            "n_texts": n_windows, "n_tokens": N, "truncated_texts": []}
    return Activations(meta=meta, texts=[f"w{i}" for i in range(n_windows)], tokens=[["x"] * width] * n_windows,
                       offsets=offsets, token_ids=np.zeros(N, np.int64), special=is_special,
                       hidden=hidden.astype(np.float32), sentence=hidden[:, offsets[:-1]].astype(np.float32))


def test_special_tokens_are_excluded_from_H():
    acts = window_activations(n=10, rank=2)
    n, mats = rd.window_matrices(acts, layer=2)
    assert n == 10 and all(H.shape == (10, 16) for H in mats)
    stats = rd.window_stats(acts, layer=2)
    assert stats.window == 10 and stats.n_windows == 6 and stats.max_components == 9
    assert all(t.max <= 2 for t in stats.thresholds)  # the random special rows would need many more
    assert all(t.count == 6 for t in stats.thresholds)
    assert np.asarray(stats.k).shape == (6, 5)
    assert len(stats.mean_cumulative_variance) == 10


def test_windows_of_unequal_length_are_an_error():
    acts = window_activations()
    acts.special[acts.offsets[1] + 3] = True  # window 1 now has 9 non-special tokens
    with pytest.raises(ProbeError, match="same number of non-special tokens"):
        rd.window_stats(acts, layer=1)


def test_compute_table_and_plots_on_planted_windows():
    import matplotlib
    from matplotlib.colors import to_hex

    matplotlib.use("Agg")
    short, long = window_activations(n=10, rank=2), window_activations(n=14, rank=3, seed=1)
    res = rd.compute(rd.Config(layer=-1, center=False), acts=[short, long])
    assert [w.window for w in res.windows] == [10, 14]
    assert res.layer == 2 and res.definitions["centring"].startswith("none")
    assert res.windows[1].max_components == 14
    rows = rd.table_rows(res)
    assert len(rows) == 10 and rows[0]["window"] == 10 and rows[0]["threshold"] == 0.9
    assert all(r["k_max"] <= (2 if r["window"] == 10 else 3) for r in rows)
    other = renamed(res, "other", windows=res.windows[:1])
    table = rd.markdown_table([res, rd.Result.from_json(other.to_json())])  # a saved document, read back, too
    assert "| n=10 | planted |" in table and "|  | other |" in table and "| n=14 | planted |" in table
    assert "| 90% | 92% | 94% | 96% | 98% |" in table and " ± " in table
    fig = rd.plot([res, other])
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == "n = 10 tokens"
    for ax, w in zip(fig.axes, res.windows):  # the first line of each panel: planted's k(p)
        line = ax.get_lines()[0]
        np.testing.assert_allclose(line.get_xdata(), [90, 92, 94, 96, 98])
        np.testing.assert_allclose(line.get_ydata(), [t.mean for t in w.thresholds])
        assert to_hex(line.get_color()) == model_color("planted")
    assert to_hex(fig.axes[0].get_lines()[1].get_color()) == model_color("other")
    spectrum = rd.plot_spectrum([res])
    assert len(spectrum.axes) == 2
    line = spectrum.axes[1].get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), res.windows[1].mean_cumulative_variance)
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 15))
    with pytest.raises(ProbeError, match="out of range"):
        rd.compute(rd.Config(layer=3), acts=short)


def test_result_json_round_trip(tmp_path):
    res = rd.compute(rd.Config(), acts=[window_activations(n=10, rank=2)])
    path, _ = write_result(tmp_path / "a", "redundancy", "planted", res, rd.table_rows(res))
    doc = json.loads(path.read_text())
    back = rd.Result.from_json(doc)
    assert list(doc) == ["analysis", *back.to_json(), "provenance"]
    assert back.layer == res.layer == 2 and back.thresholds == res.thresholds and back.activations == res.activations
    (got,), (want,) = back.windows, res.windows
    assert isinstance(got, rd.WindowRow) and isinstance(got.thresholds[0], rd.ThresholdK)
    assert isinstance(got.bootstrap, rd.stats.Bootstrap) and got.bootstrap == want.bootstrap
    assert got.k == want.k
    assert all(dataclasses.asdict(g) == pytest.approx(dataclasses.asdict(w), abs=1e-8)
               for g, w in zip(got.thresholds, want.thresholds))
    np.testing.assert_allclose(got.mean_cumulative_variance, want.mean_cumulative_variance, atol=1e-8)
    again, _ = write_result(tmp_path / "b", "redundancy", "planted", back, rd.table_rows(back))
    assert again.read_bytes() == path.read_bytes()
    with pytest.raises(KeyError, match="windows"):
        rd.Result.from_json({k: v for k, v in doc.items() if k != "windows"})


def test_window_longer_than_the_model_allows_is_an_error_before_extraction():
    tok = check_window_lengths("tiny-bert", [100, 510])  # 510 + [CLS] + [SEP] = 512: fits
    assert tok.n_special == 2 and tok.max_length == 512
    with pytest.raises(ProbeError, match="--window-length 511 is too long .* 513 > its limit of 512"):
        check_window_lengths("tiny-bert", [100, 511], tok)
    assert check_window_lengths("tiny-gpt2", [512]).n_special == 0  # no special tokens: all 512 fit


def test_too_long_window_on_the_command_line_is_one_line(tmp_path, capsys):
    from probes.config import run_main

    with pytest.raises(SystemExit) as done:  # as python -m runs it (tests/test_cli.py starts the real process)
        run_main(rd.main, ["--model", "tiny-bert", "--window-length", "100", "--window-length", "600", "--out",
                           str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --window-length 600 is too long for model 'tiny-bert'")
    assert "602 > its limit of 512" in lines[0]
    assert not (tmp_path / "out" / "cache").exists()  # nothing was extracted


def test_end_to_end_on_tiny_models(tmp_path, drawn, emma_excerpt):
    out = tmp_path / "out"
    book = str(emma_excerpt(20_000))  # one text of ~5,000 tokens: tokenizing the 7 books takes seconds
    rd.main(["--model", "tiny-bert", "--model", "tiny-gpt2", "--corpus", book, "--window-length", "16",
             "--window-length", "40", "--n-windows", "5", "--layer", "1", "--out", str(out)])
    res_dir = out / "results" / "redundancy"
    for model, n_special in (("tiny-bert", 2), ("tiny-gpt2", 0)):
        doc = json.loads((res_dir / f"{model}.json").read_text())
        assert doc["config"]["window_length"] == [16, 40] and doc["config"]["center"] is True
        assert doc["layer"] == 1 and doc["definitions"]["centring"].startswith("columns")
        assert [w["window"] for w in doc["windows"]] == [16, 40]
        assert [a["n_tokens"] for a in doc["activations"]] == [5 * (16 + n_special), 5 * (40 + n_special)]
        assert doc["corpus"]["windows"] == {"16": 5, "40": 5} and len(doc["corpus"]["sha256"]) == 64
        for w in doc["windows"]:
            assert all(1 <= t["min"] <= t["max"] <= w["max_components"] and t["count"] == 5
                       for t in w["thresholds"])
        assert len((res_dir / f"{model}.csv").read_text().splitlines()) == 1 + 2 * 5
    table = (res_dir / "table6.md").read_text()
    assert "| n=16 | tiny-bert |" in table and "|  | tiny-gpt2 |" in table and "| n=40 | tiny-bert |" in table
    # the figures draw the result files' numbers: a panel per window length, a line per model
    assert all((out / "figures" / f"{n}.{e}").is_file() for n in ("redundancy", "redundancy-spectrum")
               for e in ("png", "pdf"))
    k_panels, spectrum_panels = drawn["redundancy"].axes, drawn["redundancy-spectrum"].axes
    assert len(k_panels) == len(spectrum_panels) == 2
    for model in ("tiny-bert", "tiny-gpt2"):
        doc = json.loads((res_dir / f"{model}.json").read_text())
        for w, k_panel, spectrum in zip(doc["windows"], k_panels, spectrum_panels):
            assert k_panel.get_title() == spectrum.get_title() == f"n = {w['window']} tokens"
            ts = w["thresholds"]
            line_drawing(k_panel, [t["mean"] for t in ts], x=[100 * t["threshold"] for t in ts])
            line_drawing(spectrum, w["mean_cumulative_variance"])
