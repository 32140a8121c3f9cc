"""analyses.mog against planted maps: subgraph weights that grow with length and layer (and dip at
layer 4), attention rows of known entropy; then the figures on the data they plot, and JSON round trip.

The activations are tiny-mog's (real offsets, special-token masks and map layouts) with the captured
maps overwritten by planted values, so every number compute() returns is known in advance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import probes
from analyses import mog as am
from analyses.summary import claims
from probes.errors import ProbeError

TEXTS = ["One two.", "One two three four five six seven.", "A b c d e f g h i j k l m n o p q r s t.",
         "Short one here.", "Another sentence of a middling length for the test, with words."]


@pytest.fixture(scope="module")
def acts_template():
    enc = probes.load("tiny-mog")
    enc.model.layers.extend([type(enc.model.layers[0])(enc.model.config) for _ in range(3)])  # 5 layers
    enc.num_layers = enc.model.config.num_layers = 5
    return probes.extract(enc, TEXTS, maps=True, cache_dir=None, progress=False)


def planted(acts, w_of):
    """Overwrite subgraph_weight with w_of(length, layer) on real tokens (specials get 0.99: must be ignored);
    attention_high uniform rows, attention_middle_qi one-hot (identity), attention_middle_qp 2-way split."""
    for t in range(acts.n_texts):
        real = ~acts.special[acts.offsets[t]:acts.offsets[t + 1]]
        n, L = len(real), acts.n_layers
        w = np.full((L, 1, n), 0.99)
        for j in range(L):
            w[j, 0, real] = w_of(int(real.sum()), j + 1)
        a, b = acts.map_offsets["subgraph_weight"][t:t + 2]
        acts.maps["subgraph_weight"][a:b] = w.ravel()
        H = acts.meta["maps"]["attention_high"]["k"]
        mats = {"attention_high": np.full((n, n), 1 / n), "attention_middle_qi": np.eye(n),
                "attention_middle_qp": (np.eye(n) + np.roll(np.eye(n), 1, 1)) / 2}
        for m, M in mats.items():
            a, b = acts.map_offsets[m][t:t + 2]
            acts.maps[m][a:b] = np.broadcast_to(M, (L, H, n, n)).ravel()
    return acts


def _verdicts(res) -> dict:
    """The claims table's verdicts of Fig. 9 and Fig. 10 on this one result."""
    found = [f for f in claims.judge_all({"mog": [res]}) if f.analysis == "mog"]
    return {word: next(f.verdict for f in found if word in f.claim) for word in ("longer", "rises", "dip", "smoother")}


def test_planted_weights_buckets_claims_and_entropy(acts_template):
    acts = planted(acts_template, lambda n, j: 0.1 + 0.01 * n + 0.05 * j - (0.2 if j == 4 else 0.0))
    lengths = [int((~acts.special[acts.offsets[t]:acts.offsets[t + 1]]).sum()) for t in range(acts.n_texts)]
    cfg = am.Config(edges=[4, 8, 16], min_bucket=1, layer=2)
    res = am.compute(cfg, acts=acts)
    assert res.fusion == "weight-gate" and res.n_layers == 5
    b = am.bucket_of(np.array(lengths), cfg.edges)
    assert res.bucket_counts == np.bincount(b, minlength=4).tolist()
    for k in range(4):
        for j in range(5):
            want = np.mean([0.1 + 0.01 * n + 0.05 * (j + 1) - (0.2 if j == 3 else 0) for n, bb in zip(lengths, b)
                            if bb == k]) if res.bucket_counts[k] else None
            got = res.w_by_bucket[k][j]
            assert (got is None) if want is None else got == pytest.approx(want, abs=1e-6)
    c = res.claims
    saved = res.to_json()["claims"]
    assert all(isinstance(v, (int, float, list)) for v in saved.values())  # numbers only: the verdicts are the claims'
    assert c.w4_minus_w3 == pytest.approx(0.05 - 0.2, abs=1e-6) and c.rising_layer_steps_share == 0.75
    assert c.rising_bucket_steps_share == 1.0 and c.longest_minus_shortest is not None
    assert all(d > 0 for d in c.longest_minus_shortest)
    assert res.spearman_length is not None and all(s.rho == pytest.approx(1.0) for s in res.spearman_length)
    # planted: longer and deeper is larger, a dip at layer 4, high order uniform, middle orders one- and two-hot
    assert _verdicts(res) == {"longer": claims.HOLDS, "rises": claims.HOLDS, "dip": claims.HOLDS,
                              "smoother": claims.HOLDS}
    np.testing.assert_allclose(res.entropy_normalised.attention_high, 1.0, atol=1e-6)
    np.testing.assert_allclose(res.entropy_normalised.attention_middle_qi, 0.0, atol=1e-9)
    np.testing.assert_allclose(res.entropy.attention_middle_qp, np.log(2), atol=1e-6)
    ex = res.example
    assert ex.layer == 2 and np.shape(ex.attention_high) == (len(ex.tokens),) * 2
    # JSON round trip and strict JSON (no NaN: empty buckets are null)
    doc = json.loads(json.dumps(res.to_json(), allow_nan=False))
    back = am.Result.from_json(doc)
    assert back.w_by_bucket == res.w_by_bucket and back.claims == res.claims
    assert doc["config"]["edges"] == [4, 8, 16] and doc["model"]["name"] == "tiny-mog"


