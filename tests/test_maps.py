"""analyses.maps against planted maps (identity, previous token, uniform, causal) and end to end on
tiny-bert, tiny-gpt2 and tiny-convbert.

Sign convention under test: offset d = i - j for query i (row) and key j (column); d = +1 is the
previous token, and a causal model has no mass at d < 0.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from figure_data import line_drawing

from analyses import maps as mp
from analyses.data import sentence_activations
from analyses.summary import figures
from probes.capture.activations import Activations
from probes.models.slstm import GATES

W = 5


def planted(rows: np.ndarray, L: int = 2, K: int = 3) -> np.ndarray:
    """(n, n) -> (L, K, n, n): the same map in every layer and head."""
    return np.broadcast_to(rows, (L, K, *rows.shape)).copy()


def test_identity_map_is_fully_local():
    n = 9
    M = planted(np.eye(n))
    np.testing.assert_allclose(mp.local_share(M, 0), 1.0)
    np.testing.assert_allclose(mp.local_share(M, 2), 1.0)
    prof = mp.offset_profile(M, W)
    assert prof.shape == (2, 2 * W + 1)
    np.testing.assert_allclose(prof[:, W], 1.0)  # column W is offset 0
    np.testing.assert_allclose(np.delete(prof, W, axis=1), 0.0)
    np.testing.assert_allclose(mp.head_layer_mean(M), np.eye(n))


def test_previous_token_map_puts_all_mass_at_offset_plus_one():
    n = 8
    prev = np.eye(n, k=-1)  # row i has its weight on column i - 1; row 0 has no previous token
    prof = mp.offset_profile(planted(prev), W)
    offsets = np.arange(-W, W + 1)
    np.testing.assert_allclose(prof[:, offsets == 1], (n - 1) / n)  # every row with a previous token
    np.testing.assert_allclose(prof[:, offsets != 1], 0.0)
    np.testing.assert_allclose(mp.local_share(planted(prev), 0), 0.0)
    np.testing.assert_allclose(mp.local_share(planted(prev), 1), (n - 1) / n)
    nxt = np.eye(n, k=1)  # the next token is offset -1
    assert mp.offset_profile(planted(nxt), W)[0, W - 1] == pytest.approx((n - 1) / n)


def test_uniform_map_gives_the_known_shares():
    n, w = 15, 2
    M = planted(np.full((n, n), 1 / n))
    rows = mp.row_local_mass(M, w)  # (L, K, n)
    np.testing.assert_allclose(rows[..., w:n - w], (2 * w + 1) / n)  # interior: 2w + 1 keys in the window
    np.testing.assert_allclose(rows[..., 0], (w + 1) / n)  # the first row has no keys to its left
    expected = np.mean([(min(i + w, n - 1) - max(i - w, 0) + 1) / n for i in range(n)])
    np.testing.assert_allclose(mp.local_share(M, w), expected)
    prof = mp.offset_profile(M, W)[0]
    np.testing.assert_allclose(prof, [(n - abs(d)) / n**2 for d in range(-W, W + 1)])  # n - |d| pairs
    assert mp.offset_profile(M, n + 3)[0].sum() == pytest.approx(1.0)  # a wide window sees every pair


def test_causal_map_has_no_mass_at_negative_offsets():
    n = 10
    causal = np.tril(np.ones((n, n)))
    causal /= causal.sum(1, keepdims=True)
    prof = mp.offset_profile(planted(causal), n)
    assert np.all(prof[:, :n] == 0) and prof[:, n:].sum(1) == pytest.approx(1.0)


def test_dropping_special_tokens_renormalises_rows():
    n = 6
    M = np.zeros((n, n))
    M[:, 0] = 0.5  # half of every row on [CLS]
    M[np.arange(n), np.arange(n)] += 0.5  # half on the token itself
    keep = np.array([False, True, True, True, True, False])
    sub = mp.keep_tokens(planted(M), keep)
    assert sub.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(sub[0, 0], np.eye(4))  # renormalised: all mass on itself
    raw = mp.keep_tokens(planted(M), keep, renormalise=False)
    np.testing.assert_allclose(raw.sum(-1), 0.5)


def planted_activations(lengths=(6, 10), L=2, H=3) -> Activations:
    """Texts [CLS] w ... w [SEP]; every row puts 0.5 on [CLS] and 0.5 on itself ([CLS]: 1 on itself)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    special = np.concatenate([[True] + [False] * (n - 2) + [True] for n in lengths])
    att, att_off = [], [0]
    for n in lengths:
        m = np.zeros((n, n))
        m[:, 0] = 0.5
        m[np.arange(n), np.arange(n)] += 0.5
        att.append(planted(m, L, H).ravel())
        att_off.append(att_off[-1] + L * H * n * n)
    N, d = int(offsets[-1]), 4
    tokens = [["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"] for n in lengths]
    meta = {"model": {"name": "planted", "sentence_vector": "cls"}, "key": "k", "n_texts": len(lengths),
            "n_tokens": N, "truncated_texts": [], "attentions": True,
            "maps": {"attention": {"layers": L, "k": H, "token_axes": 2, "description": "planted"}}}
    return Activations(meta=meta, texts=[f"text {i}" for i in range(len(lengths))], tokens=tokens,
                       offsets=offsets, token_ids=np.arange(N), special=special,
                       hidden=np.zeros((L + 1, N, d), np.float32), sentence=np.zeros((L + 1, len(lengths), d)),
                       maps={"attention": np.concatenate(att).astype(np.float32)},
                       map_offsets={"attention": np.array(att_off)})


