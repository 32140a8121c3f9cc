"""The IsoScore claims and figures say which number they report: the unbiased estimate of IsoScore (the suite's),
not the plug-in the paper's algorithm and the isoscore package give on the same points; the claims' evidence
shows the plug-in's comparison beside it, each with its verdict."""

from __future__ import annotations

import claims_docs as docs
import matplotlib
import pytest

from analyses import isoscore
from analyses.summary import claims

matplotlib.use("Agg")


def _results(out, plugin_slstm: float, plugin_bert: float) -> None:
    """Three seeds where the unbiased estimate puts the S-LSTM's tokens above BERT's, and the plug-ins given."""
    found = []
    for seed in range(3):
        suffix = "" if seed == 0 else f"-seed{seed}"
        for name, fam, value, plug in (("slstm-small", "slstm", 0.40, plugin_slstm), ("bert-small", "bert", 0.30,
                                                                                       plugin_bert)):
            d = docs.isoscore(name + suffix, fam, value + 0.01 * seed, 0.5, seed=seed)
            for level in ("token", "sentence"):
                d["layers"][-1][level]["isoscore_plugin"] = plug + 0.002 * seed
            found.append(d)
    docs.write(out, "isoscore", found)


def _token_claim(out) -> claims.Finding:
    return next(f for f in claims.evaluate(out) if f.analysis == "isoscore" and "token" in f.claim)


def test_the_claim_names_the_unbiased_estimate_and_shows_the_plug_in_with_its_verdict(tmp_path):
    _results(tmp_path, plugin_slstm=0.19, plugin_bert=0.25)  # the plug-in points the other way
    f = _token_claim(tmp_path)
    assert "by the unbiased estimate of IsoScore" in f.claim and "by IsoScore" not in f.claim
    assert f.verdict == claims.HOLDS and f.quantity == "last-layer token IsoScore (unbiased estimate)"
    head, plug = f.evidence.split(". The plug-in IsoScore")
    assert "slstm-small 0.400 [" in head and "holds" in head  # the unbiased estimate, with its interval and verdict
    assert "slstm-small 0.190 vs bert-small 0.250" in plug and "point values" in plug
    assert plug.endswith("verdict on the plug-in: does not hold")
    sentence = next(f for f in claims.evaluate(tmp_path) if f.analysis == "isoscore" and "sentence" in f.claim)
    assert "unbiased estimate of IsoScore" in sentence.claim and "verdict on the plug-in" in sentence.evidence


def test_a_result_without_plug_in_values_says_so_for_the_plug_in_only(tmp_path):
    _results(tmp_path, 0.19, 0.25)
    for p in (tmp_path / "results" / "isoscore").glob("*.json"):
        p.write_text(p.read_text().replace('"isoscore_plugin"', '"other"'))
    f = _token_claim(tmp_path)
    assert f.verdict == claims.HOLDS and "verdict on the plug-in: not testable" in f.evidence


def test_the_figure_and_headline_say_unbiased_estimate(tmp_path):
    _results(tmp_path, 0.19, 0.25)
    res = [isoscore.Result.from_json(docs.isoscore("slstm-small", "slstm", 0.4, 0.5))]
    res[0].layers[-1].token.isoscore_plugin = 0.194
    fig = isoscore.plot(res)
    assert all("unbiased estimate of IsoScore" in ax.get_ylabel() for ax in fig.axes if ax.get_ylabel())
    assert "unbiased estimate" in isoscore.ANALYSIS.figures[0].caption.split(".")[0]
    assert res[0].headline()["token IsoScore (unbiased estimate), last layer"] == "0.400 (plug-in 0.194)"
    assert res[0].last_layer_isoscore_plugin("token").point == pytest.approx(0.194)