def test_claims_fail_when_the_planted_trend_is_reversed(acts_template):
    acts = planted(acts_template, lambda n, j: 0.9 - 0.01 * n - 0.05 * j)
    res = am.compute(am.Config(edges=[4, 8, 16], min_bucket=1), acts=acts)
    c = res.claims
    assert c.rising_layer_steps_share == 0 and c.rising_bucket_steps_share == 0
    assert c.w4_minus_w3 is not None and c.w4_minus_w3 < 0
    # w4 is below w3 but above w5: no dip (the claim compares w4 with both neighbours)
    assert _verdicts(res) == {"longer": claims.FAILS, "rises": claims.FAILS, "dip": claims.FAILS,
                              "smoother": claims.HOLDS}
    # buckets below min_bucket are not used: the length claim is then not testable
    res = am.compute(am.Config(edges=[4, 8, 16], min_bucket=100), acts=acts)
    assert res.claims.longest_minus_shortest is None and res.claims.buckets_used == 0
    assert _verdicts(res)["longer"] == claims.UNTESTED


def test_figures_plot_the_result_numbers(acts_template, tmp_path):
    import matplotlib.pyplot as plt

    from analyses.common import Result
    from analyses.style import model_color

    res = am.compute(am.Config(edges=[4, 8, 16], min_bucket=1), acts=planted(acts_template, lambda n, j: 0.2 + 0.1 * j))
    fig = am.plot([res])
    lines = fig.axes[0].get_lines()
    used = [k for k, c in enumerate(res.bucket_counts) if c]
    assert len(lines) == len(used)
    for line, k in zip(lines, used):
        np.testing.assert_allclose(line.get_ydata(), res.w_by_bucket[k])
        np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 6))
    assert fig.axes[0].title.get_color() == model_color("tiny-mog")  # the model's colour in every figure
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_ylabel()
    plt.close(fig)
    fig = am.plot_attention(res)
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), res.example.attention_high)
    for line, m in zip(fig.axes[3].get_lines(), am.ORDERS):
        np.testing.assert_allclose(line.get_ydata(), res.entropy_normalised.of(m))
    assert fig.axes[3].title.get_color() == model_color("tiny-mog")
    plt.close(fig)
    assert isinstance(res, Result) and am.Result.from_json(res) is res
    with pytest.raises(KeyError, match="entropy"):
        am.Result.from_json({k: v for k, v in res.to_json().items() if k != "entropy"})
    paths = am.ANALYSIS.save_figures([am.Result.from_json(res.to_json())], str(tmp_path))
    assert {p.name for p in paths} == {"mog-subgraph-weights.png", "mog-subgraph-weights.pdf",
                                       "mog-attention-tiny-mog.png", "mog-attention-tiny-mog.pdf"}


def test_bad_inputs(acts_template):
    with pytest.raises(ProbeError, match="edges"):
        am.compute(am.Config(edges=[8, 4]), acts=acts_template)
    with pytest.raises(ProbeError, match="layer"):
        am.compute(am.Config(layer=9), acts=acts_template)
    bert = probes.extract("tiny-bert", TEXTS[:2], maps=True, cache_dir=None, progress=False)
    with pytest.raises(ProbeError, match="family mog"):
        am.compute(acts=bert)
    with pytest.raises(ProbeError, match="weight-gate"):
        am.plot([])


@pytest.mark.integration
def test_cli_bad_inputs_are_one_line_and_results_reproducible(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(am.__file__).resolve().parent.parent
    for argv, fragment in ((["--model", "tiny-bert"], "family mog"), (["--model", "tiny-mog", "--layer", "7"], "1..2"),
                           (["--model", "tiny-bert-lens"], "family mog")):
        proc = subprocess.run([sys.executable, "-m", "analyses.mog", *argv, "--n-sentences", "6", "--out",
                               str(tmp_path / "bad")], cwd=repo, capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and lines[-1].startswith("error: ") and fragment in lines[-1], proc.stderr
        assert "Traceback" not in proc.stderr
    docs = []
    for run in ("a", "b"):
        am.main(["--model", "tiny-mog", "--n-sentences", "12", "--edges", "12", "--out", str(tmp_path / run)])
        docs.append((tmp_path / run / "results" / "mog" / "tiny-mog.json").read_bytes())
    assert docs[0] == docs[1]
    assert json.loads(docs[0])["config"]["edges"] == [12]