def test_compute_on_planted_activations_weights_every_query_row_once():
    acts = planted_activations()
    res = mp.compute(mp.Config(local_radius=0, max_offset=W, examples=2), acts=acts)
    a = res.maps["attention"]
    assert res.maps_captured == ["attention"]
    assert a.n_queries == 4 + 8 and a.n_texts == 2
    np.testing.assert_allclose(a.local_share, 1.0)  # [CLS] dropped, rows renormalised: the identity
    assert a.captured_row_sums.min == pytest.approx(1.0) and a.captured_row_sums.max == pytest.approx(1.0)
    assert res.config["keep_special"] is False
    assert all(ex.tokens[0] != "[CLS]" for ex in res.examples)
    kept = mp.compute(mp.Config(local_radius=0, max_offset=W, examples=1, keep_special=True),
                      acts=acts).maps["attention"]
    # per text: the [CLS] row is fully local, the other n - 1 rows half; averaged over all 16 query rows
    assert kept.local_share_overall == pytest.approx((1 + 5 * 0.5 + 1 + 9 * 0.5) / 16)
    assert kept.n_queries == 16
    rows = mp.table_rows(res)
    assert [r["layer"] for r in rows] == [1, 2] and rows[0]["offset_0"] == pytest.approx(1.0)


def test_uniform_maps_meet_the_uniform_baseline():
    acts = planted_activations(lengths=(7, 12, 30))
    flat, off = acts.maps["attention"], acts.map_offsets["attention"]
    for t, n in enumerate(np.diff(acts.offsets)):
        flat[off[t]:off[t + 1]] = 1.0 / n  # uniform over all tokens; uniform over the kept ones once renormalised
    a = mp.compute(mp.Config(local_radius=2, max_offset=W, examples=1), acts=acts).maps["attention"]
    np.testing.assert_allclose(a.local_share, a.local_share_uniform, atol=1e-6)
    kept = [5, 10, 28]
    expected = sum(sum((min(i + 2, q - 1) - max(i - 2, 0) + 1) / q for i in range(q)) for q in kept) / sum(kept)
    assert a.local_share_uniform == pytest.approx(expected)


def test_bad_settings_are_clear_errors(capsys):
    from probes.config import parse_config

    with pytest.raises(SystemExit):  # arg(min=0) checks it when the command line is parsed
        parse_config(mp.Config, ["--local-radius", "-1"])
    assert capsys.readouterr().err.startswith("error: argument --local-radius: --local-radius must be >= 0, got -1")


