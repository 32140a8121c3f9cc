"""A collapsed layer (every vector one vector, up to rounding) is n/a in every measure, not a number.

The model fixture is a tiny random BERT whose last LayerNorm has weight 0 and a random bias of scale ~1: every
last-layer state is the bias, so mean-pooled sentence vectors are one vector up to the float32 rounding of a mean
over different lengths, and [CLS] vectors are bit-identical. Planted arrays check the same at realistic scale,
and a layer of small but genuine variance (relative spread 1e-3) keeps its numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import probes
from analyses import intrinsic_dimension, isoscore, rounding, similarity
from analyses.probing.fit import standardise
from analyses.similarity import measures as sm
from probes.errors import ProbeError

TEXTS = ["The cat sat on the mat today.", "Her Father fondly replied, Ah my dear!", "It rained all day long.",
         "A much longer sentence about the river and the mill.", "She smiled.", "They walked home together.",
         "One two three four five six seven eight nine ten eleven twelve.", "Yes."] * 4


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """{"good": a tiny random BERT folder, "constlast": the same with its last LayerNorm's weight 0 (bias random)}."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=512))
    root = tmp_path_factory.mktemp("models")
    out = {"good": root / "good", "constlast": root / "constlast"}
    model.save_pretrained(out["good"])
    ln: Any = model.get_submodule("encoder.layer.1.output.LayerNorm")  # the last layer's
    with torch.no_grad():
        ln.weight.zero_()
        ln.bias.copy_(torch.randn(32, generator=torch.Generator().manual_seed(1)))
    model.save_pretrained(out["constlast"])
    for f in out.values():
        tok.save_pretrained(f)
    return out


def rounded_copies(base: np.ndarray, n: int, ulps: int, seed: int = 0) -> np.ndarray:
    """(n, d) float32: ``base`` (d,) in every row, each value moved by up to ``ulps`` float32 steps."""
    rng = np.random.default_rng(seed)
    base = base.astype(np.float32)
    return (base + rng.integers(-ulps, ulps + 1, (n, len(base))) * np.spacing(base)).astype(np.float32)


def layers(seed: int = 0, n: int = 60):
    """{"noise": one vector up to rounding (scale ~3), "same": bit-identical rows, "narrow": a genuine spread of
    1e-3 of the scale, "real": a random layer}, all (n, 24) float32."""
    rng = np.random.default_rng(seed)
    base = 3 * rng.standard_normal(24)
    return {"noise": rounded_copies(base, n, 3, seed), "same": np.tile(base, (n, 1)).astype(np.float32),
            "narrow": (base + 3e-3 * rng.standard_normal((n, 24))).astype(np.float32),
            "real": rng.standard_normal((n, 24)).astype(np.float32)}


@pytest.mark.parametrize("kind", ["noise", "same"])
def test_a_collapsed_layer_has_no_cka_svcca_or_rsa(kind):
    L = layers()
    got = sm.similarity_matrices([L["real"], L[kind]], [L["real"], L["narrow"]])
    for m in sm.MEASURES:
        assert got["undefined"][m].tolist() == [[False, False], [True, True]], m  # the collapsed row only
        assert (got[m][1] == 0).all(), m  # the documented value of an undefined cell
    assert got["constant"][0][1] == list(range(24))  # every column dropped


def test_a_narrow_layer_keeps_its_numbers():
    """A genuine relative spread of 1e-3 is 30x above the tolerance: every measure is defined, and equals what
    the exact tests (no rounding tolerance) give."""
    L = layers()
    got = sm.similarity_matrices([L["narrow"]], [L["real"], L["narrow"]])
    assert not any(got["undefined"][m].any() for m in sm.MEASURES)
    assert got["constant"][0][0] == []
    saved = rounding.ULPS
    try:
        rounding.ULPS = 0
        exact = sm.similarity_matrices([L["narrow"]], [L["real"], L["narrow"]])
    finally:
        rounding.ULPS = saved
    for m in sm.MEASURES:
        np.testing.assert_array_equal(got[m], exact[m])


def test_rdm_ties_are_up_to_rounding():
    same = layers()["same"]
    d = sm.rdm(same)
    assert sm.standard_ranks(d, rounding.cosine_distance_tie(np.float32)) is None
    assert sm.rsa(same, layers(1)["real"]) == 0.0  # undefined: 0, as documented
    for kind in ("noise", "same"):  # the correlation distance: rows constant up to rounding have no direction
        flat = rounded_copies(np.full(30, 2.5), 12, 3)
        X = np.c_[layers()[kind][:12], flat]
        assert sm.similarity_matrices([X], None, ["rsa"], distance="correlation")["undefined"]["rsa"].all()
        assert sm.similarity_matrices([flat], None, ["rsa"], distance="correlation")["rsa_zero"][0] == [12]


def test_isoscore_and_intrinsic_dimension_of_rounding_noise_are_undefined():
    noise = layers(n=80)["noise"].astype(np.float64)
    cfg = intrinsic_dimension.Config(mle_k=5)
    got = intrinsic_dimension.estimate(noise, np.arange(80), cfg, 0.95, dtype=np.float32)
    assert got.twonn is None and got.mle is None and "same up to rounding" in got.note
    narrow = intrinsic_dimension.estimate(layers(n=80)["narrow"].astype(np.float64), np.arange(80), cfg, 0.95,
                                          dtype=np.float32)
    assert narrow.twonn is not None and narrow.mle is not None


def test_a_probe_does_not_scale_rounding_noise_up():
    X = np.c_[rounded_copies(np.array([2.7]), 50, 3), np.random.default_rng(0).standard_normal((50, 1))]
    Z, _ = standardise(X.astype(np.float32), X[:5].astype(np.float32))
    assert np.abs(Z[:, 0] - Z[0, 0]).max() < 1e-5  # the noise stays noise (scale 1), not a unit-variance feature
    assert Z[:, 1].std() == pytest.approx(1.0)


def test_the_collapsed_model_from_python_is_n_a(models):
    good, const = str(models["good"]), str(models["constlast"])
    iso = isoscore.run(f"{const}?sentence=mean", TEXTS, cache_dir=None, cache_dtype="float32", n_tokens=100)
    for level in ("token", "sentence"):
        row = iso.layers[-1].of(level)
        assert row.isoscore is None and row.isoscore_ci is None and "same" in row.note, (level, row)
    for how in ("?sentence=mean", ""):  # mean: rows equal up to rounding; cls: bit-identical rows
        r = similarity.run((good, const + how), TEXTS, cache_dir=None, cache_dtype="float32")
        for m in ("cka", "svcca", "rsa"):
            assert r.matrices.of(m).ab[-1][-1] is None and r.matrices.of(m).bb[-1][-1] is None, (how, m)
            assert r.matrices.of(m).aa[-1][-1] is not None, (how, m)  # the good model's last layer has a number
        assert "n/a" in r.headline()["CKA last x last layer"]


def test_a_list_of_units_from_python_is_one_error_line_and_one_unit_saves(models, tmp_path):
    from analyses.common import write_result

    pair = (str(models["good"]), str(models["good"]))
    with pytest.raises(ProbeError, match=r"^unit is one value \(sentence or token\), not \['sentence'\]"):
        similarity.run(pair, TEXTS[:8], cache_dir=None, unit=["sentence"], measure=["cka"])
    r = similarity.run(pair, TEXTS[:8], cache_dir=None, unit="sentence", measure=["cka"])
    assert r.model_name.endswith("__sentence")
    write_result(tmp_path, "similarity", r.model_name, r, similarity.table_rows(r))
    assert (tmp_path / "results" / "similarity" / f"{r.model_name}.json").exists()


@pytest.mark.integration
def test_the_collapsed_layer_is_null_from_the_command_line(models, tmp_path):
    """Mean-pooled sentence vectors of the dead LayerNorm, cached in float32: one vector up to the rounding of
    means over different lengths, which CKA, SVCCA and RSA read as structure when tested exactly. Every
    last-layer cell with it is null."""
    proc = subprocess.run([sys.executable, "-m", "analyses.similarity", "--model", str(models["good"]), "--model",
                           f"{models['constlast']}?sentence=mean", "--cache-dtype", "float32", "--n-sentences", "40",
                           "--unit", "sentence", "--no-figures", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = (tmp_path / "out" / "results" / "similarity").glob("*.json")
    matrices = json.loads(path.read_text())["matrices"]
    for m in ("cka", "svcca", "rsa"):
        assert matrices[m]["ab"][-1][-1] is None and matrices[m]["bb"][-1][-1] is None, m
        assert matrices[m]["aa"][-1][-1] is not None, m
