"""A programming error is never a verdict: only data that is absent (a number the run never computed, a null) makes
a claim "not testable"; a KeyError, AttributeError or TypeError from the claim's own code -- here a misspelt row key
planted inside a Result's accessor -- is raised, by the claim's judge and by the claims command alike."""

from __future__ import annotations

import dataclasses

import claims_docs as docs
import pytest

from analyses import stats
from analyses.absent import Absent
from analyses.anisotropy import Result as Anisotropy
from analyses.redundancy import Result as Redundancy
from analyses.summary import claims


def _anisotropy_pair(out) -> dict[str, list]:
    docs.write(out, "anisotropy", [docs.anisotropy("slstm-small", "slstm", 0.1, 0.2),
                                   docs.anisotropy("bert-small", "bert", 0.4, 0.6, seed=1)])
    return claims.typed(claims.load_all(out))


def _misspelt(self: Anisotropy, level: str) -> stats.Sample:
    """Anisotropy.last_layer_mean with its row's attribute misspelt ("maen")."""
    return stats.Sample(self.layers[-1].of(level).maen)


def test_a_misspelt_row_key_inside_an_accessor_raises_instead_of_a_verdict(tmp_path, monkeypatch):
    results = _anisotropy_pair(tmp_path)
    claim = claims.claim_named("slstm-token-anisotropy")
    assert isinstance(claim, claims.Claim)
    assert claim.judge(results).verdict == claims.INCONCLUSIVE  # the accessor as written: one seed each
    monkeypatch.setattr(claim.read, "method", _misspelt)
    with pytest.raises(AttributeError, match="maen"):
        claim.judge(results)
    with pytest.raises(AttributeError, match="maen"):
        claims.evaluate(tmp_path)  # the claims command: an error, not a "not testable" line


def test_a_misspelt_key_inside_a_check_rule_raises():
    speed = claims.claim_named("slstm-speed")
    assert isinstance(speed, claims.Check)
    check = dataclasses.replace(speed, rule=lambda results: (claims.HOLDS, str(results[0].config["slpoe"])))
    found = {"speed": [type("R", (), {"config": {}})()]}
    with pytest.raises(KeyError, match="slpoe"):
        check.judge(found)


def test_a_number_the_run_never_computed_is_not_testable_with_its_name(tmp_path):
    found = [docs.redundancy("slstm-small", "slstm", docs.per_unit(40, 1)),
             docs.redundancy("bert-small", "bert", docs.per_unit(30, 2))]
    for doc in found:  # both results were run at windows of 50 tokens; the claim reads n = 100
        doc["windows"][0]["window"] = 50
    docs.write(tmp_path, "redundancy", found)
    results = claims.typed(claims.load_all(tmp_path))
    with pytest.raises(Absent, match="k at n = 100, p = 0.9"):
        Redundancy.mean_k(results["redundancy"][0], 100, 0.9)
    f = claims.claim_named("slstm-redundancy-90").judge(results)
    assert f.verdict == claims.UNTESTED and "a result lacks k at n = 100, p = 0.9" in f.evidence, f.evidence


def test_a_null_number_is_still_not_testable(tmp_path):
    docs.write(tmp_path, "anisotropy", [docs.anisotropy("slstm-small", "slstm", 0.1, 0.2),
                                        docs.anisotropy("bert-small", "bert", 0.4, 0.6, seed=1)])
    results = claims.typed(claims.load_all(tmp_path))
    results["anisotropy"][0].layers[-1].token.mean = None
    f = claims.claim_named("slstm-token-anisotropy").judge(results)
    assert f.verdict == claims.UNTESTED and "last-layer token cosine is missing (null)" in f.evidence