# attention rows are read back from the float16 cache: each entry within 2^-11 of itself, so a row sum within 2^-11 of 1
F16_SUM = 2.0 ** -11 + 1e-6

SMALL = ["--n-sentences", "16", "--examples", "2", "--max-offset", "6", "--seed", "1"]


def read(out, model):
    return json.loads((out / "results" / "maps" / f"{model}.json").read_text())


def images(fig) -> list[np.ndarray]:
    return [np.asarray(im.get_array()) for ax in fig.axes for im in ax.get_images()]


def assert_examples_drawn(fig, doc) -> None:
    """The example figure of a model with token-pair maps shows each kind's example means first."""
    want = [ex for m in doc["maps"].values() if m["token_axes"] == 2 for ex in m["example_means"]]
    got = images(fig)
    assert want and len(got) >= len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


def assert_locality_drawn(fig, doc) -> None:
    """The locality figure: the mass by offset (left) and the mean local share per layer (right) of each pair map."""
    by_offset, share = fig.axes[:2]
    for m in doc["maps"].values():
        if m["token_axes"] == 2:
            line_drawing(by_offset, m["offset_profile_overall"], x=m["offsets"])
            line_drawing(share, np.mean(m["local_share"], 1))


def assert_gates_drawn(fig, doc) -> None:
    """The gate panel of the locality figure: one line per gate, its mean share per layer."""
    mean = np.asarray(doc["maps"]["gates"]["component_mean"])
    for c in range(mean.shape[1]):
        line_drawing(fig.axes[0], mean[:, c])


@pytest.mark.slow
def test_end_to_end_tiny_bert_and_gpt2(tmp_path, drawn):
    out = tmp_path / "out"
    mp.main(["--model", "tiny-bert", "--model", "tiny-gpt2", *SMALL, "--out", str(out)])
    bert, gpt = read(out, "tiny-bert"), read(out, "tiny-gpt2")
    for doc in (bert, gpt):
        assert doc["maps_captured"] == ["attention"]
        a = doc["maps"]["attention"]
        assert np.shape(a["local_share"]) == (2, 4) and np.shape(a["offset_profile"]) == (2, 13)
        assert a["captured_row_sums"]["min"] == pytest.approx(1.0, abs=F16_SUM)
        assert a["captured_row_sums"]["max"] == pytest.approx(1.0, abs=F16_SUM)
        assert doc["config"]["n_sentences"] == 16 and doc["corpus"]["n_sampled"] == 16
        assert len(doc["examples"]) == 2 and np.shape(a["grid"])[:2] == (2, 4)
    prof = np.asarray(gpt["maps"]["attention"]["offset_profile"])
    assert np.all(prof[:, :6] == 0) and prof[:, 6:].sum() > 0  # causal: nothing at offsets < 0
    for name in ("maps-tiny-bert", "maps-tiny-gpt2", "maps-locality"):
        assert all((out / "figures" / f"{name}.{ext}").is_file() for ext in ("png", "pdf"))
    assert_examples_drawn(drawn["maps-tiny-bert"], bert)
    assert_examples_drawn(drawn["maps-tiny-gpt2"], gpt)
    assert_locality_drawn(drawn["maps-locality"], bert)
    assert_locality_drawn(drawn["maps-locality"], gpt)
    assert (out / "results" / "maps" / "tiny-bert.csv").read_text().startswith("map,layer,heads,local_share_mean")
    (out / "figures" / "maps-locality.png").unlink()
    paths = figures.redraw(str(out))
    assert {"maps-locality.png", "maps-tiny-bert.png", "maps-tiny-gpt2.pdf"} <= {p.name for p in paths}
    # the captured attention rows sum to 1 before special tokens are dropped (read back from the cache)
    acts = sentence_activations("tiny-bert", "default", 16, 1, out=str(out), maps=True)
    assert acts.n_texts == 16
    for t in range(acts.n_texts):
        np.testing.assert_allclose(acts.text_attentions(t).sum(-1), 1.0, atol=F16_SUM)
        np.testing.assert_array_equal(mp.text_map(acts, "attention", t), acts.text_attentions(t))


