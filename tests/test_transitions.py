"""analyses.transitions against hand-built hidden states with known displacements and angles, and end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from figure_data import line_drawing

from analyses import transitions as tr
from analyses.common import write_result
from analyses.style import model_color
from probes.capture.activations import Activations
from probes.errors import ProbeError

REPO = Path(__file__).resolve().parent.parent



def renamed(res, name: str, **changes):
    """``res`` under another model name (its identity's), with ``changes`` to its other fields."""
    return dataclasses.replace(res, identity=dataclasses.replace(res.identity, model_name=name), **changes)

def stepped(n=5, d=4, L=3, seed=0):
    """hidden[l] = hidden[l-1] + l * u for a unit vector u: layer l moves every token by exactly l."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    h = [rng.normal(size=(n, d))]
    for lyr in range(1, L + 1):
        h.append(h[-1] + lyr * u)
    return np.stack(h)


def test_known_displacements_give_known_distances():
    hidden = stepped()
    np.testing.assert_allclose(tr.layer_distances(hidden), [1.0, 2.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(tr.layer_distances(hidden.astype(np.float32)), [1, 2, 3], atol=1e-6)


def test_known_rotations_give_known_cosines_and_chords():
    # every token rotates in the (e0, e1) plane by 60 degrees, then 90, then 180; norms differ per token
    radii = np.array([1.0, 2.0, 0.5])
    angles = np.cumsum([0.0, np.pi / 3, np.pi / 2, np.pi])
    hidden = np.stack([np.stack([radii * np.cos(a), radii * np.sin(a), np.zeros(3)], 1) for a in angles])
    np.testing.assert_allclose(tr.layer_cosines(hidden), [0.5, 0.0, -1.0], atol=1e-12)
    chord = lambda theta: 2 * radii.mean() * np.sin(theta / 2)  # ||R(theta) h - h|| = 2 |h| sin(theta / 2)
    np.testing.assert_allclose(tr.layer_distances(hidden), [chord(np.pi / 3), chord(np.pi / 2), chord(np.pi)])


def test_zero_vector_has_cosine_zero_and_bad_shapes_are_errors():
    hidden = np.array([[[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [2.0, 0.0]]])  # (2, 2, 2)
    np.testing.assert_allclose(tr.layer_cosines(hidden), [0.5])  # (0 + 1) / 2
    np.testing.assert_allclose(tr.layer_distances(hidden), [1.0])
    with pytest.raises(ProbeError, match=r"\(L\+1, n, d\)"):
        tr.layer_distances(np.ones((1, 3, 2)))
    with pytest.raises(ProbeError, match="no tokens"):
        tr.layer_cosines(np.ones((3, 0, 2)))


def planted_activations(lengths=(2, 4, 3), d=6, L=3, seed=0) -> Activations:
    """Text t's real tokens move by (t + 1) * l at layer l; the special tokens framing each text move by
    100 (they must not count); the sentence vector of text t moves by 10 * (t + 1) * l at layer l."""
    rng = np.random.default_rng(seed)
    u = np.eye(d)[0]
    blocks, special, sentence = [], [], []
    for t, n in enumerate(lengths):
        h0 = rng.normal(size=(n + 2, d))
        h = [h0]
        for lyr in range(1, L + 1):
            step = np.full((n + 2, 1), (t + 1) * lyr, float)
            step[[0, -1]] = 100.0
            h.append(h[-1] + step * u)
        blocks.append(np.stack(h))
        special += [True] + [False] * n + [True]
        s0 = rng.normal(size=d)
        sentence.append(np.stack([s0 + 10 * (t + 1) * lyr * (lyr + 1) / 2 * np.eye(d)[1] for lyr in range(L + 1)]))
    hidden = np.concatenate(blocks, axis=1).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(np.array(lengths) + 2)])
    N = int(offsets[-1])
    meta = {"model": {"name": "planted", "sentence_vector": "cls"}, "key": "k", "n_texts": len(lengths),
            "n_tokens": N, "truncated_texts": []}
    return Activations(meta=meta, texts=[f"t{i}" for i in range(len(lengths))],
                       tokens=[["x"] * (n + 2) for n in lengths], offsets=offsets,
                       token_ids=np.zeros(N, np.int64), special=np.array(special),
                       hidden=hidden, sentence=np.stack(sentence, 1).astype(np.float32))


@pytest.mark.parametrize("block", [tr.BLOCK_TOKENS, 1, 4])
def test_compute_averages_per_text_then_over_texts_without_special_tokens(monkeypatch, block):
    monkeypatch.setattr(tr, "BLOCK_TOKENS", block)  # blocks that split texts must not change anything
    res = tr.compute(tr.Config(), acts=planted_activations())
    assert [row.layer for row in res.layers] == [1, 2, 3]
    for row in res.layers:
        lyr = row.layer
        per_text = np.array([1, 2, 3]) * lyr  # texts move by 1, 2, 3 times l (their lengths must not weigh)
        assert row.token.distance_mean == pytest.approx(per_text.mean())
        assert row.token.distance_std == pytest.approx(per_text.std())
        assert row.sentence.distance_mean == pytest.approx(10 * lyr * 2)  # 10 * (1 + 2 + 3) / 3
        assert row.sentence.distance_std == pytest.approx(10 * lyr * np.std([1, 2, 3]))
        assert -1 <= row.token.cosine_mean <= 1
        lo, hi = row.mean_ci("token", "distance")
        assert lo <= row.token.distance_mean <= hi
    assert res.definitions["special_tokens"] == "excluded from token statistics"
    assert res.n_texts_used == 3 and res.n_layers == 3
    rows = tr.table_rows(res)
    assert len(rows) == 3 and set(rows[0]) >= {"layer", "token_distance_mean", "sentence_cosine_std"}


def test_keep_special_counts_the_special_tokens():
    res = tr.compute(tr.Config(keep_special=True), acts=planted_activations())
    assert res.layers[0].token.distance_mean > 20  # the special tokens' jumps of 100 now count
    assert res.definitions["special_tokens"] == "kept"


def test_result_json_round_trip(tmp_path):
    res = tr.compute(tr.Config(), acts=planted_activations())
    path, _ = write_result(tmp_path / "a", "transitions", "planted", res, tr.table_rows(res))
    doc = json.loads(path.read_text())
    back = tr.Result.from_json(doc)
    assert list(doc) == ["analysis", *back.to_json(), "provenance"]
    assert (back.n_layers, back.n_texts_used, back.definitions) == (res.n_layers, res.n_texts_used, res.definitions)
    for got, want in zip(back.layers, res.layers):
        assert isinstance(got, tr.LayerRow) and isinstance(got.token, tr.Change)
        for level in ("token", "sentence"):
            assert dataclasses.asdict(got.of(level)) == pytest.approx(dataclasses.asdict(want.of(level)), abs=1e-8)
    again, _ = write_result(tmp_path / "b", "transitions", "planted", back, tr.table_rows(back))
    assert again.read_bytes() == path.read_bytes()
    with pytest.raises(KeyError, match="n_texts_used"):
        tr.Result.from_json({k: v for k, v in doc.items() if k != "n_texts_used"})


def test_plot_draws_the_result_values_in_the_model_colours():
    import matplotlib
    from matplotlib.colors import to_hex

    matplotlib.use("Agg")
    res = tr.compute(tr.Config(), acts=planted_activations())
    fig = tr.plot([res, tr.Result.from_json(renamed(res, "again").to_json())])  # a saved document, read back, too
    assert [ax.get_title() for ax in fig.axes] == ["token representations", "sentence representations"]
    assert fig.axes[0].get_xlabel().startswith("layer l")
    for ax, level in zip(fig.axes, ("token", "sentence")):
        first, second = ax.get_lines()
        np.testing.assert_array_equal(first.get_xdata(), [1, 2, 3])
        np.testing.assert_allclose(first.get_ydata(), [row.of(level).distance_mean for row in res.layers])
        assert to_hex(first.get_color()) == model_color("planted")
        assert to_hex(second.get_color()) == model_color("again")
    shallow = renamed(res, "shallow", n_layers=2, layers=res.layers[:2])
    fig = tr.plot_cosines([res, shallow])  # different depths: relative depth, and the label says so
    assert fig.axes[0].get_xlabel() == "relative depth l / L"
    deep, short = fig.axes[1].get_lines()
    np.testing.assert_allclose(deep.get_xdata(), [1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(short.get_xdata(), [1 / 2, 1])
    np.testing.assert_allclose(short.get_ydata(), [row.sentence.cosine_mean for row in res.layers[:2]])


@pytest.mark.slow
def test_end_to_end_shares_the_anisotropy_cache(tmp_path, monkeypatch, drawn):
    from analyses import anisotropy

    out = tmp_path / "out"
    anisotropy.main(["--model", "tiny-bert", "--n-sentences", "60", "--n-tokens", "100", "--bins", "10",
                     "--out", str(out)])
    import probes

    load = probes.load

    def no_model(*a, **k):
        raise AssertionError("the model was loaded although anisotropy cached these activations")

    monkeypatch.setattr(probes, "load", no_model)
    tr.main(["--model", "tiny-bert", "--n-sentences", "60", "--out", str(out)])
    monkeypatch.setattr(probes, "load", load)
    bert_figures = dict(drawn)
    tr.main(["--model", "tiny-gpt2", "--n-sentences", "60", "--out", str(out)])
    doc = json.loads((out / "results" / "transitions" / "tiny-bert.json").read_text())
    assert len(doc["layers"]) == 2 and doc["n_layers"] == 2
    assert doc["config"]["n_sentences"] == 60 and doc["config"]["keep_special"] is False
    assert doc["corpus"]["n_sampled"] == 60 and doc["model"]["sentence_vector"] == "cls"
    assert all(row["token"]["distance_mean"] > 0 for row in doc["layers"])
    gpt = json.loads((out / "results" / "transitions" / "tiny-gpt2.json").read_text())
    assert gpt["model"]["sentence_vector"] == "last"
    assert len((out / "results" / "transitions" / "tiny-gpt2.csv").read_text().splitlines()) == 3
    # each run's figures draw its result file's numbers: token (left) and sentence (right) by layer
    for figures, doc in ((bert_figures, json.loads((out / "results" / "transitions" / "tiny-bert.json").read_text())),
                         (drawn, gpt)):
        for name, quantity in (("transitions", "distance_mean"), ("transitions-cosines", "cosine_mean")):
            assert all((out / "figures" / f"{name}.{ext}").is_file() for ext in ("png", "pdf"))
            token, sentence = figures[name].axes[:2]
            for ax, level in ((token, "token"), (sentence, "sentence")):
                line_drawing(ax, [row[level][quantity] for row in doc["layers"]], x=[1, 2])


def test_missing_corpus_is_one_clear_line(tmp_path, capsys):
    from probes.config import run_main

    with pytest.raises(SystemExit) as done:  # as python -m runs it (tests/test_cli.py starts the real process)
        run_main(tr.main, ["--model", "tiny-bert", "--corpus", "/no/such/path", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "/no/such/path" in lines[0]


def test_a_state_that_holds_nan_has_an_undefined_cosine_not_zero():
    from analyses.transitions import token_transitions

    h = np.random.default_rng(0).standard_normal((3, 4, 8))
    h[1, 2, 0] = np.nan  # token 2 at layer 1: its transitions into and out of layer 1 are undefined
    h[2, 1] = 0.0  # a zero vector: cosine 0 by convention
    dist, cos = token_transitions(h)
    assert np.isnan(cos[:, 2]).all() and np.isnan(dist[:, 2]).all()
    assert cos[1, 1] == 0 and np.isfinite(np.delete(cos, 2, axis=1)).all()
