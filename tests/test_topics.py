"""analyses.topics: the JSD definition, seeded LDA, windowed greedy generation, the CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from analyses import records
from analyses import topics as tp
from analyses.common import Identity
from probes.capture.windows import greedy_windowed, scoring_context_start
from probes.models.lm import load_lm

REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- js_divergence


def test_js_divergence_known_value_base_2():
    assert round(tp.js_divergence([1, 0], [0.5, 0.5]), 4) == 0.3113
    assert isinstance(tp.js_divergence([1, 0], [0.5, 0.5]), float)
    assert tp.js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)  # disjoint supports: the maximum, 1 bit


def test_js_divergence_is_the_divergence_not_scipys_distance():
    from scipy.spatial.distance import jensenshannon

    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.1, 0.3, 0.6])
    assert tp.js_divergence(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2)


def test_js_divergence_symmetric_zero_on_equal_bounded_and_row_wise():
    rng = np.random.default_rng(0)
    P, Q = rng.dirichlet(np.ones(20) * 0.3, size=50), rng.dirichlet(np.ones(20) * 0.3, size=50)
    d = tp.js_divergence(P, Q)
    assert d.shape == (50,)
    np.testing.assert_allclose(d, tp.js_divergence(Q, P), atol=1e-12)
    assert np.all((d >= 0) & (d <= 1))
    np.testing.assert_allclose(tp.js_divergence(P, P), 0, atol=1e-12)
    np.testing.assert_allclose(d[7], tp.js_divergence(P[7], Q[7]))


# ----------------------------------------------------------------------------- LDA


TEXTS = [
    ("The ship sailed the sea; the whale rose near the boat and the harpoon flew over the waves. " * 4),
    ("Miss Bennet danced at the ball; the gentleman admired her manners and her fortune at dinner. " * 4),
] * 12


def small_cfg(**kw):
    return tp.Config(topics=2, lda_passes=3, lda_chunk_words=10, no_below=2, no_above=0.9, seed=kw.pop("seed", 0),
                     **kw)


def test_preprocessing_lowercases_keeps_letters_and_drops_stop_words():
    assert tp.preprocess("The WHALE, the 3 ships and Mr. Ahab's boat!") == ["whale", "ships", "ahab", "boat"]


def test_lda_topics_are_reproducible_with_a_seed():
    from analyses import topic_model

    a, da = tp.fit_lda(TEXTS, small_cfg())
    topic_model.clear_memo()  # a real second fit, not the memo's model
    b, db = tp.fit_lda(TEXTS, small_cfg())
    assert a is not b
    np.testing.assert_array_equal(a.get_topics(), b.get_topics())
    probe = ["the whale and the harpoon", "dinner at the ball", ""]
    ta, tb = tp.topic_distributions(a, da, probe), tp.topic_distributions(b, db, probe[::-1])[::-1]
    np.testing.assert_array_equal(ta, tb)  # same numbers whatever the order of the texts
    np.testing.assert_allclose(ta.sum(1), 1)
    assert ta.shape == (3, 2) and np.all(ta > 0)  # no topic is dropped
    np.testing.assert_allclose(ta[2], [0.5, 0.5])  # no dictionary word: the symmetric prior
    assert np.argmax(ta[0]) != np.argmax(ta[1])  # sea and ballroom end up in different topics
    c, _ = tp.fit_lda(TEXTS, small_cfg(seed=1))
    assert not np.array_equal(a.get_topics(), c.get_topics())


def test_paired_statistics():
    a = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    b = a + np.array([0.1, 0.1, 0.1, 0.1, -0.1, 0.0])
    s = tp.paired_statistics(a, b)
    assert (s.n_a_less, s.n_a_greater, s.n_ties) == (4, 1, 1)
    assert s.share_a_less == pytest.approx(4 / 6)
    assert s.sign_test_p == pytest.approx(0.375)  # binomial(5, 0.5): P(X <= 1 or X >= 4)
    assert 0 < s.wilcoxon_p <= 1 and s.note is None and "note" not in records.to_json(s)
    void = tp.paired_statistics(a, a)
    assert void.sign_test_p == 1.0 and void.share_a_less == 0.0 and void.note


def test_sample_spans_do_not_overlap_and_are_seeded():
    docs = [list(range(100)), list(range(37)), list(range(250))]
    spans = tp.sample_spans(docs, 12, 15, seed=3)
    assert spans == tp.sample_spans(docs, 12, 15, seed=3) and spans != tp.sample_spans(docs, 12, 15, seed=4)
    for d in range(3):
        starts = sorted(s for dd, s in spans if dd == d)
        assert all(b - a >= 12 for a, b in zip(starts, starts[1:]))
        assert all(s + 12 <= len(docs[d]) for s in starts)
    with pytest.raises(tp.ProbeError, match="only 31 non-overlapping spans"):
        tp.sample_spans(docs, 12, 40, seed=0)


# ----------------------------------------------------------------------------- generation


@pytest.fixture(scope="module")
def rec():
    return load_lm("tiny-gpt2-recurrent")


@torch.inference_mode()
def test_greedy_windowed_matches_step_by_step_scoring_windows(rec):
    ctx = torch.randint(1000, 30000, (2, 10), generator=torch.Generator().manual_seed(0))
    T, o = 8, 2
    got = greedy_windowed(rec, ctx, 7, T, o)
    seq = ctx.clone()
    for _ in range(7):  # reference: h_prev chain over complete windows, then the scoring window
        p = seq.shape[1]
        s = scoring_context_start(p, T, o)
        h = None
        for k in range(s // (T - o)):
            h = rec.model(seq[:, k * (T - o):k * (T - o) + T], h_prev=h, pool_len=T - o).h_next
        nxt = rec.model(seq[:, s:p], h_prev=h).logits[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], 1)
    assert torch.equal(got, seq[:, 10:])


# ----------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_end_to_end_on_tiny_models(tmp_path, drawn):
    out = tmp_path / "out"
    tp.main(["--model-a", "tiny-gpt2-recurrent", "--model-b", "tiny-gpt2", "--n-contexts", "6",
             "--continuation-tokens", "5", "--lda-passes", "1", "--lda-iterations", "20", "--out", str(out)])
    base = out / "results" / "topics" / "tiny-gpt2-recurrent-vs-tiny-gpt2"
    doc = json.loads(base.with_suffix(".json").read_text())
    assert doc["config"]["topics"] == 20 and len(doc["topics_top_words"]) == 20
    assert doc["model_a"]["window"] == 32 and doc["model_b"]["window"] == 32  # A's recurrence window
    assert len(doc["jsd_a"]) == 6 and doc["statistics"]["n_contexts"] == 6
    assert "paper_direction_held" not in doc["statistics"]  # the verdict is the claims table's, not the result's
    records = [json.loads(ln) for ln in base.with_name(base.name + ".continuations.jsonl").read_text().splitlines()]
    assert len(records) == 6 and {"context", "continuation_a", "continuation_b", "jsd_a"} <= set(records[0])
    assert base.with_suffix(".csv").read_text().count("\n") == 7
    assert all((out / "figures" / f"{f}.png").is_file() for f in ("topics", "topics-differences"))
    # the figures draw the result file's numbers: each context's (JSD_B, JSD_A), the histogram of JSD_A - JSD_B
    jsd_a, jsd_b = np.asarray(doc["jsd_a"]), np.asarray(doc["jsd_b"])
    (scatter,) = drawn["topics"].axes[0].collections
    np.testing.assert_allclose(scatter.get_offsets(), np.column_stack([jsd_b, jsd_a]))
    heights = [p.get_height() for p in drawn["topics-differences"].axes[0].patches]
    np.testing.assert_array_equal(heights, np.histogram(jsd_a - jsd_b, np.linspace(-1, 1, 41))[0])
    # the saved document reads back into the typed Result and writes the same bytes again
    from analyses.common import write_result

    res = tp.Result.from_json(doc)
    assert list(res.to_json()) == [k for k in doc if k not in ("analysis", "provenance", "nulls")]
    again, _ = write_result(tmp_path / "again", "topics", res.model_name, res, tp.table_rows(res))
    assert again.read_bytes() == base.with_suffix(".json").read_bytes()


def planted_result(a="gpt2-small-recurrent", b="gpt2-small-base"):
    jsd_a, jsd_b = [0.1, 0.2, 0.3, 0.6], [0.2, 0.2, 0.5, 0.4]
    stats = tp.paired_statistics(np.asarray(jsd_a), np.asarray(jsd_b))
    identity = Identity(model_name=f"{a}-vs-{b}", config={}, model={"a": {"name": a}, "b": {"name": b}}, corpus={})
    return tp.Result(identity=identity, definitions=records.Definitions(), statistics=stats, topics_top_words=[["w"]],
                     jsd_a=jsd_a, jsd_b=jsd_b, jsd_reference=[0.0] * 4)


def test_the_summary_line_gives_the_numbers_and_leaves_the_verdict_to_the_claims():
    res = planted_result()
    res.statistics = dataclasses.replace(res.statistics, mean_jsd_reference=0.3,
                                         **tp.jsd_intervals(res.jsd_a, res.jsd_b))
    line = tp.summary_line(res)
    assert "A - B -0.0250 [" in line and "A < B in 50.0% of 4 contexts" in line
    assert "held" not in line and "paper" not in line


def test_figures_plot_the_paired_jsds_in_the_models_colours():
    import matplotlib.pyplot as plt

    from analyses.style import model_color

    res = planted_result()
    fig = tp.plot([tp.Result.from_json(res.to_json())])  # a saved document, read back
    ax = fig.axes[0]
    points = ax.collections[0]
    np.testing.assert_allclose(points.get_offsets(), np.c_[res.jsd_b, res.jsd_a])  # x = B, y = A
    assert tuple(points.get_facecolor()[0][:3]) == pytest.approx(to_rgb(model_color("gpt2-small-recurrent")))
    assert ax.xaxis.label.get_color() == model_color("gpt2-small-base")
    assert "bits" in ax.get_xlabel() and "bits" in ax.get_ylabel()
    plt.close(fig)
    fig = tp.plot_differences([res])
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    expected, _ = np.histogram(np.subtract(res.jsd_a, res.jsd_b), bins=np.linspace(-1, 1, 41))
    np.testing.assert_array_equal(heights, expected)
    assert ax.patches[0].get_facecolor()[:3] == pytest.approx(to_rgb(model_color("gpt2-small-recurrent")))
    plt.close(fig)


def to_rgb(color):
    from matplotlib.colors import to_rgb as rgb

    return rgb(color)


@pytest.mark.integration
def test_cli_encoder_model_a_is_one_clear_line(tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home")}
    proc = subprocess.run([sys.executable, "-m", "analyses.topics", "--model-a", "tiny-bert", "--model-b",
                           "tiny-gpt2", "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: model 'tiny-bert' is not a causal language model")


def test_a_model_compared_with_itself_under_another_spelling_is_refused():
    from probes.errors import ProbeError

    for b in ("tiny-gpt2", "tiny-gpt2?sentence=last"):
        with pytest.raises(ProbeError, match="topics compares two different models"):
            tp.check(tp.Config(model_a="tiny-gpt2", model_b=b))
    tp.check(tp.Config(model_a="tiny-gpt2-recurrent", model_b="tiny-gpt2"))  # two models: no error