@pytest.mark.slow
def test_end_to_end_tiny_convbert_kernels_beside_attention(tmp_path, drawn):
    out = tmp_path / "out"
    mp.main(["--model", "tiny-convbert", *SMALL, "--local-radius", "4", "--out", str(out)])
    doc = read(out, "tiny-convbert")
    assert doc["maps_captured"] == ["attention", "conv_kernel"]
    att, conv = doc["maps"]["attention"], doc["maps"]["conv_kernel"]
    assert (att["layers"], att["heads"]) == (conv["layers"], conv["heads"]) == (2, 2)
    np.testing.assert_allclose(conv["local_share"], 1.0, atol=1e-6)  # kernel 9: all mass within |i - j| <= 4
    prof = np.asarray(conv["offset_profile"])
    assert np.all(prof[:, :2] == 0) and np.all(prof[:, -2:] == 0)  # offsets +-5, +-6: outside the kernel
    assert conv["captured_row_sums"]["max"] <= 1 + F16_SUM and conv["captured_row_sums"]["min"] < 1 - 0.01  # edges
    assert (out / "figures" / "maps-tiny-convbert.png").is_file()
    assert_examples_drawn(drawn["maps-tiny-convbert"], doc)  # attention's examples, then the kernels'
    assert_locality_drawn(drawn["maps-locality"], doc)


# ----------------------------------------------------------------------------- per-token maps (S-LSTM)


def planted_token_activations(lengths=(5, 8), L=2) -> Activations:
    """Texts [CLS] w ... w [SEP] with per-token maps (token_axes 1): gates constant per layer, layer l
    = GATE_SHARES[l] at every token; sentence weights 0.3 on [CLS], 0.1 on [SEP], the rest spread over
    the words proportionally to 1, 2, ..., so own-cell weight 0.1 in every layer."""
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    special = np.concatenate([[True] + [False] * (n - 2) + [True] for n in lengths])
    gates, sw, g_off, s_off = [], [], [0], [0]
    for n in lengths:
        g = np.stack([np.broadcast_to(np.asarray(GATE_SHARES[lyr])[:, None], (5, n)) for lyr in range(L)])
        gates.append(g.ravel())
        w = np.zeros(n)
        w[0], w[-1] = 0.3, 0.1
        words = np.arange(1, n - 1, dtype=float)
        w[1:-1] = 0.5 * words / words.sum()
        sw.append(np.broadcast_to(w, (L, 1, n)).ravel())
        g_off.append(g_off[-1] + L * 5 * n)
        s_off.append(s_off[-1] + L * n)
    N, d = int(offsets[-1]), 4
    tokens = [["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"] for n in lengths]
    meta = {"model": {"name": "planted-slstm", "sentence_vector": "g"}, "key": "k", "n_texts": len(lengths),
            "n_tokens": N, "truncated_texts": [], "attentions": True,
            "maps": {"gates": {"layers": L, "k": 5, "token_axes": 1, "description": "planted gates",
                              "components": list(GATES)},
                     "sentence_weights": {"layers": L, "k": 1, "token_axes": 1, "description": "planted"}}}
    return Activations(meta=meta, texts=[f"text {i}" for i in range(len(lengths))], tokens=tokens,
                       offsets=offsets, token_ids=np.arange(N), special=special,
                       hidden=np.zeros((L + 1, N, d), np.float32), sentence=np.zeros((L + 1, len(lengths), d)),
                       maps={"gates": np.concatenate(gates).astype(np.float32),
                             "sentence_weights": np.concatenate(sw).astype(np.float32)},
                       map_offsets={"gates": np.array(g_off), "sentence_weights": np.array(s_off)})


GATE_SHARES = [(0.4, 0.1, 0.1, 0.2, 0.2), (0.1, 0.3, 0.3, 0.2, 0.1)]


def test_gate_labels_come_from_the_encoder():
    import probes

    specs = probes.load("tiny-slstm").map_specs()
    assert specs["gates"].components == GATES and specs["sentence_weights"].components == ("weight",)


