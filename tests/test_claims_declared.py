"""The claims are declared with keyword arguments and a name, and a mistake in a declaration is an error where it
is made, never a claim the table calls "not testable": a misspelt accessor fails when the declarations are
imported, an analysis name that is not registered (or an accessor of another analysis's Result) fails where the
claim is declared, and an accessor called with the wrong arguments raises from the claims command (exit status
not 0) instead of becoming a verdict. The recurrence tables pick their claims by name."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import claims_docs as docs
import pytest

from analyses.anisotropy import Result as Anisotropy
from analyses.summary import claims, papers
from analyses.summary.claim import Claim, Read
from analyses.transitions import Result as Transitions

PAPERS = Path(papers.__file__)


def _import_planted(tmp_path: Path, old: str, new: str):
    """analyses/summary/papers.py with ``old`` replaced by ``new`` once, imported as a module of its own."""
    source = PAPERS.read_text(encoding="utf-8")
    assert source.count(old) >= 1, old
    path = tmp_path / "planted_papers.py"
    path.write_text(source.replace(old, new, 1), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("planted_papers", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["planted_papers"] = module  # as an import does (dataclasses read the module's namespace)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop("planted_papers", None)
    return module


def test_the_declarations_import_as_they_are(tmp_path):
    module = _import_planted(tmp_path, "Read(Anisotropy.last_layer_mean", "Read(Anisotropy.last_layer_mean")
    assert [c.name for c in module.CLAIMS] == [c.name for c in claims.CLAIMS]


def test_a_misspelt_accessor_fails_when_the_claims_are_imported(tmp_path):
    with pytest.raises(AttributeError, match="last_layer_maen"):
        _import_planted(tmp_path, "Read(Anisotropy.last_layer_mean", "Read(Anisotropy.last_layer_maen")


def test_a_misspelt_analysis_name_fails_where_the_claim_is_declared(tmp_path):
    with pytest.raises(ValueError, match="'anisotrpy', which is not registered"):
        _import_planted(tmp_path, 'analysis="anisotropy"', 'analysis="anisotrpy"')
    with pytest.raises(ValueError, match="'mogg', which is not registered"):
        _import_planted(tmp_path, 'analysis="mog"', 'analysis="mogg"')  # a Check's


def test_an_accessor_of_another_analysis_fails_where_the_claim_is_declared():
    claim = claims.claim_named("slstm-token-anisotropy")
    with pytest.raises(ValueError, match="an accessor of analyses.transitions"):
        dataclasses.replace(claim, read=Read(Transitions.middle_token_distance))
    with pytest.raises(ValueError, match="BELOW_ZERO or ABOVE_ZERO"):
        dataclasses.replace(claim, claimed_sign=0)


def test_claims_are_keyword_built_and_named():
    with pytest.raises(TypeError):
        Claim("x", "S-LSTM", "§7.1", "a statement", "anisotropy")  # positional arguments: refused
    names = [c.name for c in claims.CLAIMS]
    assert len(set(names)) == len(names) == len(claims.NAMED) == 17
    assert claims.claim_named("recurrent-topic-jsd") is claims.RECURRENCE_CLAIMS[2]
    with pytest.raises(KeyError, match="no claim named 'recurrent-topics'"):
        claims.claim_named("recurrent-topics")
    with pytest.raises(ValueError, match="two claims share a name"):
        papers.by_name([claims.CLAIMS[0], dataclasses.replace(claims.CLAIMS[1], name=claims.CLAIMS[0].name)])


def test_an_accessor_called_wrongly_raises_instead_of_a_not_testable_verdict(tmp_path, capsys):
    """The accessor exists but the claim calls it without its argument: a TypeError from the claims command, not
    "[not testable] ... (a result is not of the expected shape ...)" with exit status 0."""
    docs.write(tmp_path, "anisotropy", [docs.anisotropy("slstm-small", "slstm", 0.1, 0.2),
                                        docs.anisotropy("bert-small", "bert", 0.4, 0.6, seed=1)])
    good = claims.claim_named("slstm-token-anisotropy")
    results = claims.typed(claims.load_all(tmp_path))
    assert good.judge(results).verdict == claims.INCONCLUSIVE  # one seed each
    wrong = dataclasses.replace(good, read=Read(Anisotropy.last_layer_mean))  # the level is missing
    with pytest.raises(TypeError, match="level"):
        wrong.judge(results)
    with pytest.raises(TypeError):
        claims.judge_all(results, [wrong])