def test_planted_gates_give_their_per_layer_means():
    acts = planted_token_activations()
    res = mp.compute(mp.Config(examples=2, position_bins=4), acts=acts)
    assert res.maps_captured == ["gates", "sentence_weights"]
    g = res.maps["gates"]
    assert g.token_axes == 1 and g.components == list(GATES)
    assert g.n_tokens == 3 + 6 and g.n_texts == 2  # [CLS]/[SEP] dropped
    np.testing.assert_allclose(g.component_mean, GATE_SHARES, atol=1e-6)
    np.testing.assert_allclose(g.position_profile, np.repeat(np.asarray(GATE_SHARES)[..., None], 4, -1),
                               atol=1e-6)  # constant along the sentence
    assert g.captured_sums.min == pytest.approx(1.0, abs=1e-6)
    assert sorted(np.shape(e) for e in g.example_maps) == [(2, 5, 3), (2, 5, 6)]  # kept tokens only
    assert "per_token_maps" in res.definitions
    rows = mp.table_rows(res)
    assert list(rows[0]) == ["map", "layer", "component", "statistic", "value"]
    means = {(r["layer"], r["component"]): r["value"] for r in rows if r["map"] == "gates" and r["statistic"] == "mean"}
    assert means[(1, "input")] == pytest.approx(0.4) and means[(2, "right")] == pytest.approx(0.3)


def test_sentence_weights_are_renormalised_over_the_kept_tokens():
    acts = planted_token_activations()
    s = mp.compute(mp.Config(examples=2, position_bins=3), acts=acts).maps["sentence_weights"]
    ex = {np.shape(e)[-1]: np.asarray(e) for e in s.example_maps}  # by kept length: 3 and 6 words
    for q in (3, 6):
        words = np.arange(1, q + 1)
        np.testing.assert_allclose(ex[q][:, 0], np.broadcast_to(words / words.sum(), (2, q)), atol=1e-5)
    np.testing.assert_allclose(s.mass_on_kept_tokens, 0.5, atol=1e-6)
    np.testing.assert_allclose(s.self_weight, 0.1, atol=1e-6)

    def entropy(q):
        p = np.arange(1, q + 1) / (q * (q + 1) / 2)
        return -(p * np.log(p)).sum() / np.log(q)

    np.testing.assert_allclose(s.normalised_entropy, (entropy(3) + entropy(6)) / 2, atol=1e-6)
    # position profile, 3 bins: text 1 has one word per bin, text 2 two; value m * p_i averaged per bin
    p3, p6 = 3 * np.arange(1, 4) / 6, 6 * np.arange(1, 7) / 21
    expected = [(p3[b] + p6[2 * b] + p6[2 * b + 1]) / 3 for b in range(3)]
    np.testing.assert_allclose(np.asarray(s.position_profile)[:, 0], [expected] * 2, atol=1e-6)
    kept = mp.compute(mp.Config(examples=1, keep_special=True), acts=acts).maps["sentence_weights"]
    np.testing.assert_allclose(kept.mass_on_kept_tokens, 0.9, atol=1e-6)  # all tokens: 1 - own weight
    assert sum(kept.position_tokens) == 5 + 8


def test_uniform_sentence_weights_have_entropy_one_and_flat_profile():
    acts = planted_token_activations(lengths=(7, 12))
    flat, off = acts.maps["sentence_weights"], acts.map_offsets["sentence_weights"]
    for t, n in enumerate(np.diff(acts.offsets)):
        flat[off[t]:off[t + 1]] = 0.9 / n
    s = mp.compute(mp.Config(examples=1), acts=acts).maps["sentence_weights"]
    np.testing.assert_allclose(s.normalised_entropy, 1.0, atol=1e-6)
    np.testing.assert_allclose(s.weight_cv, 0.0, atol=1e-5)
    np.testing.assert_allclose(s.position_profile, 1.0, atol=1e-5)


def test_end_to_end_tiny_slstm(tmp_path, drawn):
    out = tmp_path / "out"
    mp.main(["--model", "tiny-slstm", *SMALL, "--out", str(out)])
    doc = read(out, "tiny-slstm")
    assert doc["maps_captured"] == ["gates", "gates_dominant", "sentence_weights"]  # no attention
    for name in ("gates", "gates_dominant"):
        g = doc["maps"][name]
        assert np.shape(g["component_mean"]) == (2, 5) and g["components"] == list(GATES)
        np.testing.assert_allclose(np.sum(g["component_mean"], 1), 1.0, atol=1e-5)
    assert np.all(np.asarray(doc["maps"]["gates"]["component_mean"]) > 0.084)  # softmax of sigmoids
    s = doc["maps"]["sentence_weights"]
    assert np.shape(s["normalised_entropy"]) == (2, 1) and np.all(np.asarray(s["normalised_entropy"]) <= 1)
    assert np.all(np.asarray(s["self_weight"]) > 0) and s["captured_sums"]["max"] < 1
    for e, ex in zip(s["example_maps"], doc["examples"]):
        assert np.shape(e) == (2, 1, len(ex["tokens"]))
        np.testing.assert_allclose(np.sum(e, -1), 1.0, atol=1e-4)
    csv = (out / "results" / "maps" / "tiny-slstm.csv").read_text()
    assert csv.startswith("map,layer,component,statistic,value")
    assert "sentence_weights,2,weight,normalised_entropy," in csv
    for name in ("maps-tiny-slstm", "maps-locality"):
        assert all((out / "figures" / f"{name}.{ext}").is_file() for ext in ("png", "pdf"))
    # per-token heatmaps: the first example's gates and sentence weights, a row per layer (and gate)
    heat = images(drawn["maps-tiny-slstm"])
    assert len(heat) >= len(doc["maps"]) == 3
    for got, name in zip(heat, doc["maps"]):  # gates, gates_dominant, sentence_weights
        x = np.asarray(doc["maps"][name]["example_maps"][0])
        np.testing.assert_allclose(got, x.reshape(-1, x.shape[-1]), rtol=1e-6, atol=1e-9)
    assert_gates_drawn(drawn["maps-locality"], doc)


@pytest.mark.slow
def test_mixed_run_tiny_bert_and_tiny_slstm(tmp_path, drawn):
    out = tmp_path / "out"
    mp.main(["--model", "tiny-bert", "--model", "tiny-slstm", *SMALL, "--out", str(out)])
    assert read(out, "tiny-bert")["maps_captured"] == ["attention"]
    assert "attention" not in read(out, "tiny-slstm")["maps"]
    for name in ("maps-tiny-bert", "maps-tiny-slstm", "maps-locality"):
        assert (out / "figures" / f"{name}.png").is_file()
    assert_examples_drawn(drawn["maps-tiny-bert"], read(out, "tiny-bert"))
    assert_locality_drawn(drawn["maps-locality"], read(out, "tiny-bert"))  # beside the S-LSTM's gates
    paths = figures.redraw(str(out))
    assert {"maps-locality.png", "maps-tiny-slstm.png"} <= {p.name for p in paths}


# ----------------------------------------------------------------------------- typed result and figures


def test_result_round_trips_through_its_json_file_byte_for_byte(tmp_path):
    from analyses.common import read_result, read_results, write_result

    for acts in (planted_activations(), planted_token_activations()):
        res = mp.compute(mp.Config(examples=2, max_offset=W), acts=acts)
        name = acts.meta["model"]["name"]
        first, _ = write_result(tmp_path / "a", "maps", name, res, mp.table_rows(res))
        back = read_results(tmp_path / "a", "maps", [name])[0]  # typed: the analysis's Result
        doc = read_result(first)
        assert isinstance(back, mp.Result) and back == mp.Result.from_json(doc)
        assert list(back.to_json()) == [k for k in doc if k not in ("analysis", "provenance", "nulls")]
        second, _ = write_result(tmp_path / "b", "maps", name, back, mp.table_rows(back))
        assert first.read_bytes() == second.read_bytes()
    with pytest.raises(KeyError, match="maps"):
        mp.Result.from_json({k: v for k, v in doc.items() if k != "maps"})


def test_locality_figure_plots_the_result_values_in_the_model_colour():
    import matplotlib.pyplot as plt

    from analyses.style import model_color

    res = mp.compute(mp.Config(examples=1, max_offset=W), acts=planted_activations())
    fig = mp.plot([mp.Result.from_json(res.to_json())])  # a saved document, read back
    ax_p, ax_s = fig.axes
    a = res.maps["attention"]
    np.testing.assert_allclose(ax_p.lines[0].get_xdata(), a.offsets)
    np.testing.assert_allclose(ax_p.lines[0].get_ydata(), a.offset_profile_overall)
    np.testing.assert_allclose(ax_s.lines[0].get_xdata(), [1, 2])  # one depth: layer numbers
    np.testing.assert_allclose(ax_s.lines[0].get_ydata(), np.mean(a.local_share, 1))
    assert ax_p.lines[0].get_color() == ax_s.lines[0].get_color() == model_color("planted")
    assert ax_p.get_ylabel() and ax_s.get_xlabel() == "layer"
    plt.close(fig)
    deep = planted_activations(L=4)
    deep.meta["model"]["name"] = "planted-deep"
    res4 = mp.compute(mp.Config(examples=1, max_offset=W), acts=deep)
    fig = mp.plot([res, res4])  # depths 2 and 4 share the axis as relative depth
    ax_s = fig.axes[1]
    assert ax_s.get_xlabel().startswith("relative depth")
    np.testing.assert_allclose(ax_s.lines[0].get_xdata(), [0.5, 1.0])
    np.testing.assert_allclose(ax_s.lines[2].get_xdata(), [0.25, 0.5, 0.75, 1.0])  # lines[1]: baseline
    assert ax_s.lines[2].get_color() == model_color("planted-deep")
    plt.close(fig)


def test_example_figures_show_the_stored_maps():
    import matplotlib.pyplot as plt

    res = mp.compute(mp.Config(examples=2, max_offset=W), acts=planted_activations())
    fig = mp.plot_examples(res)
    images = [im.get_array() for ax in fig.axes for im in ax.get_images()]
    a = res.maps["attention"]
    for got, want in zip(images[:2], a.example_means):
        np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(images[2:], np.reshape(a.grid, (-1, *np.shape(a.grid)[2:])))  # L x K grid
    plt.close(fig)
    tok = mp.compute(mp.Config(examples=1), acts=planted_token_activations())
    fig = mp.plot_examples(tok)  # no token-pair map: the per-token heatmaps
    images = [im.get_array() for ax in fig.axes for im in ax.get_images()]
    for got, name in zip(images, ("gates", "sentence_weights")):
        x = np.asarray(tok.maps[name].example_maps[0])
        np.testing.assert_allclose(got, x.reshape(-1, x.shape[-1]))
    plt.close(fig)
    fig = mp.plot([tok])  # the gate panel: one line per gate, y = its mean share per layer
    mean = np.asarray(tok.maps["gates"].component_mean)
    lines = [ln for ln in fig.axes[0].lines if len(ln.get_ydata()) == 2 and ln.get_linestyle() == "-"]
    assert len(lines) == 5
    for c, line in enumerate(lines):
        np.testing.assert_allclose(line.get_ydata(), mean[:, c])
    plt.close(fig)


@pytest.mark.integration
def test_cli_as_a_module_draws_per_token_maps(tmp_path):
    """Under python -m the module's Result is __main__'s class: the gate figures must still draw."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run([sys.executable, "-m", "analyses.maps", "--model", "tiny-slstm", *SMALL, "--out",
                           str(tmp_path)], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the same figure as drawn in this process from the saved result (Agg draws the same pixels)
    from analyses.common import read_results

    mp.ANALYSIS.save_figures(read_results(tmp_path, "maps"), tmp_path / "redrawn")
    assert (tmp_path / "figures" / "maps-tiny-slstm.png").read_bytes() == \
        (tmp_path / "redrawn" / "figures" / "maps-tiny-slstm.png").read_bytes()
